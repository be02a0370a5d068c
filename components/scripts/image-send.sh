#!/usr/bin/env bash
# Sending side of an image copy, on the first node: `docker save` streamed over the fabric to the
# receiver of image-receive.sh on the target (fabric-stream.py), with the per-copy secret. Refuses
# when this node's image is no longer the one the run read (the target would get another id).
# Inputs: IMAGE, WANT_ID, TARGET_IP (the receiver's fabric address), PORT, SECRET, FABRIC_STREAM.
set -euo pipefail

have="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
if [ "$have" != "$WANT_ID" ]; then
  echo "$IMAGE here is ${have:-missing}, not $WANT_ID as read at the start of this run" >&2
  exit 1
fi
size="$(docker image inspect --format '{{.Size}}' "$IMAGE")"
FLEET_SECRET="$SECRET" exec python3 -c "$FABRIC_STREAM" send "$TARGET_IP" "$PORT" --size "$size" -- docker save "$IMAGE"
