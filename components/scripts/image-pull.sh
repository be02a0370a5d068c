#!/usr/bin/env bash
# Pulls the image on this node. Inputs: IMAGE.
set -euo pipefail

docker pull --quiet "$IMAGE" >/dev/null
echo "image-pulled $IMAGE $(docker image inspect --format '{{.Id}}' "$IMAGE")"
