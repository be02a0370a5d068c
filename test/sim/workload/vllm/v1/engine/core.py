# STAND-IN: the engine core of vLLM 0.17.1 (vllm/v1/engine/core.py + the config checks of
# vllm/config and vllm/engine/arg_utils.py's create_engine_config), for the vllm-fleet proving
# ground. No model runs: the engine checks what vLLM checks before it can serve (model
# directory, weights on every rank's node, max_model_len, executor backend, parallel sizes),
# starts one executor (uni, mp or ray) and asks every rank on each request and health check.
# Timeouts are bounded: VLLM_SIM_STARTUP_TIMEOUT (s, default 60) replaces vLLM's 1800 s
# placement-group wait and torch's 600 s rendezvous wait; VLLM_SIM_HEALTH_INTERVAL (s, default 5)
# is how often the engine pings every rank (a rank that is gone kills the server, as a dead
# vLLM engine does).
import glob
import json
import os

from vllm.logger import init_logger

logger = init_logger(__name__)

STARTUP_TIMEOUT = float(os.environ.get("VLLM_SIM_STARTUP_TIMEOUT", "60"))
HEALTH_INTERVAL = float(os.environ.get("VLLM_SIM_HEALTH_INTERVAL", "5"))


class StartupError(Exception):
    """A failure vLLM reports as `<ExceptionType>: <message>`; printed, exit 1."""

    def __init__(self, kind: str, message: str):
        super().__init__(kind, message)  # both in args, so it pickles
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return self.message


class EngineDead(Exception):
    pass


def local_gpu_count() -> int:
    """GPUs this process can use: the driver stand-in's count, limited by CUDA_VISIBLE_DEVICES."""
    try:
        with open(os.environ.get("SIM_GPUS_FILE", "/etc/sim/gpus"), encoding="utf-8") as f:
            count = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([v for v in visible.split(",") if v.strip() != ""]))
    return count


def invalid_model_message(model: str) -> str:
    return (
        f"Invalid repository ID or local directory specified: '{model}'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'.\n"
    )


def resolve_model(model: str) -> str:
    """A local model directory, or a repo id found in the Hugging Face cache (offline)."""
    path = model if os.path.isdir(model) else None
    if path is None and "/" in model and not model.startswith(("/", ".")):
        hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
        repo = os.path.join(hub, "models--" + model.replace("/", "--"))
        ref = os.path.join(repo, "refs", "main")
        if os.path.isfile(ref):
            with open(ref, encoding="utf-8") as f:
                candidate = os.path.join(repo, "snapshots", f.read().strip())
            if os.path.isdir(candidate):
                path = candidate
        if path is None:
            snapshots = sorted(glob.glob(os.path.join(repo, "snapshots", "*")))
            if snapshots:
                path = snapshots[-1]
    if path is None or not os.path.isfile(os.path.join(path, "config.json")):
        raise StartupError("ValueError", invalid_model_message(model))
    return path


def load_model_config(model: str) -> dict:
    path = resolve_model(model)
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise StartupError("ValueError", f"Failed to load the model config of '{model}': {e}") from None


def check_weights(model: str) -> list:
    """The weight files a rank would load; vLLM's error when there are none."""
    files = sorted(glob.glob(os.path.join(resolve_model(model), "*.safetensors")))
    if not files:
        raise StartupError("RuntimeError", f"Cannot find any model weights with `{model}`")
    return files


def check_local_gpus(local_world_size: int) -> None:
    gpus = local_gpu_count()
    if gpus == 0:
        raise StartupError("RuntimeError", "No CUDA GPUs are available")
    if gpus < local_world_size:
        raise StartupError("torch.AcceleratorError", (
            "CUDA error: invalid device ordinal\n"
            f"(local_world_size={local_world_size} workers on this node, {gpus} GPU(s) visible)"))


class EngineConfig:
    """What create_engine_config decides: model, lengths, parallel sizes, executor backend."""

    def __init__(self, args):
        self.model = args.model_tag or args.model
        if not self.model:
            raise StartupError("ValueError", "model must be given as the first argument of `vllm serve` or as --model")
        self.model_config = load_model_config(self.model)
        self.tp = args.tensor_parallel_size
        self.pp = args.pipeline_parallel_size
        self.world_size = self.tp * self.pp
        self.nnodes = args.nnodes
        self.node_rank = args.node_rank
        backend = args.distributed_executor_backend
        if backend not in (None, "ray", "mp", "uni", "external_launcher"):
            raise StartupError("pydantic_core._pydantic_core.ValidationError", (
                "1 validation error for ParallelConfig\ndistributed_executor_backend\n"
                f"  Input should be 'ray', 'mp', 'uni' or 'external_launcher' [type=literal_error, "
                f"input_value='{backend}', input_type=str]"))
        if backend is None and self.world_size > 1:
            if self.nnodes > 1:
                backend = "mp"
            elif local_gpu_count() < self.world_size:
                raise StartupError("ValueError", (
                    f"World size ({self.world_size}) is larger than the number of available GPUs "
                    f"({local_gpu_count()}) in this node. If this is intentional and you are using:\n"
                    "- ray, set '--distributed-executor-backend ray'.\n"
                    "- multiprocessing, set '--nnodes' appropriately."))
            else:
                backend = "mp"
        self.backend = backend or "uni"
        if self.backend not in ("mp", "uni", "external_launcher") and self.nnodes > 1:
            raise StartupError("ValueError", "nnodes > 1 can only be set when distributed executor backend "
                                             "is mp, uni or external_launcher.")
        if self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise StartupError("ValueError", f"node_rank ({self.node_rank}) must be in the range [0, {self.nnodes})")
        if self.backend == "external_launcher":
            raise StartupError("NotImplementedError", "the vllm-fleet stand-in does not simulate external_launcher")

        config = self.model_config
        derived = int(config.get("max_position_embeddings")
                      or (config.get("text_config") or {}).get("max_position_embeddings") or 2048)
        wanted = args.max_model_len if args.max_model_len not in (None, -1) else None
        if wanted is not None and wanted > derived and not os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
            raise StartupError("ValueError", (
                f"User-specified max_model_len ({wanted}) is greater than the derived max_model_len "
                f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). "
                "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."))
        self.max_model_len = wanted or derived
        self.local_world_size = self.world_size
        if self.backend == "mp" and self.nnodes > 1:
            if self.world_size % self.nnodes != 0:
                raise StartupError("AssertionError", (
                    f"global world_size ({self.world_size}) must be divisible by nnodes_within_dp "
                    f"({self.nnodes}). "))
            self.local_world_size = self.world_size // self.nnodes
        logger.info("Resolved architecture: %s", (config.get("architectures") or ["?"])[0], line=547)
        logger.info("Using max model len %d", self.max_model_len, line=1510)


def make_executor(args, config: EngineConfig):
    if config.backend == "ray":
        from vllm.v1.executor._ray_executor import RayDistributedExecutor, RayExecutorV2
        from vllm.version import LAYOUT

        return (RayDistributedExecutor if LAYOUT == "0.17.1" else RayExecutorV2)(args, config)
    if config.backend == "mp":
        from vllm.v1.executor.multiproc_executor import MultiprocExecutor

        return MultiprocExecutor(args, config)
    from vllm.v1.executor.uniproc_executor import UniProcExecutor

    return UniProcExecutor(args, config)


def check_reasoning_parser(args) -> None:
    """The engine's structured-output manager loads the reasoning parser (vLLM 0.17.1:
    vllm/v1/structured_output/__init__.py): an unknown name fails the engine core here, after
    the workers are up, with the registry's KeyError."""
    name = args.reasoning_parser
    if not name:
        return
    from vllm.reasoning import ReasoningParserManager

    try:
        ReasoningParserManager.get_reasoning_parser(name)
    except KeyError as e:
        logger.error("EngineCore failed to start.", line=1088)
        logger.error("KeyError: %s", e, line=1088)
        raise StartupError("RuntimeError", "Engine core initialization failed. See root cause above. "
                                           "Failed core proc(s): {}") from None
