#!/usr/bin/env bash
# Starts `vllm serve` inside the Ray head container (`ray` executor), first stopping the one that
# runs (a restart: changed arguments), in one `docker exec`; vllm-ready.sh, which runs right after
# it, waits until it really serves.
# Inputs: CONTAINER, SERVE_ARGS (array: the arguments of `vllm`), SERVE_ARGS_JSON (the same as a
#         JSON list), ARGS_FILE (where they are kept: this start and the watchdog's read them
#         there), API_KEY (may be empty), LOG_FILE, TOKEN (this start's revision, kept beside the
#         server where the next read finds it), CONFIG_ROOT (the head's VLLM_CONFIG_ROOT),
#         NON_CARRY_OVER (JSON list of variable names); STOP_VLLM_SERVE_SH (vllm-stop.sh).
set -euo pipefail

# The watchdog (if any) holds still meanwhile: it would start a server of its own in the gap.
if [ "$(docker inspect --format '{{.State.Running}}' vllm-fleet-watchdog 2>/dev/null || true)" = "true" ]; then
  docker pause vllm-fleet-watchdog >/dev/null 2>&1 || true
  trap 'docker unpause vllm-fleet-watchdog >/dev/null 2>&1 || true' EXIT
fi

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
docker exec --env VLLM_API_KEY "$CONTAINER" sh -c "$STOP_VLLM_SERVE_SH"'
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
  exit 1' _ "$CONFIG_ROOT" "$NON_CARRY_OVER" "$SERVE_ARGS_JSON" "$ARGS_FILE" "$TOKEN" "$LOG_FILE"
echo "started: vllm ${SERVE_ARGS[*]}"
