# STAND-IN: vllm/entrypoints/common/startup.py of vLLM 0.33 and 0.34 (vllm-fleet proving ground):
# the CLI's environment setup and the subcommand epilog (vllm/entrypoints/_startup.py; 0.17.1 has
# them in vllm.entrypoints.utils).
from vllm.entrypoints._startup import VLLM_SUBCMD_PARSER_EPILOG, cli_env_setup, log_non_default_args

__all__ = ["VLLM_SUBCMD_PARSER_EPILOG", "cli_env_setup", "log_non_default_args"]
