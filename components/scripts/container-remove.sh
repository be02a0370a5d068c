#!/usr/bin/env bash
# Removes one container if it exists. Inputs: NAME.
set -euo pipefail

if docker inspect "$NAME" >/dev/null 2>&1; then
  docker rm -f "$NAME" >/dev/null
  echo "removed $NAME"
else
  echo "no container $NAME"
fi
