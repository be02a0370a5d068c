#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine: installs Debian's docker.io when dockerd is
# missing and starts dockerd when none answers. The simulated Sparks (test/sim) and the demo need it.
# Idempotent: on a machine whose engine already answers it does nothing.
set -euo pipefail

log() { printf '[docker] %s\n' "$*" >&2; }

engine_answers() { docker info >/dev/null 2>&1; }

if engine_answers; then
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  log "no Docker engine answers and this user cannot start one; start dockerd (or add this user to the docker group) and retry"
  exit 1
fi

apt_ready=""
apt_install() {
  if [ -z "$apt_ready" ]; then
    log "apt-get update"
    apt-get update -qq
    apt_ready=1
  fi
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v dockerd >/dev/null 2>&1 || apt_install docker.io
# The client may come from elsewhere (a newer one in /usr/local/bin); Debian's works with its dockerd.
command -v docker >/dev/null 2>&1 || apt_install docker.io
for tool in iptables ip; do
  command -v "$tool" >/dev/null 2>&1 || apt_install iptables iproute2
done

log_file=/var/log/vllm-fleet-dockerd.log
log "starting dockerd (log: $log_file)"
# setsid: the engine must outlive the shell that started it (CI steps, test runners).
setsid dockerd >"$log_file" 2>&1 </dev/null &

for _ in $(seq 1 60); do
  if engine_answers; then
    log "engine up: $(docker version --format '{{.Server.Version}}')"
    exit 0
  fi
  sleep 1
done
log "dockerd did not answer within 60 s; last lines of $log_file:"
tail -n 20 "$log_file" >&2 || true
exit 1
