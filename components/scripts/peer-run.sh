#!/usr/bin/env bash
# Runs on the machine running Pulumi (the pulumi-command runner's command with a peer): starts one
# node's program and its peer's program on the other node at the same time, each over its own ssh
# session with its programs on standard input. Only control passes here: the two sessions' output
# (the peer's lines prefixed with its node's name); the programs exchange their data directly.
# Succeeds when both succeed; when one fails, the other gets 10 s, then its session is closed. A
# failed side's one line (run-step.sh: the node's own, or worded here when its session failed) is
# held back and printed at the end, the peer's first (its failure usually explains this node's).
# Inputs: OPERATION, SELF_RUN, PEER_RUN (remote command lines), FLEET_STEP (the resource),
# FLEET_SSH_CONNECT_SECONDS (ssh's ConnectTimeout, for a node that does not answer), then on
# standard input PEER_NODE, SELF_WHERE, PEER_WHERE (the nodes as messages name them), SELF_SSH,
# PEER_SSH (ssh argument arrays ending in --), SELF_PROGRAMS, PEER_PROGRAMS. Needs run-step.sh's
# functions.
set -uo pipefail

eval "$(cat)"
notes="$(mktemp -d)"
trap 'rm -rf "$notes"' EXIT

# side_notes <file> [prefix]: passes a session's standard error on (prefixed) and, at its end, keeps
# what fleet_filter noted in <file> (written whole, then moved, so a reader never sees half).
side_notes() {
  fleet_filter "${2:-}"
  # Silent when the run is over already (its notes removed): nobody reads them any more.
  { declare -p fleet_seen_step fleet_seen_any fleet_seen_reason fleet_seen_command >"$1.part" && mv "$1.part" "$1"; } 2>/dev/null
}

printf '%s' "$PEER_PROGRAMS" | "${PEER_SSH[@]}" "$PEER_RUN" > >(sed -u "s/^/$PEER_NODE: /") 2> >(side_notes "$notes/peer" "$PEER_NODE: ") &
peer=$!
printf '%s' "$SELF_PROGRAMS" | "${SELF_SSH[@]}" "$SELF_RUN" 2> >(side_notes "$notes/self") &
self=$!
peer_status="" self_status="" stopped=""
while [ -z "$peer_status" ] || [ -z "$self_status" ]; do
  sleep 0.2
  if [ -z "$peer_status" ] && ! kill -0 "$peer" 2>/dev/null; then wait "$peer"; peer_status=$?; fi
  if [ -z "$self_status" ] && ! kill -0 "$self" 2>/dev/null; then wait "$self"; self_status=$?; fi
  failed=""
  if [ -n "$peer_status" ] && [ "$peer_status" != 0 ] && [ -z "$self_status" ]; then failed=$self; fi
  if [ -n "$self_status" ] && [ "$self_status" != 0 ] && [ -z "$peer_status" ]; then failed=$peer; fi
  if [ -n "$failed" ]; then
    for _ in $(seq 1 100); do kill -0 "$failed" 2>/dev/null || break; sleep 0.1; done
    if kill "$failed" 2>/dev/null; then stopped=$failed; fi
  fi
done

# no_answer: whether ssh's last word (fleet_filter's notes) is that it gave up waiting for the node,
# for a TCP connection or the SSH banner, as stepFailure.ts's sshConnectTimedOut reads it.
no_answer() {
  local last=${fleet_seen_reason:-$fleet_seen_any}
  [[ $last =~ ^ssh:\ connect\ to\ host\ [^[:space:]]+\ port\ [0-9]+:\ (Connection|Operation)\ timed\ out$ || $last == "Connection timed out during banner exchange" ]]
}

# report <side> <where> <status> <pid>: the one line of a failed side.
report() {
  [ "$3" = 0 ] && return 0
  # The notes are written when the session's standard error ends, just after the session.
  for _ in $(seq 1 50); do [ -e "$notes/$1" ] && break; sleep 0.1; done
  fleet_seen_step="" fleet_seen_any="" fleet_seen_reason="" fleet_seen_command=""
  # shellcheck disable=SC1090
  [ -e "$notes/$1" ] && source "$notes/$1"
  if [ "$4" = "$stopped" ]; then
    fleet_step_line "$OPERATION" "$2" "$3" stopped
  elif [ -n "$fleet_seen_step" ]; then
    printf '%s\n' "$fleet_seen_step"
  elif [ "$3" = 255 ] && no_answer; then
    # Worded here, not in run-step.sh: that one travels with every program, this one only here.
    printf 'vllm-fleet: %s (%s) on node %s: does not answer on SSH (no reply within %s s)\n' "$FLEET_STEP" "$OPERATION" "$2" "$FLEET_SSH_CONNECT_SECONDS"
  elif [ "$3" = 255 ]; then
    fleet_step_line "$OPERATION" "$2" "$3" ssh
  else
    fleet_step_line "$OPERATION" "$2" "$3"
  fi
}
report peer "$PEER_WHERE" "$peer_status" "$peer" >&2
report self "$SELF_WHERE" "$self_status" "$self" >&2
[ "$peer_status" = 0 ] && [ "$self_status" = 0 ]
