#!/usr/bin/env bash
# Starts `vllm serve` inside the Ray head container (`ray` executor), first stopping the one that
# runs (a restart: changed arguments), in one `docker exec`; vllm-ready.sh, which runs right after
# it, waits until it really serves.
# Inputs: CONTAINER, SERVE_ARGS (array: the arguments of `vllm`), SERVE_ARGS_JSON (the same as a
#         JSON list), ARGS_FILE (where they are kept: this start and the watchdog's read them
#         there), API_KEY (may be empty), LOG_FILE, TOKEN (this start's revision, kept beside the
#         server where the next read finds it), CONFIG_ROOT (the head's VLLM_CONFIG_ROOT),
#         NON_CARRY_OVER (JSON list of variable names); STOP_VLLM_SERVE_SH (vllm-stop.sh).
# Runs after docker-state.sh and vllm-stop.sh. The server runs inside the Ray head, so this start
# needs the head running: a paused head is unpaused; in any other state the start fails, saying so
# in one line (the next read of the node sees it and `up` replaces the head).
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

# In one exec: the server that runs now stopped; left beside the server, the variables each node
# sets for itself, which vLLM's Ray executor must not copy from this driver to the workers on other
# nodes (vllm/ray/ray_env.py reads this file when vllm serve starts), the arguments and this
# start's token; then the new server, in a session of its own (os.setsid) that outlives the exec,
# its output in the log. The arguments reach `vllm` from the file as a list (Python's execvp),
# never through a shell line, and never on this exec's command line: `vllm serve` there would
# match the stop's pattern. The exec returns once the server's process is there, so the readiness
# gate never looks too early.
# The key by name only: docker takes its value from this environment, no command line shows it.
export VLLM_API_KEY="$API_KEY"
status=0
out="$(docker exec --env VLLM_API_KEY "$CONTAINER" sh -c "$STOP_VLLM_SERVE_SH"'
  stop_serve >/dev/null || exit 1
  mkdir -p "$1" && printf "%s\n" "$2" >"$1/ray_non_carry_over_env_vars.json" &&
    printf "%s\n" "$3" >"$4" && printf "%s\n" "$5" >/tmp/vllm-fleet-serve.token || exit 1
  python3 -c "
import json, os, sys
os.setsid()
args = json.load(open(sys.argv[1]))
log = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(log, 1)
os.dup2(log, 2)
os.execvp(\"vllm\", [\"vllm\"] + args)
" "$4" "$6" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 500); do
    pgrep -f "vllm [s]erve" >/dev/null && exit 0
    kill -0 $! 2>/dev/null || break
    sleep 0.01
  done
  echo "the server did not start; its log ends with:" >&2
  tail -n 20 "$6" >&2
  exit 1' _ "$CONFIG_ROOT" "$NON_CARRY_OVER" "$SERVE_ARGS_JSON" "$ARGS_FILE" "$TOKEN" "$LOG_FILE" 2>&1)" || status=$?
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
