/**
 * A model as the fit planner sees it: its config.json (layers, heads, dtypes, the attention kinds),
 * the bytes of its weights, the KV cache dtype; the checks of TP and PP against its heads and
 * layers. Pure. See plan.ts for what the planner assumes.
 */
import { FleetError } from "../errors";
import { ModelDirFacts } from "../facts";

/** One gibibyte, the unit of every message and of {@link describeFitPlan}. */
export const GIB = 1024 ** 3;

/**
 * Memory each rank needs besides weights and KV cache: the activation peak vLLM profiles with a
 * full batch of `max-num-batched-tokens`, CUDA graphs and NCCL/communication buffers. vLLM
 * measures it at start-up; 3 GiB is a deliberately round budget for it on one GPU.
 */
export const RUNTIME_OVERHEAD_BYTES_PER_RANK = 3 * GIB;

/** A reason the model does not fit; the message carries the numbers and names the node. */
export class FitError extends FleetError {
    /** Every problem found, one per line of the message. */
    readonly problems: readonly string[];

    /** `heading` leads the list when there are several problems. */
    constructor(problems: readonly string[], heading = "the model does not fit") {
        super(problems.length === 1 ? problems[0] : `${heading}:\n  - ${problems.join("\n  - ")}`);
        this.problems = problems;
    }
}

/** How a decoder layer attends, as config.json's `layer_types` names it. */
export type LayerKind = "full_attention" | "sliding_attention" | "linear_attention";

/** The per-sequence state of a Gated DeltaNet (`linear_attention`) layer, from config.json. */
export interface LinearAttentionShape {
    readonly numKeyHeads: number;
    readonly numValueHeads: number;
    readonly keyHeadDim: number;
    readonly valueHeadDim: number;
    readonly convKernelSize: number;
    /** Bytes per element of the causal-conv state (the model dtype). */
    readonly convStateDtypeBytes: number;
    /** Bytes per element of the recurrent state (`mamba_ssm_dtype`, float32 on Qwen3.5). */
    readonly recurrentStateDtypeBytes: number;
}

/** The fields of a model's config.json the planner reads, normalised. */
export interface ModelConfig {
    readonly numHiddenLayers: number;
    readonly numAttentionHeads: number;
    readonly numKeyValueHeads: number;
    readonly headDim: number;
    /** `max_position_embeddings`: the default `max-model-len`. */
    readonly maxPositionEmbeddings?: number;
    /** `torch_dtype` / `dtype` of the checkpoint, e.g. "bfloat16". */
    readonly dtype?: string;
    /** `quantization_config.quant_method`, e.g. "fp8", "mxfp4". */
    readonly quantMethod?: string;
    /** One entry per hidden layer. */
    readonly layerKinds: readonly LayerKind[];
    /** Tokens a `sliding_attention` layer keeps. */
    readonly slidingWindow?: number;
    /** Present when some layers are `linear_attention`. */
    readonly linearAttention?: LinearAttentionShape;
}

type Json = Record<string, unknown>;

/** A config.json the planner cannot read: the model's, named by vllm-fleet:model.path. */
function configError(source: string, problem: string): FitError {
    return new FitError([`${source}${problem}; expected a Hugging Face model's config.json: check vllm-fleet:model.path`]);
}

function isObject(value: unknown): value is Json {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}

function positiveInteger(source: string, json: Json, key: string): number {
    const value = json[key];
    if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
        throw configError(source, `: ${key} is ${JSON.stringify(value)}, expected a positive integer`);
    }
    return value;
}

function optionalPositiveInteger(source: string, json: Json, key: string): number | undefined {
    return json[key] === undefined || json[key] === null ? undefined : positiveInteger(source, json, key);
}

function dtypeBytes(dtype: string): number | undefined {
    const bytes: Record<string, number> = { float32: 4, float: 4, bfloat16: 2, float16: 2, half: 2 };
    return bytes[dtype];
}

function layerKindsOf(source: string, text: Json, layers: number): LayerKind[] {
    const types = text.layer_types;
    if (Array.isArray(types)) {
        if (types.length !== layers) {
            throw configError(source, `: layer_types has ${types.length} entries for ${layers} hidden layers`);
        }
        // Kinds vLLM does not bound (anything but sliding/linear) are counted as full attention.
        return types.map((kind) => (kind === "sliding_attention" || kind === "linear_attention" ? kind : "full_attention"));
    }
    const interval = optionalPositiveInteger(source, text, "full_attention_interval");
    if (interval !== undefined) {
        // Qwen3-Next's rule when layer_types is absent: every interval-th layer is full attention.
        return Array.from({ length: layers }, (_, index) => ((index + 1) % interval === 0 ? "full_attention" : "linear_attention"));
    }
    return Array.from({ length: layers }, () => "full_attention");
}

/**
 * Reads a model's config.json. Multimodal configs (Qwen3.5, Qwen3-VL) keep the language model in
 * `text_config`; its fields win over the top level. Throws {@link FitError} naming a missing field.
 */
export function parseModelConfig(configJsonText: string, source = "config.json"): ModelConfig {
    let root: unknown;
    try {
        root = JSON.parse(configJsonText);
    } catch (error) {
        throw configError(source, ` is not JSON: ${(error as Error).message}`);
    }
    if (!isObject(root)) {
        throw configError(source, " is not a JSON object");
    }
    const text: Json = isObject(root.text_config) ? { ...root, ...root.text_config } : root;
    const numHiddenLayers = positiveInteger(source, text, "num_hidden_layers");
    const numAttentionHeads = positiveInteger(source, text, "num_attention_heads");
    const numKeyValueHeads = optionalPositiveInteger(source, text, "num_key_value_heads") ?? numAttentionHeads;
    let headDim = optionalPositiveInteger(source, text, "head_dim");
    if (headDim === undefined) {
        const hiddenSize = positiveInteger(source, text, "hidden_size");
        if (hiddenSize % numAttentionHeads !== 0) {
            throw configError(source, `: no head_dim, and hidden_size ${hiddenSize} is not a multiple of num_attention_heads ${numAttentionHeads}`);
        }
        headDim = hiddenSize / numAttentionHeads;
    }
    const dtype = [text.torch_dtype, text.dtype, root.torch_dtype, root.dtype].find((value): value is string => typeof value === "string");
    const quantization = isObject(root.quantization_config) ? root.quantization_config : isObject(text.quantization_config) ? text.quantization_config : undefined;
    const layerKinds = layerKindsOf(source, text, numHiddenLayers);
    const modelDtypeBytes = dtypeBytes(dtype ?? "bfloat16") ?? 2;
    const linearAttention: LinearAttentionShape | undefined = layerKinds.includes("linear_attention")
        ? {
              numKeyHeads: positiveInteger(source, text, "linear_num_key_heads"),
              numValueHeads: positiveInteger(source, text, "linear_num_value_heads"),
              keyHeadDim: positiveInteger(source, text, "linear_key_head_dim"),
              valueHeadDim: positiveInteger(source, text, "linear_value_head_dim"),
              convKernelSize: positiveInteger(source, text, "linear_conv_kernel_dim"),
              convStateDtypeBytes: modelDtypeBytes,
              recurrentStateDtypeBytes:
                  (typeof text.mamba_ssm_dtype === "string" ? dtypeBytes(text.mamba_ssm_dtype) : undefined) ?? modelDtypeBytes,
          }
        : undefined;
    return {
        numHiddenLayers,
        numAttentionHeads,
        numKeyValueHeads,
        headDim,
        maxPositionEmbeddings: optionalPositiveInteger(source, text, "max_position_embeddings"),
        dtype,
        quantMethod: typeof quantization?.quant_method === "string" ? quantization.quant_method : undefined,
        layerKinds,
        slidingWindow: layerKinds.includes("sliding_attention") ? positiveInteger(source, text, "sliding_window") : undefined,
        linearAttention,
    };
}

/** Total bytes of the `*.safetensors` files of a model directory: the weights to be loaded. */
export function safetensorsWeightBytes(modelDir: ModelDirFacts): number {
    return modelDir.files.filter((file) => file.name.endsWith(".safetensors")).reduce((sum, file) => sum + file.bytes, 0);
}

/**
 * Bytes per element of the KV cache for vLLM's `--kv-cache-dtype`. "auto" follows the model's
 * compute dtype, which vLLM runs in 16 bits (bf16/fp16) even for FP8 or MXFP4 weight checkpoints.
 */
export function kvCacheDtypeBytes(kvCacheDtype: string): number {
    if (kvCacheDtype === "auto" || dtypeBytes(kvCacheDtype) === 2) {
        return 2;
    }
    if (kvCacheDtype.startsWith("fp8")) {
        return 1;
    }
    if (dtypeBytes(kvCacheDtype) === 4) {
        return 4;
    }
    throw new FitError([
        `unknown KV cache dtype ${JSON.stringify(kvCacheDtype)} (expected auto, bfloat16, float16, fp8, fp8_e4m3 or fp8_e5m2): change --kv-cache-dtype in vllm-fleet:vllm.extraArgs`,
    ]);
}

/** The `--kv-cache-dtype` value in extra vLLM arguments (`--kv-cache-dtype fp8` or `=fp8`), else "auto". */
export function kvCacheDtypeFromArgs(args: readonly string[]): string {
    for (let index = 0; index < args.length; index++) {
        const [flag, inline] = args[index].split(/=(.*)/s);
        if (flag === "--kv-cache-dtype") {
            return inline ?? args[index + 1] ?? "auto";
        }
    }
    return "auto";
}


/**
 * Layers per pipeline stage, as vLLM's `get_pp_indices` splits them: evenly, with the remainder
 * going one each to the stages before the last (the last one also holds the final norm and head).
 */
export function pipelineStageLayerCounts(numHiddenLayers: number, pipelineParallel: number): number[] {
    const counts = Array.from({ length: pipelineParallel }, () => Math.floor(numHiddenLayers / pipelineParallel));
    for (let extra = 0; extra < numHiddenLayers % pipelineParallel; extra++) {
        counts[pipelineParallel - 2 - extra] += 1;
    }
    return counts;
}

/**
 * Refuses a TP/PP split vLLM would refuse: TP must divide the attention heads, TP and the KV heads
 * must divide one another (vLLM replicates KV heads when TP is larger), linear-attention heads must
 * split evenly too, and PP cannot exceed the hidden layers.
 */
export function checkParallelism(model: ModelConfig, tensorParallel: number, pipelineParallel: number): void {
    const problems: string[] = [];
    for (const [label, value, key] of [
        ["tensor parallelism", tensorParallel, "vllm-fleet:parallelism.tensor"],
        ["pipeline parallelism", pipelineParallel, "vllm-fleet:parallelism.pipeline"],
    ] as const) {
        if (!Number.isInteger(value) || value < 1) {
            problems.push(`${label} is ${value}, expected a positive integer: set ${key}`);
        }
    }
    if (problems.length > 0) {
        throw new FitError(problems);
    }
    const tensorProblems = tensorParallelProblems(model, tensorParallel);
    if (tensorProblems.length > 0) {
        // One remedy for all of them, after the last.
        const allowed = allowedTensorParallel(model);
        tensorProblems[tensorProblems.length - 1] +=
            `; expected a TP the model's heads allow: set vllm-fleet:parallelism.tensor to ${allowed.length === 1 ? allowed[0] : `one of ${allowed.join(", ")}`}`;
        problems.push(...tensorProblems);
    }
    if (pipelineParallel > model.numHiddenLayers) {
        problems.push(
            `PP=${pipelineParallel} exceeds the model's ${model.numHiddenLayers} hidden layers; expected at most ${model.numHiddenLayers}: set vllm-fleet:parallelism.pipeline to ${model.numHiddenLayers} or less`,
        );
    }
    if (problems.length > 0) {
        throw new FitError(problems);
    }
}

/** Why vLLM would refuse to split the model's heads over `tensorParallel` ranks (none: it would not). */
function tensorParallelProblems(model: ModelConfig, tensorParallel: number): string[] {
    const problems: string[] = [];
    if (model.numAttentionHeads % tensorParallel !== 0) {
        problems.push(`TP=${tensorParallel} does not divide the model's ${model.numAttentionHeads} attention heads`);
    }
    const kv = model.numKeyValueHeads;
    if (kv % tensorParallel !== 0 && tensorParallel % kv !== 0) {
        problems.push(
            `TP=${tensorParallel} and the model's ${kv} KV heads do not divide one another (vLLM splits KV heads when TP ≤ ${kv} and replicates them when TP is a multiple of ${kv})`,
        );
    }
    const linear = model.linearAttention;
    if (linear && (linear.numKeyHeads % tensorParallel !== 0 || linear.numValueHeads % tensorParallel !== 0)) {
        problems.push(
            `TP=${tensorParallel} does not divide the model's ${linear.numKeyHeads} key / ${linear.numValueHeads} value linear-attention heads`,
        );
    }
    return problems;
}

/** The TP sizes vLLM accepts for the model's heads, from 1 to its attention heads. */
export function allowedTensorParallel(model: ModelConfig): number[] {
    return Array.from({ length: model.numAttentionHeads }, (_, index) => index + 1).filter((size) => tensorParallelProblems(model, size).length === 0);
}

/** KV heads one rank holds: its share of them, or one replica when TP exceeds them. */
export function kvHeadsPerRank(model: ModelConfig, tensorParallel: number): number {
    return Math.max(1, model.numKeyValueHeads / tensorParallel);
}

/** What one sequence costs a rank: bytes per token that grow with it, and bytes it holds regardless. */
export interface SequenceCost {
    /** KV bytes per token on the rank (`full_attention` layers of its stage). */
    readonly kvBytesPerToken: number;
    /** Bytes per sequence that do not grow past `max-model-len`: sliding windows and linear-attention state. */
    readonly fixedBytesPerSequence: number;
}

/** The per-rank cost of one sequence for the layers in `layerKinds` (one pipeline stage). */
export function sequenceCost(
    model: ModelConfig,
    layerKinds: readonly LayerKind[],
    tensorParallel: number,
    kvDtypeBytes: number,
    maxModelLen: number,
): SequenceCost {
    const perLayerPerToken = 2 * kvHeadsPerRank(model, tensorParallel) * model.headDim * kvDtypeBytes;
    const count = (kind: LayerKind) => layerKinds.filter((layer) => layer === kind).length;
    const slidingBytes = count("sliding_attention") * perLayerPerToken * Math.min(model.slidingWindow ?? maxModelLen, maxModelLen);
    const linear = model.linearAttention;
    const linearBytes = linear
        ? count("linear_attention") *
          // Causal-conv state over q, k and v for kernel−1 steps, plus the recurrent state per value head;
          // both sharded by TP (vLLM's MambaStateShapeCalculator.gated_delta_net_state_shape).
          (((2 * linear.numKeyHeads * linear.keyHeadDim + linear.numValueHeads * linear.valueHeadDim) / tensorParallel) *
              (linear.convKernelSize - 1) *
              linear.convStateDtypeBytes +
              (linear.numValueHeads / tensorParallel) * linear.keyHeadDim * linear.valueHeadDim * linear.recurrentStateDtypeBytes)
        : 0;
    return { kvBytesPerToken: count("full_attention") * perLayerPerToken, fixedBytesPerSequence: slidingBytes + linearBytes };
}

