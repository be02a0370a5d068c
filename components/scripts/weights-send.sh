#!/usr/bin/env bash
# Sending side of a weight sync, on the first node: rsync of the model directory to the receiving
# node's daemon over the fabric. Resumable: partial files are kept and continued on the next run.
# Inputs: MODEL_PATH, TARGET_IP (the receiver's fabric address), PORT, SECRET.
set -euo pipefail

export RSYNC_PASSWORD="$SECRET"
start_ns=$(date +%s%N)
# Progress lines (every ~10 %) and the final statistics go to the output.
rsync -a --partial --delete --no-inc-recursive --info=progress2,stats1 \
  "$MODEL_PATH/" "rsync://fleet@$TARGET_IP:$PORT/model/" |
  tr '\r' '\n' | awk '/%/ { p = $2 + 0; if (p >= next_p) { print "progress", $0; next_p = p + 10 } next } NF { print }'
echo "weights-synced to $TARGET_IP millis=$((($(date +%s%N) - start_ns) / 1000000))"
