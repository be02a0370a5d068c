# STAND-IN: vllm/entrypoints/cli/main.py of vLLM 0.17.1 (vllm-fleet proving ground).
#
# main() is vLLM 0.17.1's: it reads sys.argv, builds one FlexibleArgumentParser with a subparser
# per command module's cmd_init(), binding `dispatch_function=<command>.cmd` when it builds the
# parser (so a `ServeSubcommand.cmd` replaced before main() runs is the one dispatched), parses,
# calls the selected command's validate(args), then args.dispatch_function(args). The console
# script `vllm` calls it.
import importlib.metadata
import sys

from vllm.logger import init_logger

logger = init_logger(__name__)


def main():
    import vllm.entrypoints.cli.benchmark.main
    import vllm.entrypoints.cli.collect_env
    import vllm.entrypoints.cli.openai
    import vllm.entrypoints.cli.run_batch
    import vllm.entrypoints.cli.serve
    from vllm.entrypoints._startup import VLLM_SUBCMD_PARSER_EPILOG, cli_env_setup
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cmd_modules = [
        vllm.entrypoints.cli.openai,
        vllm.entrypoints.cli.serve,
        vllm.entrypoints.cli.benchmark.main,
        vllm.entrypoints.cli.collect_env,
        vllm.entrypoints.cli.run_batch,
    ]

    cli_env_setup()

    parser = FlexibleArgumentParser(
        description="vLLM CLI",
        epilog=VLLM_SUBCMD_PARSER_EPILOG.format(subcmd="[subcommand]"),
    )
    parser.add_argument("-v", "--version", action="version", version=importlib.metadata.version("vllm"))
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmds = {}
    for cmd_module in cmd_modules:
        for cmd in cmd_module.cmd_init():
            cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
            cmds[cmd.name] = cmd
    args = parser.parse_args()
    if args.subparser in cmds:
        cmds[args.subparser].validate(args)

    if hasattr(args, "dispatch_function"):
        args.dispatch_function(args)
    else:
        parser.print_help()


if __name__ == "__main__":
    sys.exit(main())
