# STAND-IN: vllm/envs.py of vLLM 0.17.1 (vllm-fleet proving ground).
#
# Real vllm.envs registers ~230 variables in `environment_variables` (name -> getter) and reads
# them lazily through a module __getattr__. Here only what the stand-in reads is modeled, plus
# every registered name WITHOUT the VLLM_ prefix: those matter to the Ray env carry-over
# (vllm/ray/ray_env.py copies registered names, and any VLLM_* name is copied by prefix anyway).
# Simpler than real: the getters do no type conversion beyond what the stand-in needs.
import os


def get_default_config_root() -> str:
    return os.getenv("XDG_CONFIG_HOME", os.path.join(os.path.expanduser("~"), ".config"))


def get_default_cache_root() -> str:
    return os.getenv("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))


environment_variables = {
    # the registered names of vLLM 0.17.1 without the VLLM_ prefix
    "MAX_JOBS": lambda: os.getenv("MAX_JOBS"),
    "NVCC_THREADS": lambda: os.getenv("NVCC_THREADS"),
    "CMAKE_BUILD_TYPE": lambda: os.getenv("CMAKE_BUILD_TYPE"),
    "VERBOSE": lambda: bool(int(os.getenv("VERBOSE", "0"))),
    "CUDA_HOME": lambda: os.getenv("CUDA_HOME"),
    "LD_LIBRARY_PATH": lambda: os.getenv("LD_LIBRARY_PATH"),
    "LOCAL_RANK": lambda: int(os.getenv("LOCAL_RANK", "0")),
    "CUDA_VISIBLE_DEVICES": lambda: os.getenv("CUDA_VISIBLE_DEVICES"),
    "S3_ACCESS_KEY_ID": lambda: os.getenv("S3_ACCESS_KEY_ID"),
    "S3_SECRET_ACCESS_KEY": lambda: os.getenv("S3_SECRET_ACCESS_KEY"),
    "S3_ENDPOINT_URL": lambda: os.getenv("S3_ENDPOINT_URL"),
    "NO_COLOR": lambda: os.getenv("NO_COLOR", "0") != "0",
    "Q_SCALE_CONSTANT": lambda: int(os.getenv("Q_SCALE_CONSTANT", "200")),
    "K_SCALE_CONSTANT": lambda: int(os.getenv("K_SCALE_CONSTANT", "200")),
    "V_SCALE_CONSTANT": lambda: int(os.getenv("V_SCALE_CONSTANT", "100")),
    # VLLM_* names the stand-in reads
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    "VLLM_PORT": lambda: int(os.environ["VLLM_PORT"]) if "VLLM_PORT" in os.environ else None,
    "VLLM_CONFIG_ROOT": lambda: os.path.expanduser(
        os.getenv("VLLM_CONFIG_ROOT", os.path.join(get_default_config_root(), "vllm"))),
    "VLLM_CACHE_ROOT": lambda: os.path.expanduser(
        os.getenv("VLLM_CACHE_ROOT", os.path.join(get_default_cache_root(), "vllm"))),
    "VLLM_API_KEY": lambda: os.getenv("VLLM_API_KEY"),
    "VLLM_CONFIGURE_LOGGING": lambda: int(os.getenv("VLLM_CONFIGURE_LOGGING", "1")),
    "VLLM_LOGGING_PREFIX": lambda: os.getenv("VLLM_LOGGING_PREFIX", ""),
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(),
    "VLLM_WORKER_MULTIPROC_METHOD": lambda: os.getenv("VLLM_WORKER_MULTIPROC_METHOD", "fork"),
    "VLLM_NO_USAGE_STATS": lambda: os.getenv("VLLM_NO_USAGE_STATS", "0") == "1",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": lambda: os.getenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").lower() in ("1", "true"),
    "VLLM_RAY_PER_WORKER_GPUS": lambda: float(os.getenv("VLLM_RAY_PER_WORKER_GPUS", "1.0")),
    "VLLM_RAY_BUNDLE_INDICES": lambda: os.getenv("VLLM_RAY_BUNDLE_INDICES", ""),
    "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": lambda: os.getenv("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY", ""),
    "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": lambda: os.getenv("VLLM_RAY_EXTRA_ENV_VARS_TO_COPY", ""),
}


def __getattr__(name: str):
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return list(environment_variables.keys())
