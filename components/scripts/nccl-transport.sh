#!/usr/bin/env bash
# The fabric check of one node: which transport its rank's NCCL chose, read from NCCL's own start-up
# line (`NCCL INFO Using network IB|Socket`, NCCL_DEBUG=INFO) in the rank's log on this node: the
# Ray worker logs in the Ray container (`ray` executor), the container's log (`mp`). Read-only.
# Prints `transport <name>` (IB, Socket, a plugin's name, or unknown) and NCCL's NET lines; with
# POLICY refuse, a rank on TCP sockets fails the check, naming the node.
# A read, in every state of the container: where the lines cannot be read (the Ray workers' logs
# are inside the Ray container, which takes an exec only while it runs; an mp rank's log is there
# in any state but gone), it says `transport unknown` and, on a line `unread <why>`, why.
# Inputs: NODE, CONTAINER, EXECUTOR (ray|mp), POLICY (refuse|warn), HINT (why it may be so); runs
#         after docker-state.sh.
set -euo pipefail

status="$(container_status "$CONTAINER" 2>/dev/null)" || status="unknown (Docker on this node does not answer)"
[ "$status" = gone ] && status="missing"
lines="" unread=""
if [ "$EXECUTOR" = ray ]; then
  if [ "$status" = running ]; then
    # Newest worker log first: a restarted vllm serve has new workers.
    lines="$(docker exec "$CONTAINER" sh -c 'ls -t /tmp/ray/session_latest/logs/worker-*.out 2>/dev/null | head -n 200 | xargs -r grep -h "NCCL INFO \(Using network\|NET/\)" 2>/dev/null' 2>/dev/null || true)"
    # Nothing read: no such line, or the container stopped under the exec.
    if [ -z "$lines" ]; then
      status="$(container_status "$CONTAINER" 2>/dev/null)" || status="unknown (Docker on this node does not answer)"
      [ "$status" = gone ] && status="missing"
    fi
  fi
  case "$status" in
    running) ;;
    unknown*) unread="container $CONTAINER is $status" ;;
    *) unread="container $CONTAINER is $status (the Ray workers' logs are inside it)" ;;
  esac
elif [ "$status" = missing ] || [ "${status%% *}" = unknown ]; then
  unread="container $CONTAINER is $status"
else
  lines="$(docker logs "$CONTAINER" 2>&1 | grep "NCCL INFO \(Using network\|NET/\)" | tac || true)"
fi
# The newest start's lines come first: its `Using network`, and the NET lines printed before it.
chosen="$(printf '%s\n' "$lines" | grep -m1 -o 'Using network [^ ]*' | sed 's/^Using network //' || true)"
net="$(printf '%s\n' "$lines" | grep -m2 -o 'NET/[A-Za-z]* : .*' || true)"
echo "transport ${chosen:-unknown}"
if [ -n "$unread" ]; then
  echo "unread $unread"
fi
if [ -n "$net" ]; then
  printf '%s\n' "$net" | sed 's/^/nccl /'
fi
if [ "$chosen" = Socket ] && [ "$POLICY" = refuse ]; then
  echo "node $NODE: NCCL uses TCP sockets (NET/Socket), not RoCE (NET/IB): ${HINT} (to serve over TCP anyway, set vllm-fleet:fabric.socketTransport to warn)" >&2
  exit 1
fi
