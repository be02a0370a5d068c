#!/usr/bin/env bash
# Receiving side of a weight sync: an rsync daemon bound to this node's fabric address, writable by
# the sending node only (hosts allow + a per-sync secret), for exactly the model directory.
# Inputs: MODEL_PATH, BIND_IP (this node's fabric address), SENDER_IP, PORT, SECRET.
set -euo pipefail

state="/tmp/vllm-fleet-rsyncd-$PORT"
if [ -s "$state/pid" ]; then
  kill "$(cat "$state/pid")" 2>/dev/null || true
fi
rm -rf "$state"
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
for _ in $(seq 1 50); do
  [ -s "$state/pid" ] && break
  sleep 0.2
done
[ -s "$state/pid" ] || { echo "rsync daemon did not start on $BIND_IP:$PORT" >&2; cat "$state/log" >&2 || true; exit 1; }
echo "receiving into $MODEL_PATH on $BIND_IP:$PORT"
