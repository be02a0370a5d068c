#!/usr/bin/env bash
# Receiving side of an image copy (image.source copy), on a node that should have the first node's
# image: a short-lived receiver bound to this node's fabric address, for the sending node only, with
# a per-copy secret (fabric-stream.py), piping the stream into `docker load`. Runs while the first
# node runs image-send.sh; nothing passes through the machine running Pulumi. A node that already
# has the wanted id tells the sender so and receives nothing. After a load the tag must name the
# wanted id: a broken or wrong copy leaves the tag removed (never a wrong image) and fails, so the
# next `pulumi up` copies again.
# Inputs: IMAGE, WANT_ID, BIND_IP (this node's fabric address), SENDER_IP, PORT, SECRET, FABRIC_STREAM.
set -euo pipefail

image_id() { docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true; }
receive() { FLEET_SECRET="$SECRET" python3 -c "$FABRIC_STREAM" receive "$BIND_IP" "$PORT" "$SENDER_IP" "$@"; }

if [ "$(image_id)" = "$WANT_ID" ]; then
  receive --have
  echo "image-present $IMAGE $WANT_ID"
  exit 0
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
receive -- docker load | tee "$out" || status=$?
now="$(image_id)"
if [ "$now" != "$WANT_ID" ]; then
  if [ -n "$now" ]; then
    docker image rm --force "$IMAGE" >/dev/null 2>&1 || true
    echo "removed the tag $IMAGE (it named ${now}, not the wanted $WANT_ID)" >&2
  fi
  echo "the image copy into $IMAGE failed (receiver exit $status): the next pulumi up copies it again" >&2
  exit 1
fi
stats="$(grep -o 'bytes=[0-9]* millis=[0-9]*' "$out" | tail -n 1 || true)"
echo "image-copied $IMAGE $WANT_ID ${stats:-bytes=? millis=?}"
