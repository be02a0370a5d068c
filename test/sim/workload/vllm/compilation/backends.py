# STAND-IN: the compile step of vLLM's workers (vllm/compilation/backends.py and monitor.py: the
# torch.compile of the model and its cache), for the vllm-fleet proving ground. Nothing is compiled:
# the step takes a set time when the compile cache holds no entry for its key, writes the entry,
# and with the entry loads it at once, so a container whose cache outlived its predecessor starts
# sooner, as a real one does (minutes on GB10's sm121 for a large model).
#
# Like real vLLM the cache is $VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<rank>_<dp_rank>/
# backbone/ (VLLM_CACHE_ROOT default ~/.cache/vllm), with the file vllm_compile_cache.py in it; the
# hash here covers the vLLM version, the model directory and its config.json (real: every compile
# factor of the vLLM config, the environment and the code). The log lines are vLLM's wording, as
# vLLM of early 2026 logs them (line numbers of that release; the compile range is that of the
# default max_num_batched_tokens, 2048).
#
# The compile time, seconds: VLLM_SIM_COMPILE_SECONDS, else the number in the model directory's
# .vllm-sim/compile-seconds (a test sets it on every node without touching the deployment), else 0.
import hashlib
import os
import time

from vllm import envs
from vllm.logger import init_logger
from vllm.version import __version__

logger = init_logger(__name__)
monitor_logger = init_logger("vllm.compilation.monitor")

COMPILE_RANGE = (1, 2048)


def compile_seconds(model_path: str) -> float:
    value = os.environ.get("VLLM_SIM_COMPILE_SECONDS")
    if value is None:
        try:
            with open(os.path.join(model_path, ".vllm-sim", "compile-seconds"), encoding="utf-8") as f:
                value = f.read().strip()
        except OSError:
            return 0.0
    try:
        return max(0.0, float(value or "0"))
    except ValueError:
        return 0.0


def cache_hash(model_path: str) -> str:
    digest = hashlib.sha256(__version__.encode())
    digest.update(os.path.realpath(model_path).encode())
    try:
        with open(os.path.join(model_path, "config.json"), "rb") as f:
            digest.update(f.read())
    except OSError:
        pass
    return digest.hexdigest()[:10]


def compile_or_load(model_path: str, rank: int, dp_rank: int = 0) -> bool:
    """The model's compile step on one rank: loads the cache entry, or "compiles" and writes it.
    Returns whether the cache had the entry."""
    start = time.time()
    cache_dir = os.path.join(envs.VLLM_CACHE_ROOT, "torch_compile_cache", cache_hash(model_path), f"rank_{rank}_{dp_rank}", "backbone")
    os.makedirs(cache_dir, exist_ok=True)
    logger.info("Using cache directory: %s for vLLM's torch.compile", cache_dir, line=643)
    entry = os.path.join(cache_dir, "vllm_compile_cache.py")
    if os.path.isfile(entry):
        logger.info("Directly load the compiled graph(s) for compile range %s from the cache, took %.3f s",
                    str(COMPILE_RANGE), time.time() - start, line=226)
        monitor_logger.info("torch.compile takes %.2f s in total", time.time() - start, line=34)
        return True
    logger.info("Cache the graph of compile range %s for later use", str(COMPILE_RANGE), line=261)
    time.sleep(compile_seconds(model_path))
    partial = f"{entry}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as f:
        f.write(f"# vllm-fleet stand-in compile cache entry\n{{{str(COMPILE_RANGE)!r}: 'standin'}}\n")
    os.replace(partial, entry)
    logger.info("Compiling a graph for compile range %s takes %.2f s", str(COMPILE_RANGE), time.time() - start, line=278)
    monitor_logger.info("torch.compile takes %.2f s in total", time.time() - start, line=34)
    return False
