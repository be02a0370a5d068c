#!/usr/bin/env bash
# Starts `vllm serve` inside the Ray head container (`ray` executor), first stopping the one that
# runs (a restart: changed arguments), in one `docker exec` of the lifecycle's start
# (vllm-lifecycle.sh); vllm-ready.sh, which runs right after it, waits until it really serves.
# Inputs: CONTAINER, SERVE_ARGS (array: the arguments of `vllm`), SERVE_ARGS_JSON (the same as a
#         JSON list), ARGS_FILE (where they are kept: this start and the watchdog's read them
#         there), API_KEY (may be empty), LOG_FILE, TOKEN (this start's revision, kept beside the
#         server where the next read finds it), CONFIG_ROOT (the head's VLLM_CONFIG_ROOT),
#         NON_CARRY_OVER (JSON list of variable names), LIFECYCLE (the text of vllm-lifecycle.sh).
# Runs after docker-state.sh. The server runs inside the Ray head, so this start needs the head
# running: a paused head is unpaused; in any other state the start fails, saying so in one line (the
# next read of the node sees it and `up` replaces the head).
set -euo pipefail

head_not_running() {
  local state="$1"
  [ "$state" = gone ] && state="missing"
  echo "the Ray head container $CONTAINER is $state; up replaces it" >&2
  exit 1
}

head="$(container_status "$CONTAINER")" || exit 1
case "$head" in
  running) ;;
  paused)
    docker unpause "$CONTAINER" >/dev/null 2>&1 || true
    echo "unpaused the Ray head container $CONTAINER (it was paused)"
    ;;
  *) head_not_running "$head" ;;
esac

# The watchdog (if any) holds still meanwhile: it would start a server of its own in the gap. One
# left paused by a start that was cut short stays paused until this start ends; one that is not
# running (or restarting) has nothing to hold.
watchdog="$(container_status vllm-fleet-watchdog)" || exit 1
case "$watchdog" in
  running | paused)
    [ "$watchdog" = paused ] || docker pause vllm-fleet-watchdog >/dev/null 2>&1 || true
    trap 'docker unpause vllm-fleet-watchdog >/dev/null 2>&1 || true' EXIT
    ;;
esac

# In one exec, the lifecycle's start (vllm-lifecycle.sh says what it writes beside the server and
# why): the server that runs now stopped, then the new one started from the arguments file, in a
# session of its own that outlives the exec. The arguments reach `vllm` as a list (Python's execvp),
# never through a shell line. The exec returns once the server's process is there, so the readiness
# gate never looks too early.
# The key by name only: docker takes its value from this environment, no command line shows it.
export VLLM_API_KEY="$API_KEY"
status=0
out="$(docker exec --env VLLM_API_KEY "$CONTAINER" sh -c "$LIFECYCLE" vllm-lifecycle start \
  "$LOG_FILE" "$SERVE_ARGS_JSON" "$ARGS_FILE" "$TOKEN" "$CONFIG_ROOT" "$NON_CARRY_OVER" 2>&1)" || status=$?
if [ "$status" -ne 0 ]; then
  # The head stopped under the exec (Docker's answer is then no reason to show), or the server
  # itself did not start (its log is the reason).
  head="$(container_status "$CONTAINER")" || exit 1
  [ "$head" = running ] || head_not_running "$head"
  printf '%s\n' "$out" >&2
  exit 1
fi
[ -z "$out" ] || printf '%s\n' "$out"
echo "started: vllm ${SERVE_ARGS[*]}"
