# STAND-IN: vllm/entrypoints/launchers/launcher.py of vLLM 0.33 and 0.34 (vllm-fleet proving
# ground): setup_server, which loads the parser plugins and validates the API server's arguments.
from vllm.entrypoints.common.cli_args import validate_api_server_args
from vllm.entrypoints.openai._server import setup_server

__all__ = ["setup_server", "validate_api_server_args"]
