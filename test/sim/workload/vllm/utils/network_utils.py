# STAND-IN: vllm/utils/network_utils.py of vLLM 0.17.1 (vllm-fleet proving ground): get_ip() as
# real vLLM has it: VLLM_HOST_IP, else the source address of the default route (so an unpinned
# node shows the real bug: the management address), else 0.0.0.0 with vLLM's warning.
import os
import socket
import warnings

from vllm.logger import init_logger

logger = init_logger(__name__)


def get_ip() -> str:
    host_ip = os.getenv("VLLM_HOST_IP", "")
    if "HOST_IP" in os.environ and "VLLM_HOST_IP" not in os.environ:
        logger.warning(
            "The environment variable HOST_IP is deprecated and ignored, as it is often used by "
            "Docker and other software to interact with the container's network stack. Please "
            "use VLLM_HOST_IP instead to set the IP address for vLLM processes to communicate "
            "with each other.", line=36)
    if host_ip:
        return host_ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 80))  # no packet is sent
            return s.getsockname()[0]
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.connect(("2001:4860:4860::8888", 80))
            return s.getsockname()[0]
    except OSError:
        pass
    warnings.warn("Failed to get the IP address, using 0.0.0.0 by default.The value can be set by the "
                  "environment variable VLLM_HOST_IP or HOST_IP.", stacklevel=2)
    return "0.0.0.0"
