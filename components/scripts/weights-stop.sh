#!/usr/bin/env bash
# Defines stop_weight_receivers STATE: stops the rsync daemon and the bulk receiver of a weight
# sync whose pid files are in STATE and waits (at most 10 s) until they are gone, so that their
# ports are free again; then removes STATE. Used before a sync starts and when it ends.
set -euo pipefail

stop_weight_receivers() {
  local file pid pids=()
  for file in "$1/pid" "$1/files.pid"; do
    if [ -s "$file" ]; then
      pid="$(cat "$file")"
      kill "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  rm -rf "$1"
}
