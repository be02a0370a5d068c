#!/usr/bin/env bash
# Ends a weight sync on the receiving node: stops the rsync daemon and the bulk receiver (which
# ends by itself when the sync went through; its last line says what it took), then lists
# the model directory as the probe does (so preflight compares what is there now).
# Inputs: MODEL_PATH, PORT; runs after model-list.sh and weights-stop.sh.
set -euo pipefail

state="/tmp/vllm-fleet-rsyncd-$PORT"
# The bulk receiver ends by itself moments after the sender's last word: let it say what it took.
for _ in $(seq 1 30); do
  weight_receiver_runs "$state" files.pid >/dev/null || break
  sleep 0.1
done
if [ -f "$state/files.log" ]; then
  grep '^files-received' "$state/files.log" || true
fi
stop_weight_receivers "$state"
echo "### model"
list_model_dir "$MODEL_PATH"
