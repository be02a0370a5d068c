# STAND-IN: vllm/entrypoints/cli/serve.py of vLLM 0.17.1, 0.33 and 0.34 (vllm-fleet proving ground).
#
# ServeSubcommand is vLLM's: name "serve", the static cmd(args) that runs the server (after its
# checks of --headless and of the data-parallel load balancing mode),
# validate(args) = validate_parsed_serve_args (vllm/entrypoints/_cli_args.py), and
# subparser_init adding `serve` with make_arg_parser's flags; cmd_init() returns
# [ServeSubcommand()]. vllm/entrypoints/cli/main.py binds `dispatch_function=ServeSubcommand.cmd`
# when it builds its parser, so a script can replace ServeSubcommand.cmd first and only parse and
# validate. cmd: a single API server (vllm/entrypoints/openai/_server.py run_server), or
# with --headless (or --node-rank > 0 of a multi-node mp group) a headless node without HTTP.
# Simpler than real: --api-server-count > 1 runs one API server.
import argparse
import signal
import sys
import threading

from vllm.entrypoints.cli.types import CLISubcommand
from vllm.entrypoints._startup import VLLM_SUBCMD_PARSER_EPILOG
from vllm.logger import init_logger

logger = init_logger(__name__)

DESCRIPTION = """Launch a local OpenAI-compatible API server to serve LLM
completions via HTTP. Defaults to Qwen/Qwen3-0.6B if no model is specified.

Search by using: `--help=<ConfigGroup>` to explore options by section (e.g.,
--help=ModelConfig, --help=Frontend)
  Use `--help=all` to show all available flags at once.
"""


class ServeSubcommand(CLISubcommand):
    """The `serve` subcommand for the vLLM CLI."""

    name = "serve"

    @staticmethod
    def cmd(args: argparse.Namespace) -> None:
        if hasattr(args, "model_tag") and args.model_tag is not None:
            args.model = args.model_tag
        if args.headless:
            if args.api_server_count is not None and args.api_server_count > 0:
                raise ValueError(f"--api-server-count={args.api_server_count} cannot be used with --headless "
                                 "(no API servers are started in headless mode).")
            args.api_server_count = 0
        check_load_balancing(args)
        if args.headless or (args.nnodes > 1 and args.node_rank > 0):
            sys.exit(run_headless(args))
        from vllm.entrypoints.openai._server import run_server

        sys.exit(run_server(args))

    def validate(self, args: argparse.Namespace) -> None:
        from vllm.entrypoints._cli_args import validate_parsed_serve_args

        validate_parsed_serve_args(args)

    def subparser_init(self, subparsers):
        from vllm.entrypoints._cli_args import make_arg_parser

        serve_parser = subparsers.add_parser(
            self.name,
            help="Launch a local OpenAI-compatible API server to serve LLM completions via HTTP.",
            description=DESCRIPTION,
            usage="vllm serve [model_tag] [options]",
        )
        serve_parser = make_arg_parser(serve_parser)
        serve_parser.epilog = VLLM_SUBCMD_PARSER_EPILOG.format(subcmd=self.name)
        return serve_parser


def check_load_balancing(args: argparse.Namespace) -> None:
    """One data-parallel load balancing mode at most, in each release's words."""
    from vllm.version import LAYOUT

    external_lb = args.data_parallel_external_lb or args.data_parallel_rank is not None
    if LAYOUT == "0.17.1":
        if external_lb and (args.data_parallel_hybrid_lb or args.data_parallel_start_rank is not None):
            raise ValueError("Cannot use both external and hybrid data parallel load balancing modes. "
                             "External LB is enabled via --data-parallel-external-lb or --data-parallel-rank. "
                             "Hybrid LB is enabled via --data-parallel-hybrid-lb or --data-parallel-start-rank. "
                             "Use one mode or the other.")
        return
    multi_port = args.data_parallel_multi_port_external_lb
    hybrid_lb = args.data_parallel_hybrid_lb or (args.data_parallel_start_rank is not None and not multi_port)
    if sum([bool(multi_port), bool(external_lb), bool(hybrid_lb)]) > 1:
        raise ValueError("Cannot use more than one data parallel load balancing mode. Choose one of: "
                         "--data-parallel-multi-port-external-lb, --data-parallel-external-lb (or "
                         "--data-parallel-rank), --data-parallel-hybrid-lb (or --data-parallel-start-rank).")


def cmd_init() -> list:
    return [ServeSubcommand()]


def run_headless(args: argparse.Namespace) -> int:
    """A node without API server: the headless ranks of a multi-node mp group, or (rank 0 with
    --headless) an engine that serves no HTTP."""
    from vllm.entrypoints.openai._server import report_startup_error
    from vllm.logger import decorate_logs
    from vllm.v1.engine.core import EngineConfig, StartupError, make_executor

    decorate_logs("EngineCore")
    try:
        config = EngineConfig(args)
        if config.backend == "mp" and config.nnodes > 1 and args.node_rank > 0:
            from vllm.v1.executor.multiproc_executor import run_headless as run_headless_ranks

            return run_headless_ranks(args, config)
        engine = make_executor(args, config)
    except StartupError as e:
        report_startup_error(e)
        return 1
    logger.info("headless: the engine serves no HTTP (ranks %s)",
                ", ".join(f"{r['rank']}@{r['ip']}" for r in engine.ranks), line=190)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    engine.shutdown()
    return 0
