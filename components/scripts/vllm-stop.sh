#!/usr/bin/env bash
# Stopping `vllm serve` inside the Ray head container (the container itself belongs to the Ray
# cluster). STOP_VLLM_SERVE_SH defines, for a shell inside the container, stop_serve: SIGTERM, a
# look every 0.1 s until the server is gone, SIGKILL after 30 s; it succeeds when nothing runs and
# prints what it did. stop_vllm_serve CONTAINER runs it in one `docker exec`; vllm-start.sh runs
# it in the same exec that starts the new server. Used by vllm-serve's delete and its restarts.
set -euo pipefail

# It runs in a shell whose command line is this text: no word of it may match "vllm serve" (the
# pattern, written "vllm [s]erve", does not), or the stop would stop the shell that runs it.
STOP_VLLM_SERVE_SH='stop_serve() {
  pkill -f "vllm [s]erve" || { echo "the server was not running"; return 0; }
  for _ in $(seq 1 300); do
    pgrep -f "vllm [s]erve" >/dev/null || { echo "the server stopped"; return 0; }
    sleep 0.1
  done
  pkill -9 -f "vllm [s]erve" || true
  for _ in $(seq 1 50); do
    pgrep -f "vllm [s]erve" >/dev/null || { echo "the server was killed (30 s after SIGTERM)"; return 0; }
    sleep 0.1
  done
  echo "the server still runs after SIGKILL" >&2
  return 1
}
'

stop_vllm_serve() {
  if ! docker inspect "$1" >/dev/null 2>&1; then
    echo "no container $1"
    return 0
  fi
  docker exec "$1" sh -c "$STOP_VLLM_SERVE_SH"'stop_serve'
}
