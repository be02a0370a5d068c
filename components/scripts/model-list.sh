#!/usr/bin/env bash
# Defines list_model_dir DIR: what infra/core/facts.ts parseModelDir reads (exists, config.json hash,
# one `<bytes> <name>` line per file, links followed: what the weight sync copies). Used by the
# probe and after a weight sync.
set -euo pipefail

list_model_dir() {
  if [ -d "$1" ]; then
    echo "exists yes"
    if [ -f "$1/config.json" ]; then
      echo "config-sha256 $(sha256sum "$1/config.json" | cut -d' ' -f1)"
    fi
    find -L "$1" -maxdepth 1 -type f -printf '%s %f\n' | sort -k2
  else
    echo "exists no"
  fi
}
