# STAND-IN: vllm/entrypoints/cli/run_batch.py of vLLM 0.17.1 (vllm-fleet proving ground): the
# subcommand exists in the CLI and is not simulated.
import sys

from vllm.entrypoints.cli.types import CLISubcommand


class RunBatchSubcommand(CLISubcommand):
    name = "run-batch"

    @staticmethod
    def cmd(args) -> None:
        print("vllm run-batch: not simulated by the vllm-fleet stand-in", file=sys.stderr)
        sys.exit(1)

    def subparser_init(self, subparsers):
        parser = subparsers.add_parser(self.name, help="Run batch prompts and write results to file.",
                                       description="Run batch prompts using vLLM's OpenAI-compatible API.",
                                       usage="vllm run-batch -i INPUT.jsonl -o OUTPUT.jsonl --model <model>")
        parser.add_argument("-i", "--input-file", required=True, type=str)
        parser.add_argument("-o", "--output-file", required=True, type=str)
        return parser


def cmd_init():
    return [RunBatchSubcommand()]
