#!/usr/bin/env bash
# hostPrep.dropCaches: drops the node's page cache (clean pages only: `sync` first writes the dirty
# ones back) before its serving containers start, as NVIDIA's DGX Spark playbook does before a load:
# on GB10's unified memory CUDA's free memory leaves out the page cache, so a host that has read
# tens of GB of weights shows too little free memory to vLLM. It frees nothing that is in use.
# Needs root: the SSH user is root, or may run `sudo` without a password (`sudo -n`), as for
# security.firewall. Prints MemFree and Cached before and after.
set -euo pipefail

meminfo_line() {
  awk '/^(MemFree|Cached):/ {printf "%s %d MiB ", $1, $2 / 1024}' /proc/meminfo
}

before="$(meminfo_line)"
drop='sync; echo 3 > /proc/sys/vm/drop_caches'
if [ "$(id -u)" = 0 ]; then
  sh -c "$drop"
elif sudo -n true 2>/dev/null; then
  sudo -n sh -c "$drop"
else
  echo "hostPrep.dropCaches needs root to write /proc/sys/vm/drop_caches: $(id -un) is not root and may not use sudo without a password here (allow it, e.g. a line \"$(id -un) ALL=(root) NOPASSWD: ALL\" in /etc/sudoers.d/, or set vllm-fleet:hostPrep.dropCaches to false)" >&2
  exit 1
fi
echo "dropped caches: before ${before}; after $(meminfo_line)"
