# STAND-IN: vllm/utils/system_utils.py of vLLM 0.17.1 (vllm-fleet proving ground):
# update_environment_variables, which a Ray worker applies to the variables its driver sends
# (vllm/v1/executor/ray_executor.py), with vLLM's warning for each one it changes.
import os

from vllm.logger import decorate_logs, init_logger  # noqa: F401 - decorate_logs lives here in vLLM

logger = init_logger(__name__)


def update_environment_variables(envs_dict: dict) -> None:
    for key, value in envs_dict.items():
        if key in os.environ and os.environ[key] != value:
            logger.warning("Overwriting environment variable %s from '%s' to '%s'",
                           key, os.environ[key], value, line=38)
        os.environ[key] = value
