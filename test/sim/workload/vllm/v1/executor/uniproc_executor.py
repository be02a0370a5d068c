# STAND-IN: vLLM 0.17.1's single-GPU executor (vllm/v1/executor/uniproc_executor.py), for the
# vllm-fleet proving ground: one rank in this process. With one rank vLLM creates no NCCL
# communicator, so no NCCL lines are printed.
from vllm.utils.network_utils import get_ip
from vllm.v1.engine.core import StartupError, check_weights, local_gpu_count


class UniProcExecutor:
    def __init__(self, args, config):
        if local_gpu_count() < 1:
            raise StartupError("RuntimeError", "No CUDA GPUs are available")
        check_weights(config.model)
        self.ranks = [{"rank": 0, "ip": get_ip(), "vllm_host_ip": get_ip()}]

    def execute(self, request_id: str) -> list:
        return [{"rank": 0, "ip": self.ranks[0]["ip"]}]

    def check(self) -> None:
        return None

    def shutdown(self) -> None:
        return None
