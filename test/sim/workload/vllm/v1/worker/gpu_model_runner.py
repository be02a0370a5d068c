# STAND-IN: the log of vLLM's engine start (vllm-fleet proving ground): the lines vLLM 0.17.1, 0.33
# and 0.34 write while the engine loads the weights, compiles, profiles memory and captures CUDA
# graphs, in their words and order (vllm/v1/worker/gpu_model_runner.py load_model and
# capture_model, model_loader/default_loader.py, model_loader/weight_utils.py's shard bar,
# compilation/backends.py and monitor.py, v1/worker/gpu_worker.py, v1/engine/core.py). Nothing is
# loaded, compiled or captured here: the lines only say what a real start would be doing.
#
# Pace: VLLM_SIM_START_SECONDS (else the number in the file VLLM_SIM_START_FILE, default
# /tmp/vllm-sim-start-seconds, where a test can put it in a running container) spread over the
# phases: weights about half, compiling a quarter, CUDA graphs the rest. Default 0: the lines come
# at once, the start is as fast as without them.
import os
import sys
import time

from vllm.logger import init_logger

logger = init_logger("vllm.v1.worker.gpu_model_runner")
loader_logger = init_logger("vllm.model_executor.model_loader.default_loader")
backends_logger = init_logger("vllm.compilation.backends")
monitor_logger = init_logger("vllm.compilation.monitor")
worker_logger = init_logger("vllm.v1.worker.gpu_worker")
core_logger = init_logger("vllm.v1.engine.core")

SHARDS = 4
GRAPHS = 11


def start_seconds() -> float:
    """The pace of this start (see above); 0 when none is set or it cannot be read."""
    text = os.environ.get("VLLM_SIM_START_SECONDS")
    if text is None:
        try:
            with open(os.environ.get("VLLM_SIM_START_FILE", "/tmp/vllm-sim-start-seconds"), encoding="utf-8") as f:
                text = f.read().strip()
        except OSError:
            return 0.0
    try:
        return max(0.0, float(text))
    except ValueError:
        return 0.0


def _bar(desc: str, n: int, total: int, elapsed: float) -> str:
    # weight_utils.py _BAR_FORMAT: "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]\n"
    rate = f"{elapsed / n:.2f}s/it" if n else "?it/s"
    return f"{desc}: {100 * n / total:3.0f}% Completed | {n}/{total} [{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<?, {rate}]\n"


def load_and_compile(model: str, pace: float) -> None:
    """load_model (weights, shard by shard) and the torch.compile that follows it."""
    began = time.monotonic()
    logger.info("Starting to load model %s...", model, line=2602)
    for shard in range(SHARDS + 1):
        if shard:
            time.sleep(pace * 0.5 / SHARDS)
        sys.stdout.write(_bar("Loading safetensors checkpoint shards", shard, SHARDS, time.monotonic() - began))
        sys.stdout.flush()
    loaded = time.monotonic() - began
    loader_logger.info("Loading weights took %.2f seconds", loaded, line=267)
    logger.info("Model loading took %.4f GiB and %.6f seconds", 0.0123, loaded, line=2653)
    compiling = time.monotonic()
    backends_logger.info("Using cache directory: %s for vLLM's torch.compile", "/tmp/vllm-sim/torch_compile_cache/rank_0_0/backbone", line=548)
    time.sleep(pace * 0.1)
    backends_logger.info("Dynamo bytecode transform time: %.2f s", time.monotonic() - compiling, line=559)
    time.sleep(pace * 0.15)
    backends_logger.info("Compiling a graph for dynamic shape takes %.2f s", time.monotonic() - compiling, line=281)
    monitor_logger.info("torch.compile takes %.2f s in total", time.monotonic() - compiling, line=34)
    worker_logger.info("Available KV cache memory: %.2f GiB", 21.41, line=298)


def capture_graphs(pace: float, engine_began: float) -> None:
    """capture_model: tqdm's default bar on stderr, redrawn after a carriage return, then the summary."""
    began = time.monotonic()
    desc = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
    for graph in range(GRAPHS + 1):
        if graph:
            time.sleep(pace * 0.25 / GRAPHS)
        filled = graph * 10 // GRAPHS
        sys.stderr.write(f"\r{desc}: {100 * graph // GRAPHS:3d}%|{'█' * filled}{' ' * (10 - filled)}| {graph}/{GRAPHS} [00:00<00:00]")
        sys.stderr.flush()
    sys.stderr.write("\n")
    sys.stderr.flush()
    logger.info("Graph capturing finished in %.0f secs, took %.2f GiB", time.monotonic() - began, 0.31, line=3480)
    core_logger.info("init engine (profile, create kv cache, warmup model) took %.2f seconds", time.monotonic() - engine_began, line=210)
