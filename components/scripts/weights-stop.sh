#!/usr/bin/env bash
# Defines stop_weight_receivers STATE: stops the rsync daemon and the bulk receiver of a weight
# sync whose pid files are in STATE and waits (at most 10 s, then SIGKILL) until they are gone, so
# that their ports are free again; then removes STATE. Used before a sync starts and when it ends.
# A pid file outlives its process (a reboot, a receiver that ended by itself, a sync cut short), and
# its pid may since name another process: only a process whose command line is the receiver's is
# signalled (weight_receiver_runs). Nothing there, or nothing of ours running, is nothing to stop.
set -euo pipefail

# weight_receiver_runs STATE FILE: the pid in STATE/FILE, when that process runs and is the receiver
# the file belongs to (the rsync daemon of STATE's config, or fabric-stream.py's receive-files).
weight_receiver_runs() {
  local pid mark
  pid="$(cat "$1/$2" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  case "$2" in
    pid) mark="$1/rsyncd.conf" ;;
    *) mark="receive-files" ;;
  esac
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$mark" || return 1
  echo "$pid"
}

stop_weight_receivers() {
  local file pid pids=() alive
  for file in pid files.pid; do
    if pid="$(weight_receiver_runs "$1" "$file")"; then
      kill "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  for _ in $(seq 1 100); do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ "${#alive[@]}" = 0 ] && break
    sleep 0.1
  done
  # One that ignored SIGTERM would keep its port.
  for pid in "${alive[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$1"
}
