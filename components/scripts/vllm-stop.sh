#!/usr/bin/env bash
# Defines stop_vllm_serve CONTAINER: stops `vllm serve` inside CONTAINER (the Ray head; the
# container itself belongs to the Ray cluster) and waits until it is gone, looking every 0.1 s
# inside the container (one `docker exec`); after 30 s it is killed. Succeeds when nothing runs.
# Used by vllm-serve's delete and, before a restart, by vllm-start.sh.
set -euo pipefail

stop_vllm_serve() {
  if ! docker inspect "$1" >/dev/null 2>&1; then
    echo "no container $1"
    return 0
  fi
  # "[s]erve": the pattern does not match the shell that carries it.
  if docker exec "$1" sh -c '
    pkill -f "vllm [s]erve" || exit 0
    for _ in $(seq 1 300); do
      pgrep -f "vllm [s]erve" >/dev/null || exit 0
      sleep 0.1
    done
    exit 1' >/dev/null 2>&1; then
    echo "vllm serve stopped"
  else
    docker exec "$1" pkill -9 -f "vllm serve" >/dev/null 2>&1 || true
    echo "vllm serve killed"
  fi
}
