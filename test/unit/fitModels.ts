/**
 * Real figures the fit planner's tests share (fit.test.ts, budget.test.ts): a DGX Spark's memory and
 * the configs and weight sizes of models, each with its source below.
 */
import * as fs from "fs";
import * as path from "path";
import { NodeFacts, parseGpuQuery, parseMeminfo } from "../../infra/core/facts";
import { FitNode, LayerKind, ModelConfig, fitNodeFromFacts } from "../../infra/core/fit";

// ---------------------------------------------------------------------------------------------
// Sources of every number below (never invented; see also test/fixtures/models/README.md).
//
// DGX Spark memory. MemTotal 124571956 kB is the /proc/meminfo value this repository's facts tests
//   already use for a Spark (test/unit/facts.test.ts). Public reports put a Spark's pool a little
//   higher: leptonai/gpud PR #1170 (https://github.com/leptonai/gpud/pull/1170) logs a GB10 system
//   memory total of 128,501,256,192 B (119.7 GiB); Entrpi/qwen3.5-122B-A10B-on-spark docs/FINDINGS.md
//   says "128 GB / 119 GiB unified". 124571956 kB (118.8 GiB) is the conservative end; a row below
//   shows the verdict does not change with the gpud figure.
//
// Qwen/Qwen3.5-122B-A10B-FP8 (revision a099dee70ccfcd8d5dda56aaa0b60cb8ecadabc9). Its config.json
//   text was not findable in the stored sources, so no fixture file: the fields are cited instead.
//   - weights: metadata.total_size 127,152,313,312 B of
//     https://huggingface.co/Qwen/Qwen3.5-122B-A10B-FP8/blob/main/model.safetensors.index.json, as
//     read in a public model-size audit (the shard files themselves sum to 127,163,011,832 B).
//     Cross-check: a two-Spark TP=2 deployment log records "Memory: 59.1 GiB/node"; the planner's
//     127,152,313,312 / 2 is 59.2 GiB.
//   - 48 layers, "36 linear attention + 12 full attention, repeating 3:1 pattern"
//     (https://hugingapi.com/btbtyler09/Qwen3.5-122B-A10B-GPTQ-4bit, model card of a quant of it);
//     32 attention heads, hidden size 3072, 262K context
//     (https://docs.vultr.com/models/alibaba-qwen-35/qwen3.5-122b-a10b/nvidia).
//   - 2 KV heads × head_dim 256; Gated DeltaNet 16 key / 64 value heads × 128, conv kernel 4: the
//     values public model-spec tables give for this model, and confirmed by alibaba/InferSim PR #11
//     (https://github.com/alibaba/InferSim/pull/11), whose simulator prints for this model
//     "Current per-req full attn KV cache size (MB): 72.00" (TP=2, 4096 + 2048 tokens) and
//     "Current per-req states size (MB): 146.53"; the test "matches InferSim" reproduces both.
//   - recurrent state in float32: "mamba_ssm_dtype": "float32" in the Qwen3.5-35B-A3B fixture
//     (same family); it is also what makes the 146.53 MB above come out exactly.
//   - KV cache: NVIDIA Dynamo's recipe for this checkpoint says "FP8 weights, BF16 KV"
//     (https://docs.nvidia.com/dynamo/v1.4.0/recipes/qwen3-5-122b.md): kv-cache-dtype auto = 2 B.
//
// Qwen/Qwen3-30B-A3B (BF16).
//   - weights: metadata.total_size 61,064,245,248 B of
//     https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/model.safetensors.index.json (the figure a
//     public Go test asserts for its vendored copy of that file).
//   - config (https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json): 48 layers,
//     32 heads, 4 KV heads, head_dim 128, max_position_embeddings 40960, bfloat16 — as also in
//     Ascend MindSpeed-RL configs/model/qwen3_30b_a3b.yaml (num_layers 48, num_attention_heads 32,
//     num_query_groups 4, kv_channels 128, max_position_embeddings 40960).
//
// meta-llama/Llama-3.1-8B-Instruct (BF16).
//   - weights: the four shard sizes from the Git LFS pointers of a ModelScope mirror on GitHub,
//     NoahIsARider/DoNotExpectTooMuchFromTheEndOfTheWorld@3d5913f
//     Meta-Llama-3.1-8B-Instruct/model-0000{1,2,3,4}-of-00004.safetensors:
//     4,976,698,672 + 4,999,802,720 + 4,915,916,176 + 1,168,138,808 B. Shards 1 and 3 carry the
//     sha256 (2b1879f3…, fc1cdddd…) of the copies on huggingface.co (rombodawg/…-reuploaded,
//     unsloth/Meta-Llama-3.1-8B-Instruct). Their tensors are the metadata.total_size 16,060,522,496 B
//     that the Hugging Face hub docs (docs/hub/transformers.md) show for a 4-shard Llama 8B index.
//   - 32 layers, 32 heads, 8 KV heads, hidden 4096, max length 131,072: oumi
//     configs/recipes/llama3_1/README.md "Model Info" (8B), same in the Llama-3.1-8B config.json
//     NVIDIA TensorRT-LLM copies into its tests (LLAMA_3_1_8B_CONFIG).
//
// meta-llama/Llama-3.1-70B-Instruct (BF16).
//   - weights: metadata.total_size 141,107,412,992 B of its model.safetensors.index.json (quoted by
//     public copies of that index, e.g. a model-inventory test fixture for
//     /models/meta/Llama-3.1-70B-Instruct).
//   - 80 layers, 64 heads, 8 KV heads, hidden 8192, 131,072: oumi README "Model Info" (70B).
//
// Head counts only (for the divisibility refusals):
//   - Qwen3.5-27B: 64 layers, 24 heads, 4 KV heads (query groups), kv_channels 256
//     (THUDM/slime scripts/models/qwen3.5-27B.sh), layout 16 × (3 Gated DeltaNet + 1 Gated Attention)
//     (Qwen/Qwen3.5-27B README on huggingface.co).
//   - Qwen3-235B-A22B: 94 layers, 64 heads, 4 KV heads, kv_channels 128
//     (zyzshishui/slime scripts/models/qwen3-235B-A22B.sh).
// ---------------------------------------------------------------------------------------------

export const SPARK_MEMTOTAL_KB = 124_571_956;
export const GPUD_SPARK_TOTAL_BYTES = 128_501_256_192;

/** A Spark as the probe reads it: its GPU from a real GB10's nvidia-smi query (memory "[N/A]"), and MemTotal. */
export function sparkFacts(memTotalBytes = parseMeminfo(`MemTotal:       ${SPARK_MEMTOTAL_KB} kB`).memTotalBytes): NodeFacts {
    return {
        hostname: "spark",
        gpus: parseGpuQuery(fs.readFileSync(path.join(__dirname, "..", "fixtures", "nvidia-smi-query-gb10.csv"), "utf8")),
        memTotalBytes,
        memAvailableBytes: memTotalBytes,
        interfaces: [],
        hcas: [],
        rdmaDevices: [],
        model: { exists: true, files: [], totalBytes: 0 },
    };
}

export const spark = (name: string, memTotalBytes?: number): FitNode => fitNodeFromFacts(name, sparkFacts(memTotalBytes));
export const sparks = (count: number, memTotalBytes?: number) => Array.from({ length: count }, (_, index) => spark(`spark${index + 1}`, memTotalBytes));

export const fullAttention = (layers: number): LayerKind[] => Array.from({ length: layers }, () => "full_attention");
export const everyFourthFull = (layers: number): LayerKind[] =>
    Array.from({ length: layers }, (_, index) => ((index + 1) % 4 === 0 ? "full_attention" : "linear_attention"));

export const QWEN35_122B_A10B_FP8: ModelConfig = {
    numHiddenLayers: 48,
    numAttentionHeads: 32,
    numKeyValueHeads: 2,
    headDim: 256,
    maxPositionEmbeddings: 262_144,
    dtype: "bfloat16",
    quantMethod: "fp8",
    layerKinds: everyFourthFull(48),
    linearAttention: { numKeyHeads: 16, numValueHeads: 64, keyHeadDim: 128, valueHeadDim: 128, convKernelSize: 4, convStateDtypeBytes: 2, recurrentStateDtypeBytes: 4 },
};
export const QWEN35_122B_A10B_FP8_WEIGHTS = 127_152_313_312;

export const QWEN3_30B_A3B: ModelConfig = {
    numHiddenLayers: 48,
    numAttentionHeads: 32,
    numKeyValueHeads: 4,
    headDim: 128,
    maxPositionEmbeddings: 40_960,
    dtype: "bfloat16",
    layerKinds: fullAttention(48),
};
export const QWEN3_30B_A3B_WEIGHTS = 61_064_245_248;

export const LLAMA31_8B_INSTRUCT: ModelConfig = {
    numHiddenLayers: 32,
    numAttentionHeads: 32,
    numKeyValueHeads: 8,
    headDim: 4096 / 32,
    maxPositionEmbeddings: 131_072,
    dtype: "bfloat16",
    layerKinds: fullAttention(32),
};
export const LLAMA31_8B_INSTRUCT_SHARDS = [4_976_698_672, 4_999_802_720, 4_915_916_176, 1_168_138_808];

export const LLAMA31_70B_INSTRUCT: ModelConfig = {
    numHiddenLayers: 80,
    numAttentionHeads: 64,
    numKeyValueHeads: 8,
    headDim: 8192 / 64,
    maxPositionEmbeddings: 131_072,
    dtype: "bfloat16",
    layerKinds: fullAttention(80),
};
export const LLAMA31_70B_INSTRUCT_WEIGHTS = 141_107_412_992;

export const QWEN35_27B_HEADS: ModelConfig = {
    numHiddenLayers: 64,
    numAttentionHeads: 24,
    numKeyValueHeads: 4,
    headDim: 256,
    layerKinds: everyFourthFull(64),
};
export const QWEN3_235B_A22B_HEADS: ModelConfig = {
    numHiddenLayers: 94,
    numAttentionHeads: 64,
    numKeyValueHeads: 4,
    headDim: 128,
    layerKinds: fullAttention(94),
};
