# STAND-IN: vLLM's Ray executors, for the vllm-fleet proving ground: RayDistributedExecutor of
# vLLM 0.17.1 (vllm/v1/executor/ray_executor.py) and RayExecutorV2 of 0.33 and 0.34
# (vllm/v1/executor/ray_executor_v2.py); each public module re-exports its own in its layout.
# The steps of 0.17.1's _init_workers_ray, in vLLM's order:
#  1. one RayWorkerWrapper actor per GPU bundle of the placement group (num_cpus=0, num_gpus=1);
#  2. each reports get_ip() (its own VLLM_HOST_IP, else its default route's address); workers
#     are sorted (driver's node first, then nodes with fewer workers, then by address) and
#     re-ranked; "Every node should have a unique IP address ..." when node count and address
#     count differ;
#  3. the environment for the workers: CUDA_VISIBLE_DEVICES = the GPU ids Ray gave that node's
#     workers, plus the DRIVER's values of the variables vllm/ray/ray_env.py selects (its log
#     lines); each worker applies them (update_environment_variables: vLLM's "Overwriting
#     environment variable X from 'a' to 'b'" in the worker's log). This is how a worker node
#     ends up with the head's NCCL_SOCKET_IFNAME unless $VLLM_CONFIG_ROOT/
#     ray_non_carry_over_env_vars.json lists it;
#  4. init_worker, init_device (Gloo, NCCL: see vllm/v1/worker/gpu_worker.py) and load_model on
#     every worker. A worker's failure fails the engine with the worker's error.
# RayExecutorV2 differs in steps 2 and 3: ranks follow the placement group's bundles, the driver's
# node first, then by node id (ray_utils.get_bundles_sorted_by_node), with no check of the
# addresses (no "unique IP address" error); the workers get the driver's WHOLE environment but the
# worker-specific variables and the non-carry-over list (vllm/v1/executor/ray_env_utils.py), which
# each applies with setdefault: it fills in what the worker lacks and never overwrites its own
# values (no "Overwriting" warning, no "Copying ..." log lines). So a worker node keeps its own
# NCCL_SOCKET_IFNAME even without the non-carry-over list, but takes the head's NCCL_IB_HCA when it
# has none of its own, unless the list names it.
# Simpler than real: errors are reported as "<type>: <message> (rank r on node a)" instead of
# Ray's RayTaskError traceback; the engine core runs in the API server's process; V2's workers
# get CUDA_VISIBLE_DEVICES from Ray as 0.17.1's do (V2 asks Ray not to set it and maps local ranks
# to physical GPU ids itself), and talk to the driver through Ray calls, not message queues.
import os
from collections import defaultdict

from vllm.logger import init_logger
from vllm.ray.ray_env import get_env_vars_to_copy
from vllm.utils.network_utils import get_ip
from vllm.v1.engine.core import STARTUP_TIMEOUT, EngineDead, StartupError
from vllm.v1.executor.ray_utils import RayWorkerWrapper, initialize_ray_cluster

logger = init_logger("vllm.v1.executor.ray_executor")


class RayDistributedExecutor:
    WORKER_SPECIFIC_ENV_VARS = {
        "VLLM_HOST_IP", "VLLM_HOST_PORT", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    }
    # "driver node id ... is not included in a placement group" (0.17.1's ray_utils; gone in 0.33).
    DRIVER_NODE_CHECK = True

    def __init__(self, args, config):
        import ray

        self.ray = ray
        self.pg = None
        self.workers = []
        try:
            self._init(args, config)
        except BaseException:
            self.shutdown()
            raise

    def _collective(self, method: str, *args, check: bool = False):
        refs = [getattr(w, method).remote(*args) for w in self.workers]
        try:
            results = self.ray.get(refs, timeout=STARTUP_TIMEOUT)
        except self.ray.exceptions.GetTimeoutError:
            raise StartupError("TimeoutError", f"Ray workers did not finish {method} within "
                                               f"{STARTUP_TIMEOUT:g} seconds") from None
        except self.ray.exceptions.RayError as e:
            raise StartupError("RuntimeError", f"a Ray worker failed in {method}: {e}") from None
        if check:
            for worker_rank, result in enumerate(results):
                if "error" in result:
                    err = result["error"]
                    raise StartupError(err["kind"], f"{err['message']}\n(rank {worker_rank} on node "
                                                    f"{self.worker_ips[worker_rank]})")
            results = [r["ok"] for r in results]
        return results

    def _init(self, args, config) -> None:
        ray = self.ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.pg, driver_node_id = initialize_ray_cluster(args, config.world_size)
        worker_cls = ray.remote(num_cpus=0, num_gpus=1)(RayWorkerWrapper)
        created = [
            worker_cls.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=i,
                placement_group_capture_child_tasks=True)).remote(rpc_rank=i)
            for i in range(config.world_size)
        ]
        self.workers = created
        try:
            ips = ray.get([w.get_node_ip.remote() for w in created], timeout=STARTUP_TIMEOUT)
            nodes = ray.get([w.get_node_and_gpu_ids.remote() for w in created], timeout=STARTUP_TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            raise StartupError("TimeoutError", f"Ray workers did not start within {STARTUP_TIMEOUT:g} seconds") from None
        except ray.exceptions.RayError as e:
            raise StartupError("RuntimeError", f"a Ray worker failed to start: {e}") from None

        driver_ip = get_ip()
        order = self._rank_order(ips, [node_id for node_id, _ in nodes], driver_ip, driver_node_id)
        self.workers = [created[i] for i in order]
        self.worker_ips = [ips[i] for i in order]
        self._collective("adjust_rank", {created_rank: rank for rank, created_rank in enumerate(order)})

        node_and_gpus = [nodes[i] for i in order]
        node_workers, node_gpus = defaultdict(list), defaultdict(list)
        for i, (node_id, gpu_ids) in enumerate(node_and_gpus):
            node_workers[node_id].append(i)
            node_gpus[node_id].extend(int(x) for x in gpu_ids)
        for node_id in node_gpus:
            node_gpus[node_id].sort()

        self._check_addresses(node_workers, driver_ip)
        self._send_environment(node_and_gpus, node_gpus)

        kwargs = [{"rank": rank, "local_rank": node_workers[node_id].index(rank), "model": config.model}
                  for rank, (node_id, _) in enumerate(node_and_gpus)]
        self._collective("init_worker", kwargs)
        self.ranks = self._collective("init_device", check=True)
        self._collective("load_model", check=True)

        if self.DRIVER_NODE_CHECK and driver_node_id not in node_workers:
            raise StartupError("RuntimeError", (
                f"driver node id {driver_node_id} is not included in a placement group. "
                "You don't have enough GPUs available in a current node. Check `ray status` and "
                "`ray list nodes` to see if you have available GPUs in a node "
                f"`{driver_node_id}` before starting an vLLM engine."))
        for node_id, ranks in node_workers.items():
            if len(ranks) < args.tensor_parallel_size:
                logger.warning(
                    "tensor_parallel_size=%d is bigger than a reserved number of GPUs (%d GPUs) in a node "
                    "%s. Tensor parallel workers can be spread out to 2+ nodes which can degrade the "
                    "performance unless you have fast interconnect across nodes, like Infiniband. To "
                    "resolve this issue, make sure you have more than %d GPUs available at each node.",
                    args.tensor_parallel_size, len(ranks), node_id, args.tensor_parallel_size, line=228)

    @staticmethod
    def _rank_order(ips: list, node_ids: list, driver_ip: str, driver_node_id: str) -> list:
        """The workers in rank order: the driver's node first, then nodes with fewer workers, then
        by address."""
        ip_counts = defaultdict(int)
        for ip in ips:
            ip_counts[ip] += 1
        return sorted(range(len(ips)), key=lambda i: (0 if ips[i] == driver_ip else 1, ip_counts[ips[i]], ips[i]))

    def _check_addresses(self, node_workers: dict, driver_ip: str) -> None:
        all_ips = set(self.worker_ips + [driver_ip])
        if len(node_workers) != len(all_ips):
            raise StartupError("RuntimeError", (
                f"Every node should have a unique IP address. Got {len(node_workers)} nodes with node ids "
                f"{list(node_workers.keys())} and {len(all_ips)} unique IP addresses {all_ips}. Please check "
                "your network configuration. If you set `VLLM_HOST_IP` environment variable, make sure it "
                "is unique for each node."))

    def _send_environment(self, node_and_gpus: list, node_gpus: dict) -> None:
        """The node's GPUs, plus the driver's values of the variables ray_env.py selects; each
        worker overwrites its own with them."""
        env_list = [{"CUDA_VISIBLE_DEVICES": ",".join(map(str, node_gpus[node_id]))}
                    for node_id, _ in node_and_gpus]
        to_copy = get_env_vars_to_copy(exclude_vars=self.WORKER_SPECIFIC_ENV_VARS, additional_vars=set(),
                                       destination="workers")
        for env in env_list:
            for name in to_copy:
                if name in os.environ:
                    env[name] = os.environ[name]
        self._collective("update_environment_variables", env_list)

    def execute(self, request_id: str) -> list:
        try:
            return self.ray.get([w.execute.remote(request_id) for w in self.workers], timeout=30)
        except Exception as e:  # noqa: BLE001 - any rank failure kills the engine
            raise EngineDead(f"{type(e).__name__}: {e}") from None

    def check(self) -> None:
        self.execute("health")

    def shutdown(self) -> None:
        from ray.util.placement_group import remove_placement_group

        for w in self.workers:
            try:
                self.ray.kill(w)
            except Exception:  # noqa: BLE001
                pass
        self.workers = []
        if self.pg is not None:
            try:
                remove_placement_group(self.pg)
            except Exception:  # noqa: BLE001
                pass
            self.pg = None


class RayExecutorV2(RayDistributedExecutor):
    """vLLM 0.33's and 0.34's Ray executor (see the header for how it differs)."""

    # vllm/v1/executor/ray_utils.py WORKER_SPECIFIC_ENV_VARS of 0.33 and 0.34.
    WORKER_SPECIFIC_ENV_VARS = {
        "VLLM_HOST_IP", "VLLM_HOST_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST", "LOCAL_RANK",
        "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    }
    DRIVER_NODE_CHECK = False

    @staticmethod
    def _rank_order(ips: list, node_ids: list, driver_ip: str, driver_node_id: str) -> list:
        """The placement group's bundles in order, the driver's node first, then by node id."""
        return sorted(range(len(node_ids)), key=lambda i: (0 if node_ids[i] == driver_node_id else 1, node_ids[i]))

    def _check_addresses(self, node_workers: dict, driver_ip: str) -> None:
        pass

    def _send_environment(self, node_and_gpus: list, node_gpus: dict) -> None:
        from vllm.v1.executor.ray_env_utils import get_driver_env_vars

        driver_env = get_driver_env_vars(worker_specific_vars=self.WORKER_SPECIFIC_ENV_VARS)
        self._collective("set_default_environment_variables", driver_env)
