#!/usr/bin/env bash
# Removes a directory of this stack on a node at `pulumi destroy`, when the stack asks: its compile
# caches (cache.removeOnDestroy, infra/core/plan/cache.ts), Prometheus's data
# (monitoring.removeDataOnDestroy, infra/core/plan/monitoring.ts).
# Inputs: DIR (<cache.dir>/<stack>, <monitoring.dataDir>/<stack>), WHAT (what it holds, for the
# messages: "compile cache"), IMAGE (the image of the containers that wrote it); runs after
# docker-state.sh (one_line).
# Containers wrote it as another user (root, Prometheus's), so the SSH user (in the docker group,
# seldom root) may not be allowed to remove it: then `rm` runs as root in a throw-away container of
# that image, without network, with the parent directory mounted. A directory that is not there is
# nothing to do (a node never served, or removed by hand).
set -euo pipefail

if [ ! -e "$DIR" ]; then
  echo "no $WHAT at $DIR"
  exit 0
fi
if rm -rf -- "$DIR" 2>/dev/null; then
  echo "removed the $WHAT $DIR"
  exit 0
fi
parent="$(dirname -- "$DIR")"
base="$(basename -- "$DIR")"
if out="$(docker run --rm --network none --user 0 --entrypoint rm --volume "$parent:/vllm-fleet-dir-parent" "$IMAGE" -rf -- "/vllm-fleet-dir-parent/$base" 2>&1)"; then
  echo "removed the $WHAT $DIR (as root, in a container of $IMAGE)"
  exit 0
fi
echo "could not remove the $WHAT $DIR: this user may not, and a container of $IMAGE could not ($(one_line "$out")); remove it as root (sudo rm -rf $DIR)" >&2
exit 1
