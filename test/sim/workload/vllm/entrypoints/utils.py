# STAND-IN: vllm/entrypoints/utils.py of vLLM 0.17.1 (vllm-fleet proving ground): the CLI's
# environment setup, the subcommand epilog and the "non-default args" log line
# (vllm/entrypoints/_startup.py). From vLLM 0.33 they are in vllm.entrypoints.common.startup.
from vllm.version import only_in

only_in("0.17.1", __name__)

from vllm.entrypoints._startup import VLLM_SUBCMD_PARSER_EPILOG, cli_env_setup, log_non_default_args  # noqa: E402

__all__ = ["VLLM_SUBCMD_PARSER_EPILOG", "cli_env_setup", "log_non_default_args"]
