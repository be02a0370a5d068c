#!/usr/bin/env bash
# Loads an image streamed on standard input (`docker save` on another node) unless this node
# already has it with the wanted id, in which case nothing is read and nothing changes.
# Inputs: IMAGE (the reference), WANT_ID (the image id on the source node).
set -euo pipefail

have="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
if [ "$have" = "$WANT_ID" ]; then
  echo "image-present $IMAGE $WANT_ID"
  exit 0
fi
start=$SECONDS
docker load >/dev/null
now="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
if [ "$now" != "$WANT_ID" ]; then
  echo "after docker load, $IMAGE is ${now:-missing}, not $WANT_ID" >&2
  exit 1
fi
bytes="$(docker image inspect --format '{{.Size}}' "$IMAGE")"
echo "image-copied $IMAGE $WANT_ID bytes=$bytes seconds=$((SECONDS - start))"
