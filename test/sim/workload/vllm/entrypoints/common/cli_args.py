# STAND-IN: vllm/entrypoints/common/cli_args.py of vLLM 0.33 and 0.34 (vllm-fleet proving ground):
# the serve flags and their validation (vllm/entrypoints/_cli_args.py; 0.17.1 has them in
# vllm.entrypoints.openai.cli_args), validate_api_server_args (0.17.1: in the API server) and
# init_parser_plugin, which loads the parser plugins as the API server's setup does.
from vllm.entrypoints._cli_args import make_arg_parser, validate_chat_template, validate_parsed_serve_args
from vllm.entrypoints.openai._server import init_parser_plugin, validate_api_server_args

__all__ = ["init_parser_plugin", "make_arg_parser", "validate_api_server_args", "validate_chat_template", "validate_parsed_serve_args"]
