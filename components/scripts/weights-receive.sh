#!/usr/bin/env bash
# Receiving side of a weight sync, on a node that should have the first node's model directory,
# both bound to this node's fabric address and open to the sending node only, with a per-sync
# secret: the bulk receiver of fabric-stream.py (receive-files: the files that differ, in parallel
# plain streams, continuing partial parts) and an rsync daemon for exactly the model directory
# (at the same time: the small files, directories, deletions). Both are stopped by weights-close.sh; the
# bulk receiver also ends by itself when the sender is done or gone.
# Inputs: MODEL_PATH, BIND_IP (this node's fabric address), SENDER_IP, PORT (rsync), FILES_PORT,
# SECRET, FABRIC_STREAM; runs after weights-stop.sh.
set -euo pipefail

state="/tmp/vllm-fleet-rsyncd-$PORT"
stop_weight_receivers "$state" # those of an earlier sync that did not end
mkdir -p "$state" "$MODEL_PATH"
chmod 700 "$state"
printf 'fleet:%s\n' "$SECRET" >"$state/secrets"
chmod 600 "$state/secrets"
cat >"$state/rsyncd.conf" <<CONF
pid file = $state/pid
use chroot = no
[model]
path = $MODEL_PATH
read only = no
auth users = fleet
secrets file = $state/secrets
hosts allow = $SENDER_IP
CONF
rsync --daemon --config="$state/rsyncd.conf" --address="$BIND_IP" --port="$PORT" --log-file="$state/log"
FLEET_SECRET="$SECRET" setsid python3 -c "$FABRIC_STREAM" receive-files "$BIND_IP" "$FILES_PORT" "$SENDER_IP" "$MODEL_PATH" \
  </dev/null >"$state/files.log" 2>&1 &
echo "$!" >"$state/files.pid"
for _ in $(seq 1 50); do
  [ -s "$state/pid" ] && grep -q '^receiving files' "$state/files.log" && break
  sleep 0.2
done
[ -s "$state/pid" ] || { echo "rsync daemon did not start on $BIND_IP:$PORT" >&2; cat "$state/log" >&2 || true; exit 1; }
grep -q '^receiving files' "$state/files.log" || { echo "the bulk receiver did not start on $BIND_IP:$FILES_PORT" >&2; cat "$state/files.log" >&2; exit 1; }
echo "receiving into $MODEL_PATH on $BIND_IP:$PORT (rsync) and $BIND_IP:$FILES_PORT (bulk)"
