#!/usr/bin/env bash
# Checks the serve arguments with the vLLM inside the image, before any Ray or vLLM container starts:
# vLLM's own parser and validation (`vllm serve`'s), then, in place of the start, what the start
# checks before it serves: the pre-start checks of `vllm serve`'s command, the parser names (after
# the parser plugins are loaded), Ray for the ray executor. Read-only. A refusal quotes vLLM's
# message and names the config keys behind the flags it mentions.
# Prints `versions vllm=<version> ray=<version|none>` (as installed in the image), then `accepted`,
# or `unchecked: <why>` (this vLLM cannot judge here: exit 0, the program warns); a refusal fails.
# No platform is forced. On a Spark the check's container has the GPUs (--gpus all), and a CPU build
# of vLLM picks its CPU platform by itself (a `+cpu` version; from 0.33 also VLLM_TARGET_DEVICE=cpu
# in the image's environment). A CUDA build that sees no GPU cannot build its parser ("Failed to
# infer device type"): unchecked, no refusal. Forced onto the CPU platform it would judge by another
# platform's rules (vLLM 0.17.1 on CPU even swaps the ray executor for mp), not as the start will.
# What the real vLLM 0.17.1, 0.33.0 and 0.34.0 answered: test/unit/vllmArgsCheck.test.ts.
# Inputs: IMAGE, CONTAINER (the serving container of this node), SERVE_ARGS (array: arguments of
#         `vllm`, `serve` first), FLAG_KEYS (array of "<text>|<config key>": a flag, or words of
#         vLLM's message, and the key behind them), TIMEOUT (seconds).
set -euo pipefail

check="$(cat <<'PY'
import os
import sys
from importlib import metadata

argv = sys.argv[1:]


def installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


print(f"vllm-fleet: versions vllm={installed('vllm')} ray={installed('ray')}", flush=True)


def unchecked(reason):
    print(f"vllm-fleet: {reason}", flush=True)
    sys.exit(3)


# The modules the check needs, where each vLLM has them; another layout: the start will tell.
try:
    from vllm.entrypoints.cli import main as cli_main
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:  # vLLM 0.33+ (vllm.entrypoints.openai.api_server keeps a deprecated shim of it)
        from vllm.entrypoints.common.cli_args import init_parser_plugin, validate_api_server_args
    except ImportError:  # vLLM 0.17: in the API server; the plugins are loaded by setup_server
        from vllm.entrypoints.openai.api_server import validate_api_server_args

        def init_parser_plugin(args):
            if args.tool_parser_plugin and len(args.tool_parser_plugin) > 3:
                ToolParserManager.import_tool_parser(args.tool_parser_plugin)
            if args.reasoning_parser_plugin and len(args.reasoning_parser_plugin) > 3:
                ReasoningParserManager.import_reasoning_parser(args.reasoning_parser_plugin)
except Exception as error:
    unchecked(f"cannot load the CLI of this vLLM ({type(error).__name__}: {error})")


def option(args, name, default=None):
    return getattr(args, name, default)


def serve_prestart_checks(args):
    # What `vllm serve` refuses before it starts anything, written inline in its command
    # (vllm/entrypoints/cli/serve.py: ServeSubcommand.cmd, then run_headless), so mirrored here in
    # each version's words: 0.33 and 0.34 (which have the multi-port load balancing mode), else 0.17.1.
    if option(args, "headless") and (option(args, "api_server_count") or 0) > 0:
        raise ValueError(
            f"--api-server-count={args.api_server_count} cannot be used with --headless "
            "(no API servers are started in headless mode)."
        )
    external_lb = option(args, "data_parallel_external_lb") or option(args, "data_parallel_rank") is not None
    start_rank = option(args, "data_parallel_start_rank") is not None
    if hasattr(args, "data_parallel_multi_port_external_lb"):
        multi_port = args.data_parallel_multi_port_external_lb
        hybrid_lb = option(args, "data_parallel_hybrid_lb") or (start_rank and not multi_port)
        if sum([bool(multi_port), bool(external_lb), bool(hybrid_lb)]) > 1:
            raise ValueError(
                "Cannot use more than one data parallel load balancing mode. Choose one of: "
                "--data-parallel-multi-port-external-lb, --data-parallel-external-lb (or "
                "--data-parallel-rank), --data-parallel-hybrid-lb (or --data-parallel-start-rank)."
            )
    elif external_lb and (option(args, "data_parallel_hybrid_lb") or start_rank):
        raise ValueError(
            "Cannot use both external and hybrid data parallel load balancing modes. "
            "External LB is enabled via --data-parallel-external-lb or --data-parallel-rank. "
            "Hybrid LB is enabled via --data-parallel-hybrid-lb or --data-parallel-start-rank. "
            "Use one mode or the other."
        )
    if option(args, "headless") and option(args, "data_parallel_hybrid_lb"):
        raise ValueError("data_parallel_hybrid_lb is not applicable in headless mode")


def plugin_here(plugin):
    """Whether a parser plugin (a file, or from 0.33 a module) can be loaded in this container."""
    import importlib.util

    try:
        return os.path.exists(plugin) or importlib.util.find_spec(plugin) is not None
    except (ImportError, ValueError):
        return False


def accepted(args):
    serve_prestart_checks(args)
    # The parser plugins, loaded as vLLM loads them before it looks a name up. One that is not in
    # this container (a file in the model directory, mounted in the serving containers only)
    # leaves the names unjudged.
    for flag in ("tool_parser_plugin", "reasoning_parser_plugin"):
        plugin = option(args, flag) or ""
        if len(plugin) > 3 and not plugin_here(plugin):
            unchecked(f"--{flag.replace('_', '-')} {plugin} is not in the container of the check; the parser names were not checked")
    init_parser_plugin(args)
    # What the start checks next, by vLLM's own code and in its order: the tool-call parser with
    # automatic tool choice (the API server's setup), Ray for the ray executor (the engine's
    # configuration, vllm/config/parallel.py; vLLM 0.33 and later do not depend on Ray), the
    # reasoning parser (the engine core's structured output manager).
    if option(args, "enable_auto_tool_choice"):
        validate_api_server_args(args)
    if option(args, "distributed_executor_backend") == "ray":
        try:
            from vllm.v1.executor.ray_utils import assert_ray_available
        except Exception as error:
            unchecked(f"cannot load vLLM's Ray check ({type(error).__name__}: {error})")
        try:
            assert_ray_available()
        except ValueError as error:
            print(f"vllm-fleet: no ray: {error}", flush=True)
            sys.exit(4)
    if option(args, "reasoning_parser"):
        ReasoningParserManager.get_reasoning_parser(args.reasoning_parser)
    print("vllm-fleet: serve arguments accepted", flush=True)


# Building the parser is this vLLM's business: failing there (no device visible: "Failed to infer
# device type") it cannot judge here, which is no refusal. Parsing the arguments is the check.
parsing = False
parse_args = FlexibleArgumentParser.parse_args


def parse_command_line(self, args=None, namespace=None):
    global parsing
    parsing = parsing or args is None
    return parse_args(self, args, namespace)


FlexibleArgumentParser.parse_args = parse_command_line
# vLLM binds the command when it builds its parser: replaced before, it parses and validates only.
ServeSubcommand.cmd = staticmethod(accepted)
sys.argv = ["vllm"] + argv
try:
    cli_main.main()
except BaseException as error:
    if parsing:
        raise
    unchecked(f"this vLLM cannot build its parser here ({type(error).__name__}: {error})")
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
# The versions of the image's vLLM and Ray, whatever the verdict: `versions vllm=<v> ray=<v|none>`.
versions="$(printf '%s\n' "$output" | sed -n 's/^vllm-fleet: versions //p' | head -n 1)"
if [ -n "$versions" ]; then
  echo "versions $versions"
fi
if [ "$status" -eq 0 ] && printf '%s\n' "$output" | grep -q '^vllm-fleet: serve arguments accepted$'; then
  echo "accepted"
  exit 0
fi
if [ "$status" -eq 3 ]; then
  echo "unchecked: $(printf '%s\n' "$output" | tail -n 1 | sed 's/^vllm-fleet: //')"
  exit 0
fi
if [ "$status" -eq 4 ]; then
  vllm_version="$(printf '%s\n' "$versions" | sed -n 's/^vllm=\([^ ]*\).*/\1/p')"
  reason="$(printf '%s\n' "$output" | sed -n 's/^vllm-fleet: no ray: //p' | tail -n 1)"
  echo "the image $IMAGE has no Ray (vLLM ${vllm_version:-?}: $reason): executor ray needs it; set vllm-fleet:executor to mp (vLLM's native multi-node) or use an image with Ray" >&2
  exit 1
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
