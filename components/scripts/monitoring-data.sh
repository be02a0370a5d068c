#!/usr/bin/env bash
# Makes Prometheus's data directory on its node (monitoring.dataDir/<stack>) and gives it to the user
# Prometheus runs as in its image (the official images' nobody), which may write nothing else: as
# root, in a throw-away container of Prometheus's image without network (the SSH user may not write
# /var/lib). Data already there is kept: a new Prometheus container goes on with it.
# Inputs: DIR, IMAGE, OWNER (a uid); runs after docker-state.sh (one_line).
set -euo pipefail

parent="$(dirname -- "$DIR")"
base="$(basename -- "$DIR")"
if out="$(docker run --rm --network none --user 0 --entrypoint sh --volume "$parent:/vllm-fleet-dir-parent" "$IMAGE" \
  -c 'mkdir -p "/vllm-fleet-dir-parent/$1" && chown "$2:$2" "/vllm-fleet-dir-parent/$1"' monitoring-data "$base" "$OWNER" 2>&1)"; then
  echo "Prometheus's data in $DIR (owned by uid $OWNER)"
  exit 0
fi
echo "could not make Prometheus's data directory $DIR in a container of $IMAGE: $(one_line "$out")" >&2
exit 1
