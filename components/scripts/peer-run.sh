#!/usr/bin/env bash
# Runs on the machine running Pulumi (the pulumi-command runner's command with a peer): starts one
# node's program and its peer's program on the other node at the same time, each over its own ssh
# session with its programs on standard input. Only control passes here: the two sessions' output
# (the peer's lines prefixed with its node's name); the programs exchange their data directly.
# Succeeds when both succeed; when one fails, the other gets 10 s, then its session is closed.
# Inputs: OPERATION, SELF_RUN, PEER_RUN (remote command lines), then on standard input PEER_NODE,
# SELF_SSH, PEER_SSH (ssh argument arrays ending in --), SELF_PROGRAMS, PEER_PROGRAMS.
set -uo pipefail

eval "$(cat)"
printf '%s' "$PEER_PROGRAMS" | "${PEER_SSH[@]}" "$PEER_RUN" > >(sed -u "s/^/$PEER_NODE: /") 2> >(sed -u "s/^/$PEER_NODE: /" >&2) &
peer=$!
printf '%s' "$SELF_PROGRAMS" | "${SELF_SSH[@]}" "$SELF_RUN" &
self=$!
peer_status="" self_status=""
while [ -z "$peer_status" ] || [ -z "$self_status" ]; do
  sleep 0.2
  if [ -z "$peer_status" ] && ! kill -0 "$peer" 2>/dev/null; then wait "$peer"; peer_status=$?; fi
  if [ -z "$self_status" ] && ! kill -0 "$self" 2>/dev/null; then wait "$self"; self_status=$?; fi
  failed=""
  if [ -n "$peer_status" ] && [ "$peer_status" != 0 ] && [ -z "$self_status" ]; then failed=$self; fi
  if [ -n "$self_status" ] && [ "$self_status" != 0 ] && [ -z "$peer_status" ]; then failed=$peer; fi
  if [ -n "$failed" ]; then
    for _ in $(seq 1 100); do kill -0 "$failed" 2>/dev/null || break; sleep 0.1; done
    kill "$failed" 2>/dev/null || true
  fi
done
if [ "$peer_status" != 0 ]; then echo "$PEER_NODE: its part ($OPERATION) exited $peer_status" >&2; fi
[ "$peer_status" = 0 ] && [ "$self_status" = 0 ]
