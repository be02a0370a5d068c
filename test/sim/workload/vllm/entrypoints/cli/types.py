# STAND-IN: vllm/entrypoints/cli/types.py of vLLM 0.17.1 (vllm-fleet proving ground).
import argparse


class CLISubcommand:
    """Base class for CLI argument handlers."""

    name: str

    @staticmethod
    def cmd(args: argparse.Namespace) -> None:
        raise NotImplementedError("Subclasses should implement this method")

    def validate(self, args: argparse.Namespace) -> None:
        pass

    def subparser_init(self, subparsers):
        raise NotImplementedError("Subclasses should implement this method")
