#!/usr/bin/env bash
# Stops `vllm serve` in the Ray head container (the container itself belongs to the Ray cluster).
# Inputs: CONTAINER. Succeeds when nothing runs.
set -euo pipefail

if ! docker inspect "$CONTAINER" >/dev/null 2>&1; then
  echo "no container $CONTAINER"
  exit 0
fi
docker exec "$CONTAINER" pkill -f "vllm serve" >/dev/null 2>&1 || true
for _ in $(seq 1 30); do
  docker exec "$CONTAINER" pgrep -f "vllm serve" >/dev/null 2>&1 || { echo "vllm serve stopped"; exit 0; }
  sleep 1
done
docker exec "$CONTAINER" pkill -9 -f "vllm serve" >/dev/null 2>&1 || true
echo "vllm serve killed"
