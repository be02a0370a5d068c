# STAND-IN: vllm/v1/executor/ray_utils.py of vLLM 0.17.1 (vllm-fleet proving ground):
# initialize_ray_cluster (join the running Ray cluster, create the placement group vLLM creates:
# world-size bundles of {GPU: 1}, the first also asking node:<get_ip()>, with vLLM's wording when
# it cannot be placed), RayWorkerWrapper, the Ray actor of one rank (also of 0.33's and 0.34's
# RayExecutorV2, whose RayWorkerProc it stands in for), and assert_ray_available.
# Simpler than real: no compiled DAG; the wait for the placement group is bounded by
# VLLM_SIM_STARTUP_TIMEOUT.
import os
import time

from vllm.logger import init_logger
from vllm.utils.network_utils import get_ip
from vllm.v1.engine.core import STARTUP_TIMEOUT, StartupError, local_gpu_count

logger = init_logger(__name__)


class RayWorkerWrapper:
    """One rank in a Ray worker process on some node. Its prints (NCCL's lines, vLLM's warnings)
    go to that worker's log on that node (/tmp/ray/session_latest/logs/worker-*.out) and Ray
    forwards them to the driver, prefixed "(RayWorkerWrapper pid=N, ip=A)"."""

    def __init__(self, rpc_rank: int):
        self.rpc_rank = rpc_rank
        self.rank = rpc_rank
        self.local_rank = 0
        self.model = None
        self.report = None

    def get_node_ip(self) -> str:
        return get_ip()

    def get_node_and_gpu_ids(self):
        import ray

        ctx = ray.get_runtime_context()
        return ctx.get_node_id(), ctx.get_accelerator_ids().get("GPU", [])

    def adjust_rank(self, rank_mapping: dict) -> None:
        if self.rpc_rank in rank_mapping:
            self.rpc_rank = rank_mapping[self.rpc_rank]

    def update_environment_variables(self, envs_list: list) -> None:
        from vllm.utils.system_utils import update_environment_variables

        update_environment_variables(envs_list[self.rpc_rank])

    def set_default_environment_variables(self, driver_env: dict) -> None:
        """vLLM 0.33's and 0.34's RayWorkerProc.initialize_worker: the driver's variables fill in
        what this worker lacks (setdefault) and never overwrite its own."""
        for key, value in driver_env.items():
            os.environ.setdefault(key, value)

    def init_worker(self, all_kwargs: list) -> None:
        kwargs = all_kwargs[self.rpc_rank]
        self.rank = kwargs["rank"]
        self.local_rank = kwargs["local_rank"]
        self.model = kwargs["model"]

    def _execute(self, method: str, fn):
        try:
            return {"ok": fn()}
        except StartupError as e:
            # vLLM's RayWorkerWrapper.execute_method logs the failure, then raises it to the driver.
            print(f"ERROR {time.strftime('%m-%d %H:%M:%S')} [worker_base.py:350] Error executing method "
                  f"{method!r}. This might cause deadlock in distributed execution.", flush=True)
            print(f"{e.kind}: {e}", flush=True)
            return {"error": {"kind": e.kind, "message": str(e)}}

    def init_device(self) -> dict:
        import ray

        from vllm.v1.worker.gpu_worker import init_device

        def run():
            self.report = init_device(self.rank, self.local_rank, ray.util.get_node_ip_address())
            return self.report

        return self._execute("init_device", run)

    def load_model(self) -> dict:
        from vllm.v1.worker.gpu_worker import load_model

        def run():
            load_model(self.model, self.rank)
            print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [gpu_worker.py:104] rank {self.rank} ready on "
                  f"{self.report['ip']} (get_ip()={self.report['vllm_host_ip']}, "
                  f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')})", flush=True)
            return True

        return self._execute("load_model", run)

    def execute(self, request_id: str) -> dict:
        return {"rank": self.rank, "ip": self.report["ip"]}


def assert_ray_available():
    """vLLM's check that Ray can be imported (vllm/config/parallel.py calls it for the ray executor;
    vllm-fleet's argument check too). vLLM imports Ray when this module loads; the stand-in, when asked."""
    try:
        import ray  # noqa: F401
    except ImportError as e:
        raise ValueError(f"Failed to import Ray: {e}." "Please install Ray with `pip install ray`.") from None


def _available_resources_per_node():
    try:
        from ray._private.state import available_resources_per_node
    except ImportError:  # pragma: no cover
        from ray._private.state import state as _state

        available_resources_per_node = _state._available_resources_per_node  # noqa: SLF001
    return available_resources_per_node()


def initialize_ray_cluster(args, world_size: int):
    """Joins the running Ray cluster and returns the placement group for the world size."""
    import ray
    from ray.util.placement_group import placement_group

    visible = local_gpu_count()
    if world_size > visible:
        logger.warning(
            "Total GPU requirement (world_size=%d) exceeds locally visible GPUs (%d). For multi-node "
            "Ray clusters, this may be expected if the total cluster has enough GPUs. If running "
            "single-node, consider reducing tensor_parallel_size (%d) or pipeline_parallel_size (%d).",
            world_size, visible, args.tensor_parallel_size, args.pipeline_parallel_size, line=352)
    try:
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), logging_level="WARNING")
    except ConnectionError as e:
        raise StartupError("ConnectionError", str(e)) from None
    logger.info("No current placement group found. Creating a new placement group.", line=417)
    if world_size > ray.cluster_resources().get("GPU", 0):
        logger.warning("The number of required GPUs exceeds the total number of available GPUs in the "
                       "placement group.", line=423)
    specs = [{"GPU": 1.0} for _ in range(world_size)]
    current_ip = get_ip()
    current_node_id = ray.get_runtime_context().get_node_id()
    current_node_resource = _available_resources_per_node().get(current_node_id, {})
    if current_node_resource.get("GPU", 0) < 1:
        raise StartupError("ValueError", (
            f"Current node has no GPU available. current_node_resource={current_node_resource}. "
            "vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in "
            f"a node current_node_id={current_node_id!r} current_ip={current_ip!r}."))
    specs[0][f"node:{current_ip}"] = 0.001
    pg = placement_group(specs, strategy="PACK")
    _wait_for_placement_group(ray, pg, specs)
    return pg, current_node_id


def _wait_for_placement_group(ray, pg, specs) -> None:
    from ray.util.placement_group import remove_placement_group

    start = time.time()
    ready_ref = pg.ready()
    wait_interval = 10.0
    while time.time() - start < STARTUP_TIMEOUT:
        remaining = STARTUP_TIMEOUT - (time.time() - start)
        ready, _ = ray.wait([ready_ref], timeout=max(0.1, min(wait_interval, remaining)))
        if ready:
            return
        wait_interval *= 2
        logger.info(
            "Waiting for creating a placement group of specs for %d seconds. specs=%s. Check `ray status` "
            "and `ray list nodes` to see if you have enough resources, and make sure the IP addresses "
            "used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each "
            "node if you are running on a multi-node.", int(time.time() - start), specs, line=267)
    try:
        ray.get(ready_ref, timeout=0)
        return
    except ray.exceptions.GetTimeoutError:
        pass
    total = sum(spec.get("GPU", 0) for spec in specs)
    try:
        remove_placement_group(pg)
    except Exception:  # noqa: BLE001
        pass
    if total > 1:
        raise StartupError("ValueError", (
            f"Cannot provide a placement group requiring {total} GPUs "
            f"(placement_group_specs={specs}) within {STARTUP_TIMEOUT:g} seconds.\n"
            "Tensor parallel size may exceed available GPUs in your cluster. Check resources "
            "with `ray status` and `ray list nodes`.\n"
            "If running on K8s with limited GPUs, consider reducing --tensor-parallel-size to "
            "match available GPU resources."))
    raise StartupError("ValueError", (
        f"Cannot provide a placement group of placement_group_specs={specs} within "
        f"{STARTUP_TIMEOUT:g} seconds. See `ray status` and `ray list nodes` to make sure the "
        "cluster has enough resources."))
