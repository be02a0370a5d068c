# STAND-IN: vllm/v1/executor/ray_env_utils.py of vLLM 0.33 and 0.34 (vllm-fleet proving ground):
# the environment RayExecutorV2 gives its workers, everything of the driver's but the
# worker-specific variables and the names in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json
# (vllm/ray/ray_env.py); each worker applies it with setdefault.
import os

from vllm.version import only_in

only_in("0.33", __name__)

from vllm.ray.ray_env import RAY_NON_CARRY_OVER_ENV_VARS  # noqa: E402


def get_driver_env_vars(worker_specific_vars: set) -> dict:
    """Return driver env vars to propagate to Ray workers."""
    exclude_vars = worker_specific_vars | RAY_NON_CARRY_OVER_ENV_VARS
    return {key: value for key, value in os.environ.items() if key not in exclude_vars}
