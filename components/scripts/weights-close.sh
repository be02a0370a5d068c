#!/usr/bin/env bash
# Ends a weight sync on the receiving node: stops the rsync daemon, then lists the model directory
# as the probe does (so preflight compares what is there now).
# Inputs: MODEL_PATH, PORT; runs after model-list.sh.
set -euo pipefail

state="/tmp/vllm-fleet-rsyncd-$PORT"
if [ -s "$state/pid" ]; then
  kill "$(cat "$state/pid")" 2>/dev/null || true
fi
rm -rf "$state"
echo "### model"
list_model_dir "$MODEL_PATH"
