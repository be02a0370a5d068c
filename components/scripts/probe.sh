#!/usr/bin/env bash
# Probe of one node: prints `### <section>` blocks that infra/core/facts.ts parses.
# Inputs (assigned before this script): IMAGE, MODEL_PATH; runs after model-list.sh and image-identity.sh.
# Read-only: it changes nothing on the host. A missing tool leaves its section empty; the checks
# that need the fact then fail with the node named (preflight in infra/core/preflight.ts).
set -euo pipefail

section() { printf '### %s\n' "$1"; }

section hostname
hostname

section nvidia-smi-query
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits 2>/dev/null || true

section nvidia-smi
nvidia-smi 2>/dev/null | head -n 12 || true

section meminfo
grep -E '^(MemTotal|MemFree|MemAvailable|Cached|SwapTotal):' /proc/meminfo || true

section ip-addr
ip -4 addr show 2>/dev/null || true

# Every interface's MTU and operstate (the fabric port and its twin rail: the host checks).
section links
for link in /sys/class/net/*; do
  [ -r "$link/mtu" ] || continue
  printf '%s %s %s\n' "${link##*/}" "$(cat "$link/mtu" 2>/dev/null || echo 0)" "$(cat "$link/operstate" 2>/dev/null || echo unknown)"
done

# A userspace OOM killer running (earlyoom, systemd-oomd, nohang): by process name, or by its
# systemd unit where /proc hides other users' processes (hidepid).
section oom-guard
{
  cat /proc/[0-9]*/comm 2>/dev/null | grep -xE 'earlyoom|systemd-oomd|nohang' || true
  if command -v systemctl >/dev/null 2>&1; then
    for unit in earlyoom systemd-oomd nohang nohang-desktop; do
      if systemctl is-active --quiet "$unit" 2>/dev/null; then echo "${unit%-desktop}"; fi
    done
  fi
} | sort -u

section ibdev2netdev
ibdev2netdev 2>/dev/null || true

# The device nodes NCCL opens for RoCE (ib_uverbs, rdma_ucm); a container without them falls back to TCP.
section rdma-devices
find /dev/infiniband -maxdepth 1 -type c 2>/dev/null | sort || true

section docker
docker version --format '{{.Server.Version}}' 2>/dev/null || true

# Docker's image store (classic or containerd) and the image by content (image-identity.sh).
section docker-store
image_store

section image
image_facts "$IMAGE"

section model
list_model_dir "$MODEL_PATH"

# The model's config.json itself, for the fit planner (infra/core/fit); bounded in size.
section model-config
if [ -f "$MODEL_PATH/config.json" ]; then
  head -c 262144 "$MODEL_PATH/config.json"
  echo
fi
