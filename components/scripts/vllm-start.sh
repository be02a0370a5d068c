#!/usr/bin/env bash
# Starts `vllm serve` inside the Ray head container (`ray` executor); vllm-ready.sh, which runs
# right after it, waits until it really serves.
# Inputs: CONTAINER, SERVE_ARGS (array: arguments of `vllm`), SERVE_ARGS_JSON (the same as a JSON
#         list), ARGS_FILE (where the watchdog finds them), API_KEY (may be empty), LOG_FILE,
#         TOKEN (this start's revision, kept beside the server where the next read finds it),
#         CONFIG_ROOT (the head's VLLM_CONFIG_ROOT), NON_CARRY_OVER (JSON list of variable names).
set -euo pipefail

# The watchdog (if any) holds still meanwhile: it would start a server of its own in the gap.
if [ "$(docker inspect --format '{{.State.Running}}' vllm-fleet-watchdog 2>/dev/null || true)" = "true" ]; then
  docker pause vllm-fleet-watchdog >/dev/null 2>&1 || true
  trap 'docker unpause vllm-fleet-watchdog >/dev/null 2>&1 || true' EXIT
fi

# A restart (changed arguments) first stops the server that runs now.
stop_vllm_serve "$CONTAINER" >/dev/null

# Left beside the server, in one exec: the variables each node sets for itself, which vLLM's Ray
# executor must not copy from this driver to the workers on other nodes (vllm/ray/ray_env.py reads
# this file when vllm serve starts); the arguments, with which the watchdog starts the server
# again; this start's token.
docker exec "$CONTAINER" sh -c 'mkdir -p "$0" && printf "%s\n" "$1" >"$0/ray_non_carry_over_env_vars.json" &&
  printf "%s\n" "$2" >"$3" && printf "%s\n" "$4" >/tmp/vllm-fleet-serve.token' \
  "$CONFIG_ROOT" "$NON_CARRY_OVER" "$SERVE_ARGS_JSON" "$ARGS_FILE" "$TOKEN"

# The arguments travel as "$@" of a fixed shell line, never spliced into it.
# The key by name only: docker takes its value from this environment, no command line shows it.
export VLLM_API_KEY="$API_KEY"
docker exec --detach --env VLLM_API_KEY "$CONTAINER" \
  sh -c 'exec "$@" >"$0" 2>&1' "$LOG_FILE" vllm "${SERVE_ARGS[@]}"
echo "started: vllm ${SERVE_ARGS[*]}"
