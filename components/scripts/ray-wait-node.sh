#!/usr/bin/env bash
# Waits until this node's Ray runtime is registered with the head under its fabric address.
# Inputs: CONTAINER, NODE_IP (the fabric address), ADDRESS (head ip:port), TIMEOUT (seconds).
# Runs after container-run.sh on the same node; on a stopped container or a timeout, fails with the
# container's log tail.
#
# `ray start` prints "Ray runtime started." only once the GCS holds this node's record (Ray's
# Node() polls the GCS for it first), and "Local node IP: <ip>" is the address it registers under.
# Reading them from the container's log costs nothing; asking Ray instead (ray.init as a driver)
# would start a Python driver per poll and make the raylet prestart workers on every node at once.
# The cluster-wide check with Ray's own answer is ray-ready.sh, once, on the head.
set -euo pipefail

deadline=$((SECONDS + TIMEOUT))
while true; do
  if ! [ "$(docker inspect --format '{{.State.Running}}' "$CONTAINER" 2>/dev/null)" = "true" ]; then
    echo "Ray container $CONTAINER stopped before it joined $ADDRESS; its last log lines:" >&2
    docker logs --tail 40 "$CONTAINER" >&2 || true
    exit 1
  fi
  log="$(docker logs "$CONTAINER" 2>&1 || true)"
  if grep -qF "Ray runtime started." <<<"$log"; then
    local_ip="$(sed -n 's/.*Local node IP: *\([^ ]*\).*/\1/p' <<<"$log" | tail -n 1)"
    if [ "$local_ip" != "$NODE_IP" ]; then
      echo "Ray on this node registered as ${local_ip:-an unknown address}, not its fabric address $NODE_IP" >&2
      exit 1
    fi
    echo "ray node $NODE_IP registered with $ADDRESS"
    exit 0
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "Ray on this node did not register as $NODE_IP with $ADDRESS within ${TIMEOUT}s; the container's last log lines:" >&2
    docker logs --tail 40 "$CONTAINER" >&2 || true
    exit 1
  fi
  sleep 0.5
done
