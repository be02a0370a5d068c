# STAND-IN: vllm/v1/executor/ray_executor_v2.py of vLLM 0.33 and 0.34 (vllm-fleet proving ground):
# RayExecutorV2 (vllm/v1/executor/_ray_executor.py), the ray executor that replaced 0.17.1's
# RayDistributedExecutor.
from vllm.version import only_in

only_in("0.33", __name__)

from vllm.v1.executor._ray_executor import RayExecutorV2  # noqa: E402

__all__ = ["RayExecutorV2"]
