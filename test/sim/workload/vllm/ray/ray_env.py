# STAND-IN: vllm/ray/ray_env.py of vLLM 0.17.1 (vllm-fleet proving ground).
#
# Which of the driver's environment variables vLLM's Ray executor copies to every Ray worker
# (which then overwrites its own, vllm/utils/system_utils.py): the names registered in vllm.envs,
# every variable of the driver whose name starts with VLLM_, LMCACHE_, NCCL_, UCX_, HF_ or
# HUGGING_FACE_ (+ VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY), PYTHONHASHSEED
# (+ VLLM_RAY_EXTRA_ENV_VARS_TO_COPY), the caller's additional names; minus the caller's
# exclusions (the Ray executor's worker-specific ones: VLLM_HOST_IP, VLLM_HOST_PORT, LOCAL_RANK,
# CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES) and minus the JSON list in
# $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json (VLLM_CONFIG_ROOT default
# ${XDG_CONFIG_HOME:-~/.config}/vllm), read when this module is imported. Same log lines as
# vLLM 0.17.1 (older vLLMs copied only the registered names and worded the lines differently).
# vLLM 0.33 and 0.34 (the 0.33 layout, vllm/version.py) also copy FLASH_ATTENTION_*; their Ray
# executor no longer uses this (vllm/v1/executor/ray_env_utils.py), their data-parallel engines do.
# So GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME and RAY_* are not copied; NCCL_SOCKET_IFNAME,
# NCCL_IB_HCA, NCCL_IB_DISABLE and UCX_NET_DEVICES are, unless listed in that file.
import json
import os

import vllm.envs as envs
from vllm.logger import init_logger
from vllm.version import LAYOUT

logger = init_logger(__name__)

CONFIG_HOME = envs.VLLM_CONFIG_ROOT

RAY_NON_CARRY_OVER_ENV_VARS_FILE = os.path.join(CONFIG_HOME, "ray_non_carry_over_env_vars.json")

try:
    if os.path.exists(RAY_NON_CARRY_OVER_ENV_VARS_FILE):
        with open(RAY_NON_CARRY_OVER_ENV_VARS_FILE, encoding="utf-8") as f:
            RAY_NON_CARRY_OVER_ENV_VARS = set(json.load(f))
    else:
        RAY_NON_CARRY_OVER_ENV_VARS = set()
except json.JSONDecodeError:
    logger.warning("Failed to parse %s. Using an empty set for non-carry-over env vars.",
                   RAY_NON_CARRY_OVER_ENV_VARS_FILE, line=25)
    RAY_NON_CARRY_OVER_ENV_VARS = set()

DEFAULT_ENV_VAR_PREFIXES = {"VLLM_", "LMCACHE_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_"}
if LAYOUT != "0.17.1":
    DEFAULT_ENV_VAR_PREFIXES.add("FLASH_ATTENTION_")

DEFAULT_EXTRA_ENV_VARS = {"PYTHONHASHSEED"}


def _csv(value: str) -> set:
    return {token.strip() for token in value.split(",") if token.strip()}


def get_env_vars_to_copy(exclude_vars=None, additional_vars=None, destination=None) -> set:
    """The names of the variables to copy from the driver to Ray actors (see the header)."""
    exclude = set(exclude_vars or ()) | RAY_NON_CARRY_OVER_ENV_VARS
    prefixes = DEFAULT_ENV_VAR_PREFIXES | _csv(envs.VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY)
    names = set(envs.environment_variables)
    names |= {name for name in os.environ if any(name.startswith(p) for p in prefixes)}
    names |= DEFAULT_EXTRA_ENV_VARS | _csv(envs.VLLM_RAY_EXTRA_ENV_VARS_TO_COPY)
    names |= set(additional_vars or ())
    names -= exclude

    to = f" to {destination}" if destination else ""
    logger.info("Env var prefixes to copy: %s", sorted(prefixes), line=100)
    logger.info("Copying the following environment variables%s: %s", to,
                sorted(n for n in names if n in os.environ), line=101)
    if RAY_NON_CARRY_OVER_ENV_VARS:
        logger.info("RAY_NON_CARRY_OVER_ENV_VARS from config: %s", RAY_NON_CARRY_OVER_ENV_VARS, line=107)
    logger.info("To exclude env vars from copying, add them to %s", RAY_NON_CARRY_OVER_ENV_VARS_FILE, line=111)
    return names
