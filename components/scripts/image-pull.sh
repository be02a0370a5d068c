#!/usr/bin/env bash
# Pulls the image on this node (image.source pull) and reports its content identity
# (image-identity.sh). A name pinned by digest (`repo@sha256:...`, `repo:tag@sha256:...`) is pulled
# by that digest, and what arrived is checked: the node must know the image by that registry
# digest (RepoDigests), else the tag is not trusted and the step fails naming what it got.
# Inputs: IMAGE, DIGEST (the pin's `sha256:...`, or empty for a tag); runs after image-identity.sh.
set -euo pipefail

if ! out="$(docker pull --quiet "$IMAGE" 2>&1)"; then
  echo "docker pull $IMAGE failed: $(printf '%s' "$out" | tr -s '\n' ' ')" >&2
  exit 1
fi
if [ -n "$DIGEST" ]; then
  digests="$(docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$IMAGE" 2>/dev/null || true)"
  if ! printf '%s\n' "$digests" | grep -q "@${DIGEST}\$"; then
    echo "docker pull $IMAGE gave an image this node does not know by $DIGEST (its registry digests: $(printf '%s' "$digests" | tr -s '\n' ' ' | sed 's/ *$//' | grep . || echo none)); expected the pinned build" >&2
    exit 1
  fi
fi
identity="$(image_identity "$IMAGE")"
echo "image-pulled $IMAGE $identity"
