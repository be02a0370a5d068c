#!/usr/bin/env bash
# Starts one container from its docker run arguments (see components/containerSpec.ts).
# Inputs: NAME (container name), RUN_ARGS (array: the arguments after `docker`).
# A stale container of the same name (an earlier failed run) is removed first, so a retry converges.
# Prints the new container's id; fails with the container's log tail if it does not stay up.
set -euo pipefail

docker rm -f "$NAME" >/dev/null 2>&1 || true
id="$(docker "${RUN_ARGS[@]}")"
sleep 2
if [ "$(docker inspect --format '{{.State.Running}}' "$NAME" 2>/dev/null)" != "true" ]; then
  echo "container $NAME exited right after start; its last log lines:" >&2
  docker logs --tail 40 "$NAME" >&2 || true
  exit 1
fi
echo "container-id $id"
