#!/usr/bin/env bash
# Receiving side of an image copy (image.source copy), on a node that should have the first node's
# image: a short-lived receiver bound to this node's fabric address, for the sending node only, with
# a per-copy secret (fabric-stream.py), piping the stream into `docker load`. Runs while the first
# node runs image-send.sh; nothing passes through the machine running Pulumi. Images are compared
# by content identity (image-identity.sh), not by Docker's id: the two nodes may keep images in
# different stores (classic, containerd), where one image has two ids. A node that already has the
# wanted content tells the sender so and receives nothing. Otherwise it tells the sender which
# layers it has (its store, and each image's ordered layer diff ids: layers_offer), and the sender
# leaves out of the stream the layers it may (image-layers.py says when). After a load the tag must
# name the wanted content, whatever was left out: a broken or wrong copy leaves the tag removed
# (never a wrong image) and fails, so the next `pulumi up` copies again. Once the wanted content is
# here, the step leaves its mark (image-mark.sh): the next run keeps the step while the image stays,
# and copies again once it is gone.
# Inputs: IMAGE, WANT_IDENTITY, BIND_IP (this node's fabric address), SENDER_IP, PORT, SECRET,
# FABRIC_STREAM, MARK and REVISION (the delivery's mark); runs after image-identity.sh and image-mark.sh.
set -euo pipefail

identity() { image_identity "$IMAGE" 2>/dev/null || true; }
receive() { FLEET_SECRET="$SECRET" python3 -c "$FABRIC_STREAM" receive "$BIND_IP" "$PORT" "$SENDER_IP" "$@"; }

if [ "$(identity)" = "$WANT_IDENTITY" ]; then
  receive --have
  mark_delivered "$MARK" "$REVISION" "$IMAGE"
  echo "image-present $IMAGE $WANT_IDENTITY"
  exit 0
fi
# What this node has, for the sender: `store classic|containerd`, then `image DIFF_ID...` per image
# (all of them, untagged too: every layer of an image on the classic store is in its layer store).
# A listing that fails offers nothing, and the whole image comes.
layers_offer() {
  local store
  store="$(image_store)"
  if grep -qx 'driver-type=io.containerd.snapshotter.v1' <<<"$store"; then
    echo "store containerd"
    return 0
  fi
  echo "store classic"
  docker image ls --all --quiet --no-trunc 2>/dev/null | sort -u |
    xargs -r docker image inspect --format 'image{{range .RootFS.Layers}} {{.}}{{end}}' 2>/dev/null || true
}
out="$(mktemp)"
offer="$(mktemp)"
trap 'rm -f "$out" "$offer"' EXIT
layers_offer >"$offer"
status=0
receive --note "$offer" -- docker load | tee "$out" || status=$?
now="$(identity)"
if [ "$now" != "$WANT_IDENTITY" ]; then
  # What the tag names now, if anything: other content (or none for this node's platform).
  if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    docker image rm --force "$IMAGE" >/dev/null 2>&1 || true
    echo "removed the tag $IMAGE (it named content ${now:-without layers for the platform here}, not the wanted $WANT_IDENTITY)" >&2
  fi
  echo "the image copy into $IMAGE failed (receiver exit $status): the next pulumi up copies it again" >&2
  exit 1
fi
mark_delivered "$MARK" "$REVISION" "$IMAGE"
stats="$(grep -o 'bytes=[0-9]* millis=[0-9]*' "$out" | tail -n 1 || true)"
echo "image-copied $IMAGE $WANT_IDENTITY ${stats:-bytes=? millis=?}"
