#!/usr/bin/env bash
# Waits until this node's Ray runtime is registered with the head under its fabric address.
# Inputs: CONTAINER, NODE_IP (the fabric address), ADDRESS (head ip:port), TIMEOUT (seconds).
# Runs after container-run.sh on the same node; on a stopped container or a timeout, fails with the
# container's log tail.
#
# `ray start` prints "Ray runtime started." only once the GCS holds this node's record (Ray's
# Node() polls the GCS for it first), and "Local node IP: <ip>" is the address it registers under.
# The wait follows the container's log and wakes at each line: no polling, nothing run inside the
# container. (Asking Ray instead, with a driver per poll, made every node's raylet prestart Python
# workers at once.) The cluster-wide check with Ray's own answer is ray-ready.sh, once, on the head.
set -euo pipefail

deadline=$((SECONDS + TIMEOUT))
logs_pid=""
trap '[ -z "$logs_pid" ] || kill "$logs_pid" 2>/dev/null || true' EXIT

fail_with_log() {
  echo "$1" >&2
  docker logs --tail 40 "$CONTAINER" >&2 || true
  exit 1
}

local_ip=""
while true; do
  if [ "$(docker inspect --format '{{.State.Running}}' "$CONTAINER" 2>/dev/null)" != "true" ]; then
    fail_with_log "Ray container $CONTAINER stopped before it joined $ADDRESS; its last log lines:"
  fi
  # The log from its start, then each new line as Ray writes it; it ends when the container stops.
  exec {log}< <(exec docker logs --follow "$CONTAINER" 2>&1)
  logs_pid=$!
  started=""
  while remaining=$((deadline - SECONDS)) && [ "$remaining" -gt 0 ] && IFS= read -r -t "$remaining" -u "$log" line; do
    case "$line" in
      *"Local node IP:"*) local_ip="$(sed -n 's/.*Local node IP: *\([^ ]*\).*/\1/p' <<<"$line")" ;;
      *"Ray runtime started."*) started=yes && break ;;
    esac
  done
  kill "$logs_pid" 2>/dev/null || true
  exec {log}<&-
  logs_pid=""
  if [ -n "$started" ]; then
    if [ "$local_ip" != "$NODE_IP" ]; then
      echo "Ray on this node registered as ${local_ip:-an unknown address}, not its fabric address $NODE_IP" >&2
      exit 1
    fi
    echo "ray node $NODE_IP registered with $ADDRESS"
    exit 0
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    fail_with_log "Ray on this node did not register as $NODE_IP with $ADDRESS within ${TIMEOUT}s; the container's last log lines:"
  fi
  # The log ended before the line: the container stopped (checked above) or the stream was cut.
  sleep 0.5
done
