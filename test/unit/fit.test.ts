import * as fs from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";
import {
    FitError,
    FitRequest,
    GIB,
    allowedTensorParallel,
    ModelConfig,
    RUNTIME_OVERHEAD_BYTES_PER_RANK,
    checkParallelism,
    describeFitPlan,
    fitNodeFromFacts,
    kvCacheDtypeBytes,
    kvCacheDtypeFromArgs,
    parseModelConfig,
    pipelineStageLayerCounts,
    planFit,
    safetensorsWeightBytes,
    sequenceCost,
} from "../../infra/core/fit";
import {
    SPARK_MEMTOTAL_KB,
    GPUD_SPARK_TOTAL_BYTES,
    sparkFacts,
    spark,
    sparks,
    fullAttention,
    everyFourthFull,
    QWEN35_122B_A10B_FP8,
    QWEN35_122B_A10B_FP8_WEIGHTS,
    QWEN3_30B_A3B,
    QWEN3_30B_A3B_WEIGHTS,
    LLAMA31_8B_INSTRUCT,
    LLAMA31_8B_INSTRUCT_SHARDS,
    LLAMA31_70B_INSTRUCT,
    LLAMA31_70B_INSTRUCT_WEIGHTS,
    QWEN35_27B_HEADS,
    QWEN3_235B_A22B_HEADS,
} from "./fitModels";

const modelFixture = (name: string) => fs.readFileSync(path.join(__dirname, "..", "fixtures", "models", name), "utf8");
const MIB = 1024 ** 2;

const failure = (request: FitRequest): FitError => {
    try {
        planFit(request);
    } catch (error) {
        expect(error).toBeInstanceOf(FitError);
        return error as FitError;
    }
    throw new Error("expected planFit to refuse");
};

describe("parseModelConfig, on real config.json files", () => {
    it("reads the nested text_config of a multimodal hybrid Qwen3.5 MoE (Qwen3.5-35B-A3B)", () => {
        const model = parseModelConfig(modelFixture("Qwen3.5-35B-A3B.config.json"));
        expect(model).toMatchObject({
            numHiddenLayers: 40,
            numAttentionHeads: 16,
            numKeyValueHeads: 2,
            headDim: 256,
            maxPositionEmbeddings: 262_144,
            dtype: "bfloat16",
            quantMethod: undefined,
            slidingWindow: undefined,
            linearAttention: { numKeyHeads: 16, numValueHeads: 32, keyHeadDim: 128, valueHeadDim: 128, convKernelSize: 4, convStateDtypeBytes: 2, recurrentStateDtypeBytes: 4 },
        });
        expect(model.layerKinds.filter((kind) => kind === "full_attention")).toHaveLength(10);
        expect(model.layerKinds.slice(0, 4)).toEqual(["linear_attention", "linear_attention", "linear_attention", "full_attention"]);
    });

    it("derives the same layers from full_attention_interval when layer_types is absent", () => {
        const config = JSON.parse(modelFixture("Qwen3.5-35B-A3B.config.json"));
        delete config.text_config.layer_types;
        expect(parseModelConfig(JSON.stringify(config)).layerKinds).toEqual(parseModelConfig(modelFixture("Qwen3.5-35B-A3B.config.json")).layerKinds);
    });

    it("reads a flat dense config and derives head_dim from hidden_size (Meta-Llama-3-8B)", () => {
        expect(parseModelConfig(modelFixture("Meta-Llama-3-8B.config.json"))).toEqual({
            numHiddenLayers: 32,
            numAttentionHeads: 32,
            numKeyValueHeads: 8,
            headDim: 128,
            maxPositionEmbeddings: 8192,
            dtype: "bfloat16",
            quantMethod: undefined,
            layerKinds: fullAttention(32),
            slidingWindow: undefined,
            linearAttention: undefined,
        });
    });

    it("reads quantization_config from the top level of a multimodal config", () => {
        const config = JSON.parse(modelFixture("Qwen3.5-35B-A3B.config.json"));
        config.quantization_config = { quant_method: "fp8", fmt: "e4m3", weight_block_size: [128, 128] };
        expect(parseModelConfig(JSON.stringify(config)).quantMethod).toBe("fp8");
    });

    it.each([
        ["{", /config\.json is not JSON/],
        ["[]", /config\.json is not a JSON object/],
        ['{"num_attention_heads": 32}', /config\.json: num_hidden_layers is undefined, expected a positive integer/],
        ['{"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 100}', /no head_dim, and hidden_size 100 is not a multiple of num_attention_heads 3/],
        ['{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8, "layer_types": ["full_attention"]}', /layer_types has 1 entries for 2 hidden layers/],
    ])("refuses %s", (text, message) => {
        expect(() => parseModelConfig(text)).toThrow(FitError);
        expect(() => parseModelConfig(text)).toThrow(message);
    });
});

describe("sequence cost, cross-checked with alibaba/InferSim PR #11 for Qwen3.5-122B-A10B", () => {
    it("matches InferSim: 72.00 MB of full-attention KV per 4096+2048-token request at TP=2", () => {
        const { kvBytesPerToken } = sequenceCost(QWEN35_122B_A10B_FP8, QWEN35_122B_A10B_FP8.layerKinds, 2, 2, 6144);
        // 12 full-attention layers × K,V × 1 KV head per rank × 256 × 2 B.
        expect(kvBytesPerToken).toBe(12 * 2 * 1 * 256 * 2);
        expect(((kvBytesPerToken * 6144) / MIB).toFixed(2)).toBe("72.00");
    });

    it("matches InferSim: 146.53 MB of Gated DeltaNet state per request for the whole model", () => {
        const { fixedBytesPerSequence } = sequenceCost(QWEN35_122B_A10B_FP8, QWEN35_122B_A10B_FP8.layerKinds, 1, 2, 6144);
        expect((fixedBytesPerSequence / MIB).toFixed(2)).toBe("146.53");
        // vLLM shards that state by TP.
        expect(sequenceCost(QWEN35_122B_A10B_FP8, QWEN35_122B_A10B_FP8.layerKinds, 2, 2, 6144).fixedBytesPerSequence).toBe(fixedBytesPerSequence / 2);
    });

    it("replicates KV heads once TP exceeds them: TP=4 holds as much KV per token as TP=2", () => {
        const perToken = (tp: number) => sequenceCost(QWEN35_122B_A10B_FP8, QWEN35_122B_A10B_FP8.layerKinds, tp, 2, 1).kvBytesPerToken;
        expect(perToken(4)).toBe(perToken(2));
        expect(perToken(1)).toBe(2 * perToken(2));
    });

    it("bounds sliding-window layers by the window (arithmetic only, no model)", () => {
        const model: ModelConfig = { numHiddenLayers: 2, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 8, layerKinds: ["sliding_attention", "full_attention"], slidingWindow: 16 };
        expect(sequenceCost(model, model.layerKinds, 1, 2, 1000)).toEqual({ kvBytesPerToken: 2 * 2 * 8 * 2, fixedBytesPerSequence: 16 * 2 * 2 * 8 * 2 });
        expect(sequenceCost(model, model.layerKinds, 1, 2, 10).fixedBytesPerSequence).toBe(10 * 2 * 2 * 8 * 2);
    });
});

describe("planFit: models that fit, table-driven", () => {
    const base = { gpuMemoryUtilization: 0.9 };
    // Expected per-node figures: weights per rank, KV tokens, max concurrent sequences at max-model-len.
    it.each<[string, FitRequest, { nodes: string[]; weightsGiB: string; kvTokens: number; maxSequences: number; maxModelLen: number }]>([
        [
            "Qwen3.5-122B-A10B-FP8 on two Sparks, TP=2 at 0.9",
            { ...base, model: QWEN35_122B_A10B_FP8, weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS, tensorParallel: 2, pipelineParallel: 1, nodes: sparks(2) },
            { nodes: ["spark1", "spark2"], weightsGiB: "59.2 GiB", kvTokens: 3_277_766, maxSequences: 12, maxModelLen: 262_144 },
        ],
        [
            "Qwen3.5-122B-A10B-FP8 on two Sparks with gpud's larger memory total",
            {
                ...base,
                model: QWEN35_122B_A10B_FP8,
                weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS,
                tensorParallel: 2,
                pipelineParallel: 1,
                nodes: sparks(2, GPUD_SPARK_TOTAL_BYTES),
            },
            { nodes: ["spark1", "spark2"], weightsGiB: "59.2 GiB", kvTokens: 3_346_582, maxSequences: 12, maxModelLen: 262_144 },
        ],
        [
            "Qwen3.5-122B-A10B-FP8 on two Sparks, PP=2 (6 full-attention layers per stage)",
            { ...base, model: QWEN35_122B_A10B_FP8, weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS, tensorParallel: 1, pipelineParallel: 2, nodes: sparks(2) },
            { nodes: ["spark1", "spark2"], weightsGiB: "59.2 GiB", kvTokens: 3_277_766, maxSequences: 12, maxModelLen: 262_144 },
        ],
        [
            "Qwen3.5-122B-A10B-FP8 on four Sparks, TP=4 (2 KV heads replicated)",
            { ...base, model: QWEN35_122B_A10B_FP8, weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS, tensorParallel: 4, pipelineParallel: 1, nodes: sparks(4) },
            { nodes: ["spark1", "spark2", "spark3", "spark4"], weightsGiB: "29.6 GiB", kvTokens: 5_864_686, maxSequences: 22, maxModelLen: 262_144 },
        ],
        [
            "Qwen3-30B-A3B (BF16) on one Spark",
            { ...base, model: QWEN3_30B_A3B, weightBytes: QWEN3_30B_A3B_WEIGHTS, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1) },
            { nodes: ["spark1"], weightsGiB: "56.9 GiB", kvTokens: 435_273, maxSequences: 10, maxModelLen: 40_960 },
        ],
        [
            "Qwen3-30B-A3B (BF16), TP=2 on one node with two 80 GB GPUs",
            {
                ...base,
                model: QWEN3_30B_A3B,
                weightBytes: QWEN3_30B_A3B_WEIGHTS,
                tensorParallel: 2,
                pipelineParallel: 1,
                // 81559 MiB: what nvidia-smi reports for an H100 80GB (as in facts.test.ts).
                nodes: [fitNodeFromFacts("h100x2", { ...sparkFacts(), gpus: [0, 1].map((index) => ({ index, name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 })) })],
            },
            { nodes: ["h100x2"], weightsGiB: "28.4 GiB", kvTokens: 879_219, maxSequences: 21, maxModelLen: 40_960 },
        ],
        [
            "Llama-3.1-8B-Instruct (BF16) on one Spark",
            { ...base, model: LLAMA31_8B_INSTRUCT, weightBytes: LLAMA31_8B_INSTRUCT_SHARDS.reduce((a, b) => a + b), tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1) },
            { nodes: ["spark1"], weightsGiB: "15.0 GiB", kvTokens: 669_805, maxSequences: 5, maxModelLen: 131_072 },
        ],
        [
            "Llama-3.1-70B-Instruct (BF16) on two Sparks, TP=2",
            { ...base, model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 2, pipelineParallel: 1, nodes: sparks(2) },
            { nodes: ["spark1", "spark2"], weightsGiB: "65.7 GiB", kvTokens: 203_244, maxSequences: 1, maxModelLen: 131_072 },
        ],
        [
            "Llama-3.1-70B-Instruct (BF16) on two Sparks, PP=2 (40 layers per stage)",
            { ...base, model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 1, pipelineParallel: 2, nodes: sparks(2) },
            { nodes: ["spark1", "spark2"], weightsGiB: "65.7 GiB", kvTokens: 203_244, maxSequences: 1, maxModelLen: 131_072 },
        ],
        [
            "Llama-3.1-70B-Instruct at 0.8 fits 128K only with --kv-cache-dtype fp8",
            {
                ...base,
                model: LLAMA31_70B_INSTRUCT,
                weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS,
                tensorParallel: 2,
                pipelineParallel: 1,
                nodes: sparks(2),
                gpuMemoryUtilization: 0.8,
                kvCacheDtype: "fp8",
            },
            { nodes: ["spark1", "spark2"], weightsGiB: "65.7 GiB", kvTokens: 261_260, maxSequences: 1, maxModelLen: 131_072 },
        ],
        [
            "Llama-3.1-70B-Instruct at 0.8 with max-model-len 32768",
            {
                ...base,
                model: LLAMA31_70B_INSTRUCT,
                weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS,
                tensorParallel: 2,
                pipelineParallel: 1,
                nodes: sparks(2),
                gpuMemoryUtilization: 0.8,
                maxModelLen: 32_768,
            },
            { nodes: ["spark1", "spark2"], weightsGiB: "65.7 GiB", kvTokens: 130_630, maxSequences: 3, maxModelLen: 32_768 },
        ],
    ])("%s", (_, request, expected) => {
        const plan = planFit(request);
        expect(plan.maxModelLen).toBe(expected.maxModelLen);
        expect(plan.nodes.map((node) => node.name)).toEqual(expected.nodes);
        for (const node of plan.nodes) {
            expect((node.weightsBytes / GIB).toFixed(1) + " GiB").toBe(expected.weightsGiB);
            expect(node.kvTokens).toBe(expected.kvTokens);
            expect(node.maxConcurrentSequences).toBe(expected.maxSequences);
            expect(node.weightsBytes + node.overheadBytes + node.kvBytes).toBe(node.usableBytes);
            expect(node.maxConcurrentSequences).toBeLessThanOrEqual(Math.floor(node.kvTokens / plan.maxModelLen));
        }
        expect(plan.maxConcurrentSequences).toBe(expected.maxSequences);
    });

    it("budgets usable memory as usableMemoryBytes does on GB10: 0.9 × (MemTotal − 8 GiB)", () => {
        const [node] = planFit({ ...base, model: QWEN3_30B_A3B, weightBytes: QWEN3_30B_A3B_WEIGHTS, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1) }).nodes;
        expect(node.memoryBytes).toBe(SPARK_MEMTOTAL_KB * 1024 - 8 * GIB);
        expect(node.usableBytes).toBe(Math.floor((SPARK_MEMTOTAL_KB * 1024 - 8 * GIB) * 0.9));
        expect(node.overheadBytes).toBe(RUNTIME_OVERHEAD_BYTES_PER_RANK);
    });
});

describe("planFit: refusals carry the numbers and name the node", () => {
    it.each<[string, FitRequest, RegExp[]]>([
        [
            "Qwen3.5-122B-A10B-FP8 on one Spark",
            { model: QWEN35_122B_A10B_FP8, weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 0.9 },
            [
                /^model needs 121\.4 GiB per rank \(118\.4 GiB of weights \+ 3\.0 GiB runtime overhead\), spark1 has 99\.7 GiB usable \(0\.9 × 110\.8 GiB\); expected at most 99\.7 GiB per rank: split the weights over at least 2 ranks \(vllm-fleet:parallelism\.tensor × vllm-fleet:parallelism\.pipeline, with the nodes to hold them\), or serve a smaller or quantized model \(vllm-fleet:model\.path\)$/,
            ],
        ],
        [
            "Llama-3.1-70B-Instruct on one Spark",
            { model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 0.9 },
            [/model needs 134\.4 GiB per rank \(131\.4 GiB of weights \+ 3\.0 GiB runtime overhead\), spark1 has 99\.7 GiB usable/],
        ],
        [
            "Llama-3.1-70B-Instruct at 0.8 with its full 131072 context (no KV room for one sequence)",
            { model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 2, pipelineParallel: 1, nodes: sparks(2), gpuMemoryUtilization: 0.8 },
            [
                /max-model-len 131072 needs 20\.0 GiB of KV cache per sequence on a rank, spark1 has 19\.9 GiB left after 68\.7 GiB of weights and overhead \(room for 130630 tokens\)/,
                /spark2 has 19\.9 GiB left/,
            ],
        ],
        [
            "Qwen3.5-122B-A10B-FP8 with a max-model-len beyond its KV room",
            {
                model: QWEN35_122B_A10B_FP8,
                weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS,
                tensorParallel: 2,
                pipelineParallel: 1,
                nodes: sparks(2),
                gpuMemoryUtilization: 0.9,
                maxModelLen: 4_000_000,
            },
            [
                /max-model-len 4000000 needs 45\.8 GiB of KV cache per sequence on a rank, spark1 has 37\.5 GiB left .*\(room for 3277766 tokens\)/,
                /spark2 has 37\.5 GiB left/,
            ],
        ],
        [
            "TP=2 with a single Spark",
            { model: QWEN35_122B_A10B_FP8, weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS, tensorParallel: 2, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 0.9 },
            [/TP×PP = 2×1 needs 2 GPUs but the nodes have 1 \(spark1: 1\)/],
        ],
        [
            "TP=3 for Llama-3.1-70B (64 heads / 8 KV heads)",
            { model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 3, pipelineParallel: 1, nodes: sparks(3), gpuMemoryUtilization: 0.9 },
            [/TP=3 does not divide the model's 64 attention heads/, /TP=3 and the model's 8 KV heads do not divide one another/],
        ],
        [
            "TP=3 for Qwen3-235B-A22B (64 heads / 4 KV heads)",
            { model: QWEN3_235B_A22B_HEADS, weightBytes: 1, tensorParallel: 3, pipelineParallel: 1, nodes: sparks(3), gpuMemoryUtilization: 0.9, maxModelLen: 4096 },
            [/TP=3 does not divide the model's 64 attention heads/, /TP=3 and the model's 4 KV heads do not divide one another/],
        ],
        [
            "TP=6 for Qwen3.5-27B: 24 heads split, 4 KV heads do not",
            { model: QWEN35_27B_HEADS, weightBytes: 1, tensorParallel: 6, pipelineParallel: 1, nodes: sparks(6), gpuMemoryUtilization: 0.9, maxModelLen: 4096 },
            [
                /^TP=6 and the model's 4 KV heads do not divide one another \(vLLM splits KV heads when TP ≤ 4 and replicates them when TP is a multiple of 4\); expected a TP the model's heads allow: set vllm-fleet:parallelism\.tensor to one of 1, 2, 4, 8, 12, 24$/,
            ],
        ],
        [
            "TP=3 splitting linear-attention heads unevenly (Qwen3.5-122B with its attention heads altered to isolate the check)",
            { model: { ...QWEN35_122B_A10B_FP8, numAttentionHeads: 48, numKeyValueHeads: 3 }, weightBytes: 1, tensorParallel: 3, pipelineParallel: 1, nodes: sparks(3), gpuMemoryUtilization: 0.9 },
            [/^TP=3 does not divide the model's 16 key \/ 64 value linear-attention heads; expected a TP the model's heads allow: set vllm-fleet:parallelism\.tensor to 1$/],
        ],
        [
            "PP beyond the hidden layers",
            { model: LLAMA31_8B_INSTRUCT, weightBytes: 1, tensorParallel: 1, pipelineParallel: 33, nodes: sparks(33), gpuMemoryUtilization: 0.9 },
            [/^PP=33 exceeds the model's 32 hidden layers; expected at most 32: set vllm-fleet:parallelism\.pipeline to 32 or less$/],
        ],
        [
            "an unknown KV cache dtype",
            { model: LLAMA31_8B_INSTRUCT, weightBytes: 1, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 0.9, kvCacheDtype: "int3" },
            [/unknown KV cache dtype "int3"/],
        ],
        [
            "no weights and a utilization out of range",
            { model: LLAMA31_8B_INSTRUCT, weightBytes: 0, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 1.5 },
            [/gpu-memory-utilization is 1\.5, expected a fraction in \(0, 1\]/, /the model directory has 0 bytes of \*\.safetensors weights/],
        ],
        [
            "no max-model-len and no max_position_embeddings",
            { model: QWEN35_27B_HEADS, weightBytes: 1, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 0.9 },
            [/no max-model-len: the config has no max_position_embeddings; set vllm\.maxModelLen/],
        ],
    ])("%s", (_, request, messages) => {
        const error = failure(request);
        for (const message of messages) {
            expect(error.problems.some((problem) => message.test(problem))).toBe(true);
        }
        expect(error.problems).toHaveLength(messages.length);
    });
});

describe("every refusal of the fit planner names the config key to change and what was expected", () => {
    const refusal = (run: () => unknown): string[] => {
        try {
            run();
        } catch (error) {
            expect(error).toBeInstanceOf(FitError);
            return [...(error as FitError).problems];
        }
        throw new Error("expected a refusal");
    };
    const llama8b = { model: LLAMA31_8B_INSTRUCT, weightBytes: 1, tensorParallel: 1, pipelineParallel: 1, nodes: sparks(1), gpuMemoryUtilization: 0.9 };

    it.each<[string, () => unknown, RegExp]>([
        ["a config.json the planner cannot read", () => parseModelConfig('{"num_attention_heads": 32}', "/models/q/config.json on spark1"), /^\/models\/q\/config\.json on spark1: num_hidden_layers is undefined, expected a positive integer; expected a Hugging Face model's config\.json: check vllm-fleet:model\.path$/],
        ["a config.json that is not JSON", () => parseModelConfig("{"), /is not JSON: .*; expected a Hugging Face model's config\.json: check vllm-fleet:model\.path$/],
        ["an unknown KV cache dtype", () => planFit({ ...llama8b, kvCacheDtype: "int3" }), /: change --kv-cache-dtype in vllm-fleet:vllm\.extraArgs$/],
        ["a TP that is not a positive integer", () => checkParallelism(LLAMA31_8B_INSTRUCT, 0, 1), /^tensor parallelism is 0, expected a positive integer: set vllm-fleet:parallelism\.tensor$/],
        ["a PP that is not a positive integer", () => checkParallelism(LLAMA31_8B_INSTRUCT, 1, 1.5), /^pipeline parallelism is 1\.5, expected a positive integer: set vllm-fleet:parallelism\.pipeline$/],
        ["a TP the heads do not allow", () => checkParallelism(LLAMA31_70B_INSTRUCT, 3, 1), /; expected a TP the model's heads allow: set vllm-fleet:parallelism\.tensor to one of 1, 2, 4, 8, 16, 32, 64$/],
        ["a PP beyond the layers", () => checkParallelism(LLAMA31_8B_INSTRUCT, 1, 40), /; expected at most 32: set vllm-fleet:parallelism\.pipeline to 32 or less$/],
        ["a gpu-memory-utilization out of range", () => planFit({ ...llama8b, gpuMemoryUtilization: 0 }), /^gpu-memory-utilization is 0, expected a fraction in \(0, 1\]: set vllm-fleet:vllm\.gpuMemoryUtilization$/],
        ["no weights", () => planFit({ ...llama8b, weightBytes: 0 }), /; expected the model's weights there: check vllm-fleet:model\.path/],
        ["no max-model-len", () => planFit({ ...llama8b, model: QWEN35_27B_HEADS }), /set vllm\.maxModelLen \(vllm-fleet:vllm\.maxModelLen\) to the longest sequence to serve/],
        ["a max-model-len that is not a positive integer", () => planFit({ ...llama8b, maxModelLen: 0 }), /^max-model-len is 0, expected a positive integer: set vllm-fleet:vllm\.maxModelLen$/],
        [
            "fewer GPUs than TP×PP",
            () => planFit({ ...llama8b, tensorParallel: 4, pipelineParallel: 1, nodes: sparks(2) }),
            /^TP×PP = 4×1 needs 4 GPUs but the nodes have 2 \(spark1: 1, spark2: 1\); expected at most 2 \(the GPUs of the nodes\): set vllm-fleet:parallelism\.tensor × vllm-fleet:parallelism\.pipeline to 2 or less, or add nodes to vllm-fleet:nodes$/,
        ],
        [
            "weights that would fit at a higher gpu-memory-utilization or over more ranks",
            () => planFit({ ...llama8b, model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 2, nodes: sparks(2), gpuMemoryUtilization: 0.6 }),
            /spark1 has 66\.5 GiB usable \(0\.6 × 110\.8 GiB\); expected at most 66\.5 GiB per rank: split the weights over at least 3 ranks \(vllm-fleet:parallelism\.tensor × vllm-fleet:parallelism\.pipeline, with the nodes to hold them\), or raise vllm-fleet:vllm\.gpuMemoryUtilization to 0\.63, or serve a smaller or quantized model \(vllm-fleet:model\.path\)$/,
        ],
        [
            "a max-model-len that does not fit",
            () => planFit({ ...llama8b, model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 2, nodes: sparks(2), gpuMemoryUtilization: 0.8 }),
            /\(room for 130630 tokens\); expected a max-model-len of at most 130630 here: set vllm-fleet:vllm\.maxModelLen to 130630 or less, raise vllm-fleet:vllm\.gpuMemoryUtilization, add ranks \(vllm-fleet:parallelism\.tensor × vllm-fleet:parallelism\.pipeline, with the nodes to hold them\), or keep the KV cache in fp8 \(--kv-cache-dtype fp8 in vllm-fleet:vllm\.extraArgs\)$/,
        ],
    ])("%s", (_what, run, expected) => {
        const problems = refusal(run);
        expect(problems.some((problem) => expected.test(problem)), problems.join("\n")).toBe(true);
    });

    it("offers no fp8 KV cache when the cache is fp8 already, and the TPs that work", () => {
        const problems = refusal(() =>
            planFit({ ...llama8b, model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 2, nodes: sparks(2), gpuMemoryUtilization: 0.8, maxModelLen: 300_000, kvCacheDtype: "fp8" }),
        );
        expect(problems[0]).toMatch(/with the nodes to hold them\)$/);
        expect(allowedTensorParallel(QWEN35_27B_HEADS)).toEqual([1, 2, 4, 8, 12, 24]);
    });
});

describe("pieces", () => {
    it.each([
        [48, 1, [48]],
        [48, 2, [24, 24]],
        [80, 3, [27, 27, 26]],
        [94, 4, [23, 24, 24, 23]],
        [5, 5, [1, 1, 1, 1, 1]],
    ])("splits %i layers over PP=%i as vLLM's get_pp_indices: %j", (layers, pp, counts) => {
        expect(pipelineStageLayerCounts(layers, pp)).toEqual(counts);
    });

    it("accepts a TP that is a multiple of the KV heads (vLLM replicates them)", () => {
        expect(() => checkParallelism(QWEN35_122B_A10B_FP8, 4, 1)).not.toThrow();
        expect(() => checkParallelism(QWEN35_122B_A10B_FP8, 8, 1)).not.toThrow();
    });

    it.each([
        ["auto", 2],
        ["bfloat16", 2],
        ["float16", 2],
        ["fp8", 1],
        ["fp8_e4m3", 1],
        ["fp8_e5m2", 1],
        ["float32", 4],
    ])("sizes KV cache dtype %s at %i B", (dtype, bytes) => {
        expect(kvCacheDtypeBytes(dtype)).toBe(bytes);
    });

    it.each<[string[], string]>([
        [[], "auto"],
        [["--kv-cache-dtype", "fp8"], "fp8"],
        [["--enable-prefix-caching", "--kv-cache-dtype=fp8_e4m3"], "fp8_e4m3"],
    ])("reads the KV cache dtype from extra args %j", (args, dtype) => {
        expect(kvCacheDtypeFromArgs(args)).toBe(dtype);
    });

    it("sums only the *.safetensors files of a model directory", () => {
        const files = [
            { name: "config.json", bytes: 4096 },
            ...LLAMA31_8B_INSTRUCT_SHARDS.map((bytes, index) => ({ name: `model-0000${index + 1}-of-00004.safetensors`, bytes })),
            { name: "model.safetensors.index.json", bytes: 23_950 },
        ];
        expect(safetensorsWeightBytes({ exists: true, files, totalBytes: 0 })).toBe(16_060_556_376);
    });

    it("describes the plan as a short table for pulumi preview", () => {
        const plan = planFit({
            model: QWEN35_122B_A10B_FP8,
            modelName: "Qwen3.5-122B-A10B-FP8",
            weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS,
            tensorParallel: 2,
            pipelineParallel: 1,
            nodes: sparks(2),
            gpuMemoryUtilization: 0.9,
        });
        expect(describeFitPlan(plan)).toBe(
            [
                "fit: Qwen3.5-122B-A10B-FP8, 118.4 GiB of weights, TP=2 × PP=1, gpu-memory-utilization 0.9, max-model-len 262144, KV cache 2 B/element, runtime overhead 3.0 GiB/rank",
                "node    ranks  usable    weights   KV room   KV tokens  max seqs",
                "spark1  0      99.7 GiB  59.2 GiB  37.5 GiB  3277766    12",
                "spark2  1      99.7 GiB  59.2 GiB  37.5 GiB  3277766    12",
                "at most 12 concurrent sequences of 262144 tokens",
            ].join("\n"),
        );
    });
});
