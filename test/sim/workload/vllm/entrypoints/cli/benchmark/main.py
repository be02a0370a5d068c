# STAND-IN: vllm/entrypoints/cli/benchmark/main.py of vLLM 0.17.1 (vllm-fleet proving ground):
# `vllm bench` exists in the CLI (its bench types are not), and is not simulated.
import sys

from vllm.entrypoints.cli.types import CLISubcommand


class BenchmarkSubcommand(CLISubcommand):
    name = "bench"
    help = "vLLM bench subcommand."

    @staticmethod
    def cmd(args) -> None:
        print("vllm bench: not simulated by the vllm-fleet stand-in", file=sys.stderr)
        sys.exit(1)

    def subparser_init(self, subparsers):
        parser = subparsers.add_parser(self.name, help=self.help, description=self.help,
                                       usage=f"vllm {self.name} <bench_type> [options]")
        parser.add_subparsers(required=True, dest="bench_type")
        return parser


def cmd_init():
    return [BenchmarkSubcommand()]
