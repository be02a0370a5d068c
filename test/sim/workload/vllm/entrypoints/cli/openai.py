# STAND-IN: vllm/entrypoints/cli/openai.py of vLLM 0.17.1 (vllm-fleet proving ground): the
# `chat` and `complete` subcommands exist (so the CLI's usage line and parsing are vLLM's), but
# they are not simulated: running one says so and exits 1.
import sys

from vllm.entrypoints.cli.types import CLISubcommand


def _not_simulated(name):
    def cmd(args) -> None:
        print(f"vllm {name}: not simulated by the vllm-fleet stand-in", file=sys.stderr)
        sys.exit(1)

    return staticmethod(cmd)


def _client_args(parser):
    parser.add_argument("--url", type=str, default="http://localhost:8000/v1")
    parser.add_argument("--model-name", type=str, default=None)
    parser.add_argument("--api-key", type=str, default=None)
    return parser


class ChatCommand(CLISubcommand):
    name = "chat"
    cmd = _not_simulated("chat")

    def subparser_init(self, subparsers):
        parser = subparsers.add_parser("chat", help="Generate chat completions via the running API server.",
                                       description="Generate chat completions via the running API server.",
                                       usage="vllm chat [options]")
        _client_args(parser)
        parser.add_argument("--system-prompt", type=str, default=None)
        parser.add_argument("-q", "--quick", type=str, metavar="MESSAGE")
        return parser


class CompleteCommand(CLISubcommand):
    name = "complete"
    cmd = _not_simulated("complete")

    def subparser_init(self, subparsers):
        parser = subparsers.add_parser(
            "complete", help="Generate text completions based on the given prompt via the running API server.",
            description="Generate text completions based on the given prompt via the running API server.",
            usage="vllm complete [options]")
        _client_args(parser)
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("-q", "--quick", type=str, metavar="PROMPT")
        return parser


def cmd_init():
    return [ChatCommand(), CompleteCommand()]
