# STAND-IN: vllm/entrypoints/openai/cli_args.py of vLLM 0.17.1 (vllm-fleet proving ground): the
# serve flags and their validation (vllm/entrypoints/_cli_args.py). From vLLM 0.33 they are in
# vllm.entrypoints.common.cli_args, and this module is gone.
from vllm.version import only_in

only_in("0.17.1", __name__)

from vllm.entrypoints._cli_args import make_arg_parser, validate_chat_template, validate_parsed_serve_args  # noqa: E402

__all__ = ["make_arg_parser", "validate_chat_template", "validate_parsed_serve_args"]
