# STAND-IN: vllm/entrypoints/cli/collect_env.py of vLLM 0.17.1 (vllm-fleet proving ground): the
# subcommand exists; it prints only the stand-in's version.
from vllm.entrypoints.cli.types import CLISubcommand


class CollectEnvSubcommand(CLISubcommand):
    name = "collect-env"

    @staticmethod
    def cmd(args) -> None:
        from vllm.version import __version__

        print(f"vLLM Version: {__version__} (vllm-fleet stand-in: no environment is collected)")

    def subparser_init(self, subparsers):
        return subparsers.add_parser("collect-env", help="Start collecting environment information.",
                                     description="Start collecting environment information.",
                                     usage="vllm collect-env")


def cmd_init():
    return [CollectEnvSubcommand()]
