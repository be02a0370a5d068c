#!/usr/bin/env bash
# Waits until this node's Ray runtime is registered, alive, under its fabric address.
# Inputs: CONTAINER, NODE_IP (the fabric address), ADDRESS (head ip:port), TIMEOUT (seconds).
# Runs after container-run.sh on the same node; on timeout prints the container's log tail.
set -euo pipefail

deadline=$((SECONDS + TIMEOUT))
while true; do
  if ! [ "$(docker inspect --format '{{.State.Running}}' "$CONTAINER" 2>/dev/null)" = "true" ]; then
    echo "Ray container $CONTAINER stopped; its last log lines:" >&2
    docker logs --tail 40 "$CONTAINER" >&2 || true
    exit 1
  fi
  if docker exec -i "$CONTAINER" python3 - "$ADDRESS" "$NODE_IP" >/dev/null 2>&1 <<'PY'
import sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
alive = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
sys.exit(0 if sys.argv[2] in alive else 1)
PY
  then
    echo "ray node $NODE_IP registered"
    exit 0
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "Ray on this node did not register as $NODE_IP with $ADDRESS within ${TIMEOUT}s; the container's last log lines:" >&2
    docker logs --tail 40 "$CONTAINER" >&2 || true
    exit 1
  fi
  sleep 2
done
