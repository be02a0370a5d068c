#!/usr/bin/env bash
# Checks the serve arguments with the vLLM inside the image, before any Ray or vLLM container starts:
# vLLM's own parser and its own validation (`vllm serve`'s, with its start replaced by the checks of
# the parser names vLLM would make at start). Read-only. A refusal quotes vLLM's message and names
# the config keys behind the flags it mentions.
# Inputs: IMAGE, CONTAINER (the serving container of this node), SERVE_ARGS (array: arguments of
#         `vllm`, `serve` first), FLAG_KEYS (array of "<text>|<config key>": a flag, or words of
#         vLLM's message, and the key behind them), TIMEOUT (seconds).
set -euo pipefail

check="$(cat <<'PY'
import sys
argv = sys.argv[1:]
try:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.cli import main as cli_main
except Exception as error:  # another module layout: the check cannot run, the start will tell
    print(f"vllm-fleet: cannot load the CLI of this vLLM ({type(error).__name__}: {error})", file=sys.stderr)
    sys.exit(3)

def accepted(args):
    # What vLLM checks only once the server starts, checked here by vLLM's own code: the reasoning
    # parser by name, the tool-call parser with automatic tool choice.
    if getattr(args, "reasoning_parser", None):
        from vllm.reasoning import ReasoningParserManager
        ReasoningParserManager.get_reasoning_parser(args.reasoning_parser)
    if getattr(args, "enable_auto_tool_choice", False):
        from vllm.entrypoints.openai.api_server import validate_api_server_args
        validate_api_server_args(args)
    print("vllm-fleet: serve arguments accepted")

# vLLM binds the command when it builds its parser: replaced before, it parses and validates only.
ServeSubcommand.cmd = staticmethod(accepted)
sys.argv = ["vllm"] + argv
cli_main.main()
PY
)"

# In the serving container when it runs (State.Status running: a paused or restarting one, which
# Docker counts as running, takes no exec) this very image (a change of the serve arguments alone: a
# `docker exec` answers sooner than a new container), else in a throw-away container, no network.
throwaway=(docker run --rm --network none --gpus all --entrypoint python3 "$IMAGE")
check_with() { timeout "$TIMEOUT" "$@" -c "$check" "${SERVE_ARGS[@]}" 2>&1; }
status=0
if [ -n "$CONTAINER" ] && serving="$(docker inspect --type container --format '{{.State.Status}} {{.Image}}' "$CONTAINER" 2>/dev/null)" &&
  [ "${serving%% *}" = running ] && [ "${serving#* }" = "$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)" ]; then
  output="$(check_with docker exec "$CONTAINER" python3)" || status=$?
  # Docker's answer, not vLLM's: the container stopped, paused or went since it was looked at.
  if [ "$status" -ne 0 ] && [[ "$output" == "Error response from daemon: "* ]]; then
    status=0
    output="$(check_with "${throwaway[@]}")" || status=$?
  fi
else
  output="$(check_with "${throwaway[@]}")" || status=$?
fi
if [ "$status" -eq 0 ] && printf '%s\n' "$output" | grep -q '^vllm-fleet: serve arguments accepted$'; then
  echo "accepted"
  exit 0
fi
if [ "$status" -eq 3 ]; then
  echo "unchecked: $(printf '%s\n' "$output" | tail -n 1)"
  exit 0
fi
if [ "$status" -eq 124 ]; then
  echo "the check of the serve arguments with $IMAGE's vLLM took more than ${TIMEOUT}s" >&2
  exit 1
fi
if [ "$status" -eq 125 ]; then
  # `docker run`'s own failure (Docker's answer, before any vLLM ran).
  echo "the check of the serve arguments could not start a container of $IMAGE: $(printf '%s\n' "$output" | grep -v '^\s*$' | grep -v "^Run 'docker run --help'" | tr '\n' ' ' | sed 's/ *$//')" >&2
  exit 1
fi
# vLLM's message: argparse's `error:` line, else the last line of the traceback.
message="$(printf '%s\n' "$output" | grep -m1 ': error: ' || true)"
if [ -z "$message" ]; then
  message="$(printf '%s\n' "$output" | grep -v '^\s*$' | tail -n 1)"
fi
keys=""
for pair in "${FLAG_KEYS[@]}"; do
  text="${pair%%|*}"
  key="${pair#*|}"
  if printf '%s\n' "$message" | grep -qiF -- "$text"; then
    case " $keys " in *" $key "*) ;; *) keys="${keys:+$keys }$key" ;; esac
  fi
done
echo "the vLLM in $IMAGE refuses the serve arguments: $message${keys:+ (config: $(printf '%s' "$keys" | sed 's/ /, /g'))}" >&2
exit 1
