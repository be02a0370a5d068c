# STAND-IN: vllm/engine/arg_utils.py of vLLM 0.17.1 (vllm-fleet proving ground).
#
# ENGINE_FLAGS is every engine flag of real `vllm serve` 0.17.1, as its parser has it (option
# strings, action, value type, default, choices, config group): dumped from vLLM 0.17.1's own
# parser (built like its docs' argparse hook does), so an unknown flag is refused and a known
# one accepted exactly as by real vLLM (`--swap-space` is still there in 0.17.1,
# `--disable-log-requests` is gone: only `--enable-log-requests/--no-enable-log-requests`). With
# the 0.33 layout (vllm/version.py) the flags are 0.34.0's, dumped the same way
# (vllm/engine/_flags_v033.py): no `--swap-space`, `--enable-x`/`--disable-x` pairs.
# Simpler than real: JSON config flags (`--compilation-config`, ...) are parsed as JSON only, not
# validated against vLLM's config dataclasses; help texts are not kept.
import argparse
import json
import re

# (option strings, kind, value type, default, choices, group)
#   kind: store | list (nargs "+") | opt (nargs "?", const True) | bool (BooleanOptionalAction,
#   which adds the --no- form itself) | true (store_true) | append | lora (LoRAParserAction)
ENGINE_FLAGS = [
    ('--model', 'store', 'str', 'Qwen/Qwen3-0.6B', None, 'ModelConfig'),
    ('--runner', 'store', 'str', 'auto', ['auto', 'draft', 'generate', 'pooling'], 'ModelConfig'),
    ('--convert', 'store', 'str', 'auto', ['auto', 'classify', 'embed', 'none'], 'ModelConfig'),
    ('--tokenizer', 'store', 'str', None, None, 'ModelConfig'),
    ('--tokenizer-mode', 'store', 'str', 'auto', None, 'ModelConfig'),
    ('--trust-remote-code --no-trust-remote-code', 'bool', '', False, None, 'ModelConfig'),
    ('--dtype', 'store', 'str', 'auto', ['auto', 'bfloat16', 'float', 'float16', 'float32', 'half'], 'ModelConfig'),
    ('--seed', 'store', 'int', 0, None, 'ModelConfig'),
    ('--hf-config-path', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--allowed-local-media-path', 'store', 'str', '', None, 'ModelConfig'),
    ('--allowed-media-domains', 'list', 'optional:str', None, None, 'ModelConfig'),
    ('--revision', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--code-revision', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--tokenizer-revision', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--max-model-len', 'store', 'human_readable_int_or_auto', None, None, 'ModelConfig'),
    ('--quantization -q', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--allow-deprecated-quantization --no-allow-deprecated-quantization', 'bool', '', False, None, 'ModelConfig'),
    ('--enforce-eager --no-enforce-eager', 'bool', '', False, None, 'ModelConfig'),
    ('--enable-return-routed-experts --no-enable-return-routed-experts', 'bool', '', False, None, 'ModelConfig'),
    ('--max-logprobs', 'store', 'int', 20, None, 'ModelConfig'),
    ('--logprobs-mode', 'store', 'str', 'raw_logprobs', ['processed_logits', 'processed_logprobs', 'raw_logits', 'raw_logprobs'], 'ModelConfig'),
    ('--disable-sliding-window --no-disable-sliding-window', 'bool', '', False, None, 'ModelConfig'),
    ('--disable-cascade-attn --no-disable-cascade-attn', 'bool', '', False, None, 'ModelConfig'),
    ('--skip-tokenizer-init --no-skip-tokenizer-init', 'bool', '', False, None, 'ModelConfig'),
    ('--enable-prompt-embeds --no-enable-prompt-embeds', 'bool', '', False, None, 'ModelConfig'),
    ('--served-model-name', 'list', 'optional:str', None, None, 'ModelConfig'),
    ('--config-format', 'store', 'str', 'auto', None, 'ModelConfig'),
    ('--hf-token', 'opt', 'str', None, None, 'ModelConfig'),
    ('--hf-overrides', 'store', 'union_dict_and_str', {}, None, 'ModelConfig'),
    ('--pooler-config', 'store', 'optional:parse_dataclass', None, None, 'ModelConfig'),
    ('--generation-config', 'store', 'str', 'auto', None, 'ModelConfig'),
    ('--override-generation-config', 'store', 'parse:loads', {}, None, 'ModelConfig'),
    ('--enable-sleep-mode --no-enable-sleep-mode', 'bool', '', False, None, 'ModelConfig'),
    ('--model-impl', 'store', 'str', 'auto', None, 'ModelConfig'),
    ('--override-attention-dtype', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--logits-processors', 'list', 'optional:str', None, None, 'ModelConfig'),
    ('--io-processor-plugin', 'store', 'optional:str', None, None, 'ModelConfig'),
    ('--load-format', 'store', 'str', 'auto', None, 'LoadConfig'),
    ('--download-dir', 'store', 'optional:str', None, None, 'LoadConfig'),
    ('--safetensors-load-strategy', 'store', 'str', 'lazy', None, 'LoadConfig'),
    ('--model-loader-extra-config', 'store', 'union_dict_and_str', {}, None, 'LoadConfig'),
    ('--ignore-patterns', 'list', 'str', ['original/**/*'], None, 'LoadConfig'),
    ('--use-tqdm-on-load --no-use-tqdm-on-load', 'bool', '', True, None, 'LoadConfig'),
    ('--pt-load-map-location', 'store', 'union_dict_and_str', 'cpu', None, 'LoadConfig'),
    ('--attention-backend', 'store', 'optional:str', None, None, 'AttentionConfig'),
    ('--reasoning-parser', 'store', 'str', '', None, 'StructuredOutputsConfig'),
    ('--reasoning-parser-plugin', 'store', 'str', '', None, 'StructuredOutputsConfig'),
    ('--distributed-executor-backend', 'store', 'optional:str', None, None, 'ParallelConfig'),
    ('--pipeline-parallel-size -pp', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--master-addr', 'store', 'str', '127.0.0.1', None, 'ParallelConfig'),
    ('--master-port', 'store', 'int', 29501, None, 'ParallelConfig'),
    ('--nnodes -n', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--node-rank -r', 'store', 'int', 0, None, 'ParallelConfig'),
    ('--tensor-parallel-size -tp', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--decode-context-parallel-size -dcp', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--dcp-kv-cache-interleave-size', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--cp-kv-cache-interleave-size', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--prefill-context-parallel-size -pcp', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--data-parallel-size -dp', 'store', 'int', 1, None, 'ParallelConfig'),
    ('--data-parallel-rank -dpn', 'store', 'int', None, None, 'ParallelConfig'),
    ('--data-parallel-start-rank -dpr', 'store', 'int', None, None, 'ParallelConfig'),
    ('--data-parallel-size-local -dpl', 'store', 'int', None, None, 'ParallelConfig'),
    ('--data-parallel-address -dpa', 'store', 'str', None, None, 'ParallelConfig'),
    ('--data-parallel-rpc-port -dpp', 'store', 'int', None, None, 'ParallelConfig'),
    ('--data-parallel-backend -dpb', 'store', 'str', 'mp', None, 'ParallelConfig'),
    ('--data-parallel-hybrid-lb --no-data-parallel-hybrid-lb -dph', 'bool', '', False, None, 'ParallelConfig'),
    ('--data-parallel-external-lb --no-data-parallel-external-lb -dpe', 'bool', '', False, None, 'ParallelConfig'),
    ('--enable-expert-parallel --no-enable-expert-parallel -ep', 'bool', '', False, None, 'ParallelConfig'),
    ('--all2all-backend', 'store', 'str', 'allgather_reducescatter', ['allgather_reducescatter', 'deepep_high_throughput', 'deepep_low_latency', 'flashinfer_all2allv', 'mori', 'naive', 'pplx'], 'ParallelConfig'),
    ('--enable-dbo --no-enable-dbo', 'bool', '', False, None, 'ParallelConfig'),
    ('--ubatch-size', 'store', 'int', 0, None, 'ParallelConfig'),
    ('--enable-elastic-ep --no-enable-elastic-ep', 'bool', '', False, None, 'ParallelConfig'),
    ('--dbo-decode-token-threshold', 'store', 'int', 32, None, 'ParallelConfig'),
    ('--dbo-prefill-token-threshold', 'store', 'int', 512, None, 'ParallelConfig'),
    ('--disable-nccl-for-dp-synchronization --no-disable-nccl-for-dp-synchronization', 'bool', '', None, None, 'ParallelConfig'),
    ('--enable-eplb --no-enable-eplb', 'bool', '', False, None, 'ParallelConfig'),
    ('--eplb-config', 'store', 'parse_dataclass', None, None, 'ParallelConfig'),
    ('--expert-placement-strategy', 'store', 'str', 'linear', ['linear', 'round_robin'], 'ParallelConfig'),
    ('--max-parallel-loading-workers', 'store', 'optional:int', None, None, 'ParallelConfig'),
    ('--ray-workers-use-nsight --no-ray-workers-use-nsight', 'bool', '', False, None, 'ParallelConfig'),
    ('--disable-custom-all-reduce --no-disable-custom-all-reduce', 'bool', '', False, None, 'ParallelConfig'),
    ('--worker-cls', 'store', 'str', 'auto', None, 'ParallelConfig'),
    ('--worker-extension-cls', 'store', 'str', '', None, 'ParallelConfig'),
    ('--block-size', 'store', 'int', None, [1, 8, 16, 32, 64, 128, 256], 'CacheConfig'),
    ('--gpu-memory-utilization', 'store', 'float', 0.9, None, 'CacheConfig'),
    ('--kv-cache-memory-bytes', 'store', 'optional:human_readable_int', None, None, 'CacheConfig'),
    ('--swap-space', 'store', 'float', 4, None, 'CacheConfig'),
    ('--kv-cache-dtype', 'store', 'str', 'auto', ['auto', 'bfloat16', 'fp8', 'fp8_ds_mla', 'fp8_e4m3', 'fp8_e5m2', 'fp8_inc'], 'CacheConfig'),
    ('--num-gpu-blocks-override', 'store', 'optional:int', None, None, 'CacheConfig'),
    ('--enable-prefix-caching --no-enable-prefix-caching', 'bool', '', None, None, 'CacheConfig'),
    ('--prefix-caching-hash-algo', 'store', 'str', 'sha256', ['sha256', 'sha256_cbor', 'xxhash', 'xxhash_cbor'], 'CacheConfig'),
    ('--calculate-kv-scales --no-calculate-kv-scales', 'bool', '', False, None, 'CacheConfig'),
    ('--kv-sharing-fast-prefill --no-kv-sharing-fast-prefill', 'bool', '', False, None, 'CacheConfig'),
    ('--mamba-cache-dtype', 'store', 'str', 'auto', ['auto', 'float16', 'float32'], 'CacheConfig'),
    ('--mamba-ssm-cache-dtype', 'store', 'str', 'auto', ['auto', 'float16', 'float32'], 'CacheConfig'),
    ('--mamba-block-size', 'store', 'optional:int', None, None, 'CacheConfig'),
    ('--mamba-cache-mode', 'store', 'str', 'none', ['align', 'all', 'none'], 'CacheConfig'),
    ('--kv-offloading-size', 'store', 'optional:float', None, None, 'CacheConfig'),
    ('--kv-offloading-backend', 'store', 'str', 'native', ['lmcache', 'native'], 'CacheConfig'),
    ('--offload-backend', 'store', 'str', 'auto', ['auto', 'prefetch', 'uva'], 'OffloadConfig'),
    ('--cpu-offload-gb', 'store', 'float', 0, None, 'OffloadConfig'),
    ('--cpu-offload-params', 'list', 'str', None, None, 'OffloadConfig'),
    ('--offload-group-size', 'store', 'int', 0, None, 'OffloadConfig'),
    ('--offload-num-in-group', 'store', 'int', 1, None, 'OffloadConfig'),
    ('--offload-prefetch-step', 'store', 'int', 1, None, 'OffloadConfig'),
    ('--offload-params', 'list', 'str', None, None, 'OffloadConfig'),
    ('--language-model-only --no-language-model-only', 'bool', '', False, None, 'MultiModalConfig'),
    ('--limit-mm-per-prompt', 'store', 'parse:loads', {}, None, 'MultiModalConfig'),
    ('--enable-mm-embeds --no-enable-mm-embeds', 'bool', '', False, None, 'MultiModalConfig'),
    ('--media-io-kwargs', 'store', 'parse:loads', {}, None, 'MultiModalConfig'),
    ('--mm-processor-kwargs', 'store', 'optional:parse:loads', None, None, 'MultiModalConfig'),
    ('--mm-processor-cache-gb', 'store', 'float', 4, None, 'MultiModalConfig'),
    ('--mm-processor-cache-type', 'store', 'str', 'lru', ['lru', 'shm'], 'MultiModalConfig'),
    ('--mm-shm-cache-max-object-size-mb', 'store', 'int', 128, None, 'MultiModalConfig'),
    ('--mm-encoder-only --no-mm-encoder-only', 'bool', '', False, None, 'MultiModalConfig'),
    ('--mm-encoder-tp-mode', 'store', 'str', 'weights', ['data', 'weights'], 'MultiModalConfig'),
    ('--mm-encoder-attn-backend', 'store', 'optional:str', None, None, 'MultiModalConfig'),
    ('--interleave-mm-strings --no-interleave-mm-strings', 'bool', '', False, None, 'MultiModalConfig'),
    ('--skip-mm-profiling --no-skip-mm-profiling', 'bool', '', False, None, 'MultiModalConfig'),
    ('--video-pruning-rate', 'store', 'optional:float', None, None, 'MultiModalConfig'),
    ('--enable-lora --no-enable-lora', 'bool', '', None, None, 'LoRAConfig'),
    ('--max-loras', 'store', 'int', 1, None, 'LoRAConfig'),
    ('--max-lora-rank', 'store', 'int', 16, [1, 8, 16, 32, 64, 128, 256, 320, 512], 'LoRAConfig'),
    ('--lora-dtype', 'store', 'str', 'auto', None, 'LoRAConfig'),
    ('--enable-tower-connector-lora --no-enable-tower-connector-lora', 'bool', '', False, None, 'LoRAConfig'),
    ('--max-cpu-loras', 'store', 'optional:int', None, None, 'LoRAConfig'),
    ('--fully-sharded-loras --no-fully-sharded-loras', 'bool', '', False, None, 'LoRAConfig'),
    ('--default-mm-loras', 'store', 'optional:parse:loads', None, None, 'LoRAConfig'),
    ('--specialize-active-lora --no-specialize-active-lora', 'bool', '', False, None, 'LoRAConfig'),
    ('--show-hidden-metrics-for-version', 'store', 'optional:str', None, None, 'ObservabilityConfig'),
    ('--otlp-traces-endpoint', 'store', 'optional:str', None, None, 'ObservabilityConfig'),
    ('--collect-detailed-traces', 'list', 'optional:str', None, ['all', 'model', 'worker', 'None', 'model,worker', 'model,all', 'worker,model', 'worker,all', 'all,model', 'all,worker'], 'ObservabilityConfig'),
    ('--kv-cache-metrics --no-kv-cache-metrics', 'bool', '', False, None, 'ObservabilityConfig'),
    ('--kv-cache-metrics-sample', 'store', 'float', 0.01, None, 'ObservabilityConfig'),
    ('--cudagraph-metrics --no-cudagraph-metrics', 'bool', '', False, None, 'ObservabilityConfig'),
    ('--enable-layerwise-nvtx-tracing --no-enable-layerwise-nvtx-tracing', 'bool', '', False, None, 'ObservabilityConfig'),
    ('--enable-mfu-metrics --no-enable-mfu-metrics', 'bool', '', False, None, 'ObservabilityConfig'),
    ('--enable-logging-iteration-details --no-enable-logging-iteration-details', 'bool', '', False, None, 'ObservabilityConfig'),
    ('--max-num-batched-tokens', 'store', 'human_readable_int', None, None, 'SchedulerConfig'),
    ('--max-num-seqs', 'store', 'int', None, None, 'SchedulerConfig'),
    ('--max-num-partial-prefills', 'store', 'int', 1, None, 'SchedulerConfig'),
    ('--max-long-partial-prefills', 'store', 'int', 1, None, 'SchedulerConfig'),
    ('--long-prefill-token-threshold', 'store', 'int', 0, None, 'SchedulerConfig'),
    ('--scheduling-policy', 'store', 'str', 'fcfs', ['fcfs', 'priority'], 'SchedulerConfig'),
    ('--enable-chunked-prefill --no-enable-chunked-prefill', 'bool', '', None, None, 'SchedulerConfig'),
    ('--disable-chunked-mm-input --no-disable-chunked-mm-input', 'bool', '', False, None, 'SchedulerConfig'),
    ('--scheduler-cls', 'store', 'optional:str', None, None, 'SchedulerConfig'),
    ('--disable-hybrid-kv-cache-manager --no-disable-hybrid-kv-cache-manager', 'bool', '', None, None, 'SchedulerConfig'),
    ('--async-scheduling --no-async-scheduling', 'bool', '', None, None, 'SchedulerConfig'),
    ('--stream-interval', 'store', 'int', 1, None, 'SchedulerConfig'),
    ('--cudagraph-capture-sizes', 'list', 'optional:int', None, None, 'CompilationConfig'),
    ('--max-cudagraph-capture-size', 'store', 'int', None, None, 'CompilationConfig'),
    ('--enable-flashinfer-autotune --no-enable-flashinfer-autotune', 'bool', '', None, None, 'KernelConfig'),
    ('--moe-backend', 'store', '<lambda>', 'auto', ['aiter', 'auto', 'cutlass', 'deep_gemm', 'flashinfer_cutedsl', 'flashinfer_cutlass', 'flashinfer_trtllm', 'marlin', 'triton'], 'KernelConfig'),
    ('--speculative-config', 'store', 'optional:loads', None, None, 'VllmConfig'),
    ('--kv-transfer-config', 'store', 'optional:parse_dataclass', None, None, 'VllmConfig'),
    ('--kv-events-config', 'store', 'optional:parse_dataclass', None, None, 'VllmConfig'),
    ('--ec-transfer-config', 'store', 'optional:parse_dataclass', None, None, 'VllmConfig'),
    ('--compilation-config -cc', 'store', 'parse_dataclass', None, None, 'VllmConfig'),
    ('--attention-config -ac', 'store', 'parse_dataclass', None, None, 'VllmConfig'),
    ('--kernel-config', 'store', 'parse_dataclass', None, None, 'VllmConfig'),
    ('--additional-config', 'store', 'union_dict_and_str', {}, None, 'VllmConfig'),
    ('--structured-outputs-config', 'store', 'parse_dataclass', None, None, 'VllmConfig'),
    ('--profiler-config', 'store', 'parse_dataclass', None, None, 'VllmConfig'),
    ('--optimization-level', 'store', 'str', 2, None, 'VllmConfig'),
    ('--performance-mode', 'store', 'str', 'balanced', ['balanced', 'interactivity', 'throughput'], 'VllmConfig'),
    ('--weight-transfer-config', 'store', 'optional:parse_dataclass', None, None, 'VllmConfig'),
    ('--disable-log-stats', 'true', '', False, None, 'options'),
    ('--aggregate-engine-logging', 'true', '', False, None, 'options'),
    ('--fail-on-environ-validation --no-fail-on-environ-validation', 'bool', '', False, None, 'options'),
    ('--enable-log-requests --no-enable-log-requests', 'bool', '', False, None, 'options'),
]


GROUP_DESCRIPTIONS = {
    "Frontend": "Arguments for the OpenAI-compatible frontend server.",
    "ModelConfig": "Configuration for the model.",
    "LoadConfig": "Configuration for loading the model weights.",
    "AttentionConfig": "Configuration for attention mechanisms in vLLM.",
    "StructuredOutputsConfig": "Dataclass which contains structured outputs config for the engine.",
    "ParallelConfig": "Configuration for the distributed execution.",
    "CacheConfig": "Configuration for the KV cache.",
    "OffloadConfig": "Configuration for model weight offloading to reduce GPU memory usage.",
    "MultiModalConfig": "Controls the behavior of multimodal models.",
    "LoRAConfig": "Configuration for LoRA.",
    "ObservabilityConfig": "Configuration for observability - metrics and tracing.",
    "SchedulerConfig": "Scheduler configuration.",
    "CompilationConfig": "Configuration for compilation.",
    "KernelConfig": "Configuration for kernel selection and warmup behavior.",
    "VllmConfig": "Dataclass which contains all vllm-related configuration. This",
}


class StructuredOutputsConfig:
    """The parts of vllm.config.StructuredOutputsConfig the server reads (the default object of
    `--structured-outputs-config`; `--reasoning-parser` is a separate flag, copied into it only
    when the engine config is made, as in vLLM 0.17.1)."""

    def __init__(self, backend="auto", reasoning_parser="", reasoning_parser_plugin="", **extra):
        self.backend = backend
        self.reasoning_parser = reasoning_parser
        self.reasoning_parser_plugin = reasoning_parser_plugin
        self.extra = extra

    def __eq__(self, other):
        return isinstance(other, StructuredOutputsConfig) and vars(self) == vars(other)

    def __repr__(self):
        return (f"StructuredOutputsConfig(backend={self.backend!r}, "
                f"reasoning_parser={self.reasoning_parser!r})")


# The value types, named as vLLM's (argparse names them in "invalid <type> value" messages).
def parse_type(return_type):
    def _parse_type(val):
        try:
            return return_type(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {return_type}.") from e

    return _parse_type


def optional_type(return_type):
    def _optional_type(val):
        if val == "" or val == "None":
            return None
        return parse_type(return_type)(val)

    return _optional_type


def union_dict_and_str(val):
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    return optional_type(json.loads)(val)


def human_readable_int(value):
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        binary = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        try:
            return int(number) * binary[suffix]
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?") from e
    return int(value)


def human_readable_int_or_auto(value):
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def parse_dataclass(val):
    """Simpler than vLLM's (pydantic validation of the config dataclass): a JSON object."""
    try:
        parsed = json.loads(val)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"Invalid JSON: {e}") from e
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"Expected a JSON object, got {val!r}")
    return parsed


_BASE_TYPES = {
    "str": str, "int": int, "float": float, "loads": json.loads, "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto, "union_dict_and_str": union_dict_and_str,
    "parse_dataclass": parse_dataclass, "parse:loads": parse_type(json.loads),
    "<lambda>": lambda s: s.lower().replace("-", "_"),
    # vLLM 0.33 and 0.34 (--reasoning-parser): `none`, any case, is no parser.
    "parse_reasoning_parser": lambda s: "" if s.lower() == "none" else s,
}


def value_type(name: str):
    if not name:
        return None
    if name.startswith("optional:"):
        inner = name[len("optional:"):]
        return optional_type(json.loads if inner == "parse:loads" else _BASE_TYPES[inner])
    return _BASE_TYPES[name]


class LoRAParserAction(argparse.Action):
    """`--lora-modules name=path ...` or JSON objects (vllm/entrypoints/openai/cli_args.py)."""

    def __call__(self, parser, namespace, values, option_string=None):
        modules = []
        for item in values or []:
            if item in (None, ""):
                continue
            if "=" in item and "," not in item:
                name, path = item.split("=")
                modules.append({"name": name, "path": path})
            else:
                try:
                    modules.append(json.loads(item))
                except json.JSONDecodeError:
                    parser.error(f"Invalid JSON format for --lora-modules: {item}")
        setattr(namespace, self.dest, modules)


def _option_names(options: str, kind: str) -> list:
    """The names to declare: the table lists what the parser ends up with, the `--no-x` forms of
    a boolean flag and (0.33 layout) the inverse of each `--enable-x`/`--disable-x`, which the
    action adds itself."""
    names = []
    for name in options.split():
        if name.startswith("--no-"):
            continue
        if kind == "bool" and any(name == _inverse(kept) for kept in names):
            continue
        names.append(name)
    return names


def _inverse(name: str) -> str:
    for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
        if name.startswith(prefix):
            return inverse + name[len(prefix):]
    return ""


def add_flags(parser, flags) -> None:
    """Adds flags of the table form to `parser`, in config groups like vLLM's."""
    groups = {}
    for options, kind, type_name, default, choices, group in flags:
        names = _option_names(options, kind)
        if group == "options":
            target = parser
        else:
            if group not in groups:
                groups[group] = parser.add_argument_group(title=group, description=GROUP_DESCRIPTIONS.get(group))
            target = groups[group]
        # argparse tells SUPPRESS (no attribute unless given) by identity, not by value.
        kwargs = {"default": argparse.SUPPRESS if default == argparse.SUPPRESS else default}
        if names[0] == "--structured-outputs-config":
            kwargs["default"] = StructuredOutputsConfig()
        if kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif kind == "true":
            kwargs["action"] = "store_true"
        elif kind == "append":
            kwargs.update(action="append", type=value_type(type_name), default=[])
        elif kind == "lora":
            kwargs.update(action=LoRAParserAction, nargs="+", type=value_type(type_name))
        else:
            kwargs["type"] = value_type(type_name)
            if kind == "list":
                kwargs["nargs"] = "+"
            elif kind == "opt":
                kwargs.update(nargs="?", const=True)
            if choices:
                kwargs["choices"] = choices
        target.add_argument(*names, **kwargs)


def engine_flags() -> list:
    """The engine flags of the release the stand-in models (vllm/version.py)."""
    from vllm.version import LAYOUT, RELEASE

    if LAYOUT == "0.17.1":
        return ENGINE_FLAGS
    from vllm.engine._flags_v033 import ENGINE_FLAGS as FLAGS_V033, NOT_IN_0_33_0

    if RELEASE == "0.33.0":
        return [f for f in FLAGS_V033 if f[0].split()[0] not in NOT_IN_0_33_0]
    return FLAGS_V033


def _async_only(flag) -> bool:
    return flag[0].split()[0] == "--enable-log-requests"


class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        add_flags(parser, [f for f in engine_flags() if not _async_only(f)])
        return parser


class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser, async_args_only: bool = False):
        flags = engine_flags() if not async_args_only else [f for f in engine_flags() if _async_only(f)]
        add_flags(parser, flags)
        return parser
