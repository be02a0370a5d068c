#!/usr/bin/env bash
# Removes this stack's compile caches on a node, at `pulumi destroy` with cache.removeOnDestroy
# (infra/core/plan/cache.ts). Inputs: DIR (<cache.dir>/<stack>: every image's caches of this stack),
# IMAGE (the serving image); runs after docker-state.sh (one_line).
# The serving containers write their caches as root, so the SSH user (in the docker group, seldom
# root) may not be allowed to remove them: then `rm` runs as root in a throw-away container of the
# serving image, without network, with the parent directory mounted. A directory that is not there
# is nothing to do (a node never served, or removed by hand).
set -euo pipefail

if [ ! -e "$DIR" ]; then
  echo "no compile cache at $DIR"
  exit 0
fi
if rm -rf -- "$DIR" 2>/dev/null; then
  echo "removed the compile cache $DIR"
  exit 0
fi
parent="$(dirname -- "$DIR")"
base="$(basename -- "$DIR")"
if out="$(docker run --rm --network none --user 0 --entrypoint rm --volume "$parent:/vllm-fleet-cache-parent" "$IMAGE" -rf -- "/vllm-fleet-cache-parent/$base" 2>&1)"; then
  echo "removed the compile cache $DIR (as root, in a container of $IMAGE)"
  exit 0
fi
echo "could not remove the compile cache $DIR: this user may not, and a container of $IMAGE could not ($(one_line "$out")); remove it as root (sudo rm -rf $DIR)" >&2
exit 1
