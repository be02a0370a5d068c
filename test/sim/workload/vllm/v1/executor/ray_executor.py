# STAND-IN: vllm/v1/executor/ray_executor.py of vLLM 0.17.1 (vllm-fleet proving ground):
# RayDistributedExecutor (vllm/v1/executor/_ray_executor.py). vLLM 0.33 replaced it with
# vllm/v1/executor/ray_executor_v2.py, and this module is gone.
from vllm.version import only_in

only_in("0.17.1", __name__)

from vllm.v1.executor._ray_executor import RayDistributedExecutor  # noqa: E402

__all__ = ["RayDistributedExecutor"]
