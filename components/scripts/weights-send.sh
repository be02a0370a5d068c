#!/usr/bin/env bash
# Sending side of a weight sync, on the first node: rsync of the model directory to the receiving
# node's daemon over the fabric. One rsync stream is bound by its own CPU (checksums, one process a
# side) long before a fabric link is full, so the files are split by size into up to STREAMS
# disjoint sets sent at once, the largest first; then one last rsync over the whole directory
# catches the rest (directories, deletions) and finds the big files done. Resumable: partial files
# are kept and continued on the next run.
# Inputs: MODEL_PATH, TARGET_IP (the receiver's fabric address), PORT, SECRET, STREAMS.
set -euo pipefail

export RSYNC_PASSWORD="$SECRET"
url="rsync://fleet@$TARGET_IP:$PORT/model/"
start_ns=$(date +%s%N)
lists="$(mktemp -d)"
trap 'rm -rf "$lists"' EXIT
# Greedy split: each file (largest first) to the set with the fewest bytes so far.
(cd "$MODEL_PATH" && find . -type f -printf '%s %P\n') | sort -rn |
  awk -v k="$STREAMS" -v dir="$lists" '{
    best = 0; for (i = 1; i < k; i++) if (load[i] < load[best]) best = i
    load[best] += $1; sub(/^[0-9]+ /, ""); print > (dir "/set." best)
  }'
# Progress lines (every ~10 % of each stream) and the statistics go to the output.
stream() { # name log rsync-args...
  local name="$1" log="$2"
  shift 2
  rsync -a --partial --no-inc-recursive --info=progress2,stats1 "$@" "$MODEL_PATH/" "$url" 2>&1 |
    tr '\r' '\n' |
    awk -v name="$name" '/%/ { p = $2 + 0; if (p >= next_p) { print "progress", name, $0; fflush(); next_p = p + 10 } next } NF { print name ": " $0; fflush() }' |
    tee "$log"
}
pids=()
for set in "$lists"/set.*; do
  [ -e "$set" ] || continue
  stream "stream ${set##*.}" "$set.log" --files-from="$set" &
  pids+=("$!")
done
streams=${#pids[@]}
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
[ "$status" = 0 ] || { echo "a weight stream to $TARGET_IP failed (exit $status); the next pulumi up resumes it" >&2; exit "$status"; }
stream "final" "$lists/final.log" --delete
bytes=$(cat "$lists"/*.log | awk 'match($0, /sent [0-9,]+ bytes/) { n = substr($0, RSTART + 5, RLENGTH - 11); gsub(/,/, "", n); sum += n } END { printf "%d", sum }')
echo "weights-synced to $TARGET_IP millis=$((($(date +%s%N) - start_ns) / 1000000)) streams=$streams bytes=$bytes"
