# STAND-IN: one GPU worker (rank) of vLLM 0.17.1 (vllm/v1/worker/gpu_worker.py), for the
# vllm-fleet proving ground. init_device sets up what the rank's torch.distributed and NCCL
# would: Gloo first (GLOO_SOCKET_IFNAME must name interfaces of this node, like torch's Gloo),
# then the NCCL communicator (vllm/distributed/device_communicators/pynccl_wrapper.py: NCCL's
# own NCCL_DEBUG lines on this process's stdout, its bootstrap failure for an
# NCCL_SOCKET_IFNAME this node lacks). load_model finds the weights on this rank's node, then
# runs the compile step (vllm/compilation/backends.py: slow without a warm compile cache).
# The report says where the rank runs and what it was given.
import os
import socket

from vllm.distributed.device_communicators.pynccl_wrapper import NcclError, comm_init_rank, iface_ipv4
from vllm.utils.network_utils import get_ip
from vllm.compilation.backends import compile_or_load
from vllm.v1.engine.core import StartupError, check_weights, resolve_model

RANK_ENV_VARS = (
    "VLLM_HOST_IP", "RAY_OVERRIDE_NODE_IP_ADDRESS", "RAY_NODE_IP_ADDRESS", "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "NCCL_IB_HCA",
    "NCCL_IB_DISABLE", "CUDA_VISIBLE_DEVICES",
)


def check_gloo() -> dict:
    """torch's Gloo device for GLOO_SOCKET_IFNAME (comma-separated exact interface names)."""
    spec = os.environ.get("GLOO_SOCKET_IFNAME")
    if not spec:
        return {}
    for name in (n.strip() for n in spec.split(",")):
        if name and not iface_ipv4(name):
            raise StartupError("RuntimeError", f"[enforce fail at ../third_party/gloo/gloo/transport/"
                                               f"tcp/device.cc:83] ifa != nullptr. Unable to find address for: {name}")
    first = spec.split(",")[0].strip()
    return {"GLOO_SOCKET_IFNAME": {"iface": first, "ip": iface_ipv4(first)}}


def init_device(rank: int, local_rank: int, node_ip: str) -> dict:
    comm = check_gloo()
    try:
        network = comm_init_rank(local_rank)
    except NcclError as e:
        raise StartupError("RuntimeError", str(e)) from None
    return {
        "rank": rank,
        "ip": node_ip,
        "vllm_host_ip": get_ip(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "env": {k: os.environ[k] for k in RANK_ENV_VARS if k in os.environ},
        "comm": comm,
        "nccl_network": network,
    }


def load_model(model: str, rank: int = 0) -> list:
    files = check_weights(model)
    compile_or_load(resolve_model(model), rank)
    return files
