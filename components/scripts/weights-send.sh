#!/usr/bin/env bash
# Sending side of a weight sync, on the first node, to the receivers of weights-receive.sh on the
# target's fabric address. rsync is bound by its own per-byte work (checksums, one process a side)
# long before a fabric link is full, so the bytes go two ways at once:
#   - files of BULK_MIN bytes or more: fabric-stream.py send-files. The receiver says which it
#     lacks or has with another size or time (rsync's quick check); those go in STREAMS plain
#     streams at once (sendfile from the page cache, each file whole on one stream, the largest
#     first; a part left by a broken run is continued, and stale parts are removed at the end);
#   - everything else: one rsync over the whole directory, skipping those files (--max-size): the
#     small files, directories and deletions.
# Links are followed (a node gets the content a link points to, as a file or directory): a model
# directory is read, never written, and a link leading out of it (a Hugging Face cache snapshot's
# into its blobs) would point at nothing on the receiving node.
# Resumable: a broken run leaves the parts received, and the next run continues them.
# Inputs: MODEL_PATH, TARGET_IP (the receiver's fabric address), PORT (rsync), FILES_PORT, SECRET,
# STREAMS, FABRIC_STREAM.
set -euo pipefail

readonly BULK_MIN=1048576
export RSYNC_PASSWORD="$SECRET"
url="rsync://fleet@$TARGET_IP:$PORT/model/"
start_ns=$(date +%s%N)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rsync -a --copy-links --partial --delete --max-size=$((BULK_MIN - 1)) --exclude='.*.fleet-part' --no-inc-recursive --info=stats1 \
  "$MODEL_PATH/" "$url" >"$work/rest.log" 2>&1 &
rest=$!
bulk_status=0
find -L "$MODEL_PATH" -type f -size +$((BULK_MIN - 1))c ! -name '.*.fleet-part' -printf '%P\n' |
  FLEET_SECRET="$SECRET" python3 -c "$FABRIC_STREAM" send-files "$TARGET_IP" "$FILES_PORT" "$MODEL_PATH" --streams "$STREAMS" |
  tee "$work/bulk.log" || bulk_status=$?
rest_status=0
wait "$rest" || rest_status=$?
sed 's/^/rsync: /' "$work/rest.log"
if [ "$bulk_status" != 0 ] || [ "$rest_status" != 0 ]; then
  echo "the weight sync to $TARGET_IP failed (files of $BULK_MIN bytes or more: exit $bulk_status; rsync of the rest: exit $rest_status); the next pulumi up continues it" >&2
  exit 1
fi
bulk="$(grep -o 'files-sent files=[0-9]* same=[0-9]* streams=[0-9]* bytes=[0-9]*' "$work/bulk.log" | tail -n 1)"
[ -n "$bulk" ] || { echo "the bulk transfer to $TARGET_IP said nothing of its end" >&2; exit 1; }
streams="${bulk#*streams=}" && streams="${streams%% *}"
bulk_bytes="${bulk##*bytes=}"
rsync_bytes=$(awk 'match($0, /sent [0-9,]+ bytes/) { n = substr($0, RSTART + 5, RLENGTH - 11); gsub(/,/, "", n); sum += n } END { printf "%d", sum }' "$work/rest.log")
echo "weights-synced to $TARGET_IP millis=$((($(date +%s%N) - start_ns) / 1000000)) streams=$streams bytes=$((bulk_bytes + rsync_bytes))"
