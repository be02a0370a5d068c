/**
 * The fit planner (issue 5), pure: will this model, split TP×PP across these nodes, load and leave
 * room for at least one `max-model-len` sequence of KV cache? It refuses with the numbers (need X
 * GiB, have Y GiB on node Z) and the config keys that would change them (the ranks that would fit,
 * the largest max-model-len that fits) before anything is started, and otherwise returns a plan that
 * {@link describeFitPlan} turns into the short table printed during `pulumi preview`.
 *
 * Inputs are what a caller already holds: the text of the model's config.json, the bytes of its
 * `*.safetensors` files (from {@link ModelDirFacts}), each node's memory (from {@link NodeFacts}),
 * TP, PP, `gpu-memory-utilization`, `max-model-len` and the KV cache dtype. No I/O here.
 *
 * What it assumes, so the numbers can be checked against vLLM's own log:
 * - Weights per rank = total weight bytes / (TP×PP). Embeddings, the LM head, norms, a vision tower
 *   or replicated KV projections make the real split slightly uneven; the estimate is an average.
 * - Each rank also needs {@link RUNTIME_OVERHEAD_BYTES_PER_RANK} for activations at the profiled
 *   batch, CUDA graphs and NCCL buffers (vLLM measures this at start-up; we can only budget it).
 * - Usable memory of a rank = `gpu-memory-utilization` × the node's memory as
 *   {@link usableMemoryBytes} sees it (GB10 unified memory: MemTotal less an OS reserve).
 * - KV cache grows only in `full_attention` layers: 2 (K and V) × KV heads on the rank × head_dim ×
 *   dtype bytes per token. `sliding_attention` layers hold at most `sliding_window` tokens per
 *   sequence; `linear_attention` layers (Qwen3-Next / Qwen3.5 Gated DeltaNet) hold a fixed-size
 *   conv + recurrent state per sequence that does not grow with its length. Both are counted per
 *   sequence, not per token.
 * - vLLM shards KV heads across TP when TP ≤ KV heads and replicates them (one per rank) when
 *   TP > KV heads; either way one must divide the other (QKVParallelLinear), and TP must divide
 *   the attention heads. Pipeline stages get layers as vLLM's `get_pp_indices` splits them.
 */
import { NodeFacts } from "../facts";
import { gpuShortageRemedy } from "../preflight";
import { FitError, GIB, ModelConfig, RUNTIME_OVERHEAD_BYTES_PER_RANK, SequenceCost, allowedTensorParallel, checkParallelism, kvCacheDtypeBytes, pipelineStageLayerCounts, sequenceCost } from "./model";

/** A node as the planner sees it: its memory before `gpu-memory-utilization`, per GPU. */
export interface FitNode {
    readonly name: string;
    /** Memory of one GPU: reported GPU memory, or on GB10 MemTotal less the OS reserve. */
    readonly memoryBytes: number;
    /** GPUs (ranks) on the node; 1 on a DGX Spark. */
    readonly gpus?: number;
}

/** A {@link FitNode} from probed facts, with the same OS reserve as {@link usableMemoryBytes}. */
export function fitNodeFromFacts(name: string, facts: NodeFacts, osReserveBytes?: number): FitNode {
    return { name, memoryBytes: usableMemoryBytes(facts, 1, osReserveBytes), gpus: Math.max(1, facts.gpus.length) };
}


/**
 * Usable memory of a node for vLLM, bytes: the GPU's own memory where the driver reports it, else
 * (GB10 unified memory reports "Not Supported") MemTotal less a reserve for the OS.
 */
export function usableMemoryBytes(facts: NodeFacts, gpuMemoryUtilization: number, osReserveBytes = 8 * 1024 ** 3): number {
    const reported = facts.gpus[0]?.memoryMiB;
    const total = reported !== undefined ? reported * 1024 ** 2 : Math.max(0, facts.memTotalBytes - osReserveBytes);
    return Math.floor(total * gpuMemoryUtilization);
}

/** What {@link planFit} needs. */
export interface FitRequest {
    readonly model: ModelConfig;
    /** For the printed plan, e.g. the served model name. */
    readonly modelName?: string;
    /** Sum of the `*.safetensors` files ({@link safetensorsWeightBytes}). */
    readonly weightBytes: number;
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
    /** In rank order: node 0 takes the first ranks (the Ray head), and so on. */
    readonly nodes: readonly FitNode[];
    readonly gpuMemoryUtilization: number;
    /** Defaults to the model's `max_position_embeddings`, as vLLM does. */
    readonly maxModelLen?: number;
    /** vLLM's `--kv-cache-dtype`; default "auto". */
    readonly kvCacheDtype?: string;
    /** Default {@link RUNTIME_OVERHEAD_BYTES_PER_RANK}. */
    readonly runtimeOverheadBytesPerRank?: number;
}

/** One node of a plan; the figures are per rank (per GPU) on it. */
export interface NodeFit {
    readonly name: string;
    readonly ranks: readonly number[];
    readonly pipelineStages: readonly number[];
    /** Memory before `gpu-memory-utilization`. */
    readonly memoryBytes: number;
    /** `gpu-memory-utilization` × memory. */
    readonly usableBytes: number;
    readonly weightsBytes: number;
    readonly overheadBytes: number;
    /** What is left for the KV cache (and linear-attention state). */
    readonly kvBytes: number;
    readonly kvBytesPerToken: number;
    readonly fixedBytesPerSequence: number;
    /** Tokens of KV cache the room holds (Infinity when the stage has no full-attention layer). */
    readonly kvTokens: number;
    /** Whole `max-model-len` sequences that fit at once, fixed per-sequence state included. */
    readonly maxConcurrentSequences: number;
}

/** The outcome of {@link planFit}: the model fits, and this is how. */
export interface FitPlan {
    readonly modelName?: string;
    readonly weightBytes: number;
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
    readonly gpuMemoryUtilization: number;
    readonly maxModelLen: number;
    readonly kvCacheDtypeBytes: number;
    readonly runtimeOverheadBytesPerRank: number;
    /** Nodes that hold at least one rank, in rank order. */
    readonly nodes: readonly NodeFit[];
    /** The smallest over the nodes: what the deployment can serve at once. */
    readonly maxConcurrentSequences: number;
}

/** GiB with one decimal, e.g. "59.2 GiB". */
export function formatGiB(bytes: number): string {
    return `${(bytes / GIB).toFixed(1)} GiB`;
}

/**
 * What to change when a rank's weights and overhead do not fit in a node's usable memory: more ranks
 * (the fewest that would fit), a higher gpu-memory-utilization (when a fraction ≤ 1 would do), or a
 * smaller model.
 */
function weightsRemedy(weightBytes: number, worldSize: number, neededBytes: number, usableBytes: number, overheadBytes: number, memoryBytes: number): string {
    const remedies: string[] = [];
    if (usableBytes > overheadBytes) {
        const ranks = Math.ceil(weightBytes / (usableBytes - overheadBytes));
        if (ranks > worldSize) {
            remedies.push(`split the weights over at least ${ranks} ranks (vllm-fleet:parallelism.tensor × vllm-fleet:parallelism.pipeline, with the nodes to hold them)`);
        }
    }
    const utilization = Math.ceil((neededBytes / memoryBytes) * 100) / 100;
    if (utilization <= 1) {
        remedies.push(`raise vllm-fleet:vllm.gpuMemoryUtilization to ${utilization}`);
    }
    remedies.push("serve a smaller or quantized model (vllm-fleet:model.path)");
    return `expected at most ${formatGiB(usableBytes)} per rank: ${remedies.join(", or ")}`;
}

function checkRequest(request: Omit<FitRequest, "gpuMemoryUtilization">, gpuMemoryUtilization: number | undefined, maxModelLen: number | undefined): asserts maxModelLen is number {
    const problems: string[] = [];
    if (gpuMemoryUtilization !== undefined && !(gpuMemoryUtilization > 0 && gpuMemoryUtilization <= 1)) {
        problems.push(`gpu-memory-utilization is ${gpuMemoryUtilization}, expected a fraction in (0, 1]: set vllm-fleet:vllm.gpuMemoryUtilization`);
    }
    if (!(request.weightBytes > 0)) {
        problems.push(
            `the model directory has ${request.weightBytes} bytes of *.safetensors weights; expected the model's weights there: check vllm-fleet:model.path (vLLM reads *.safetensors)`,
        );
    }
    if (maxModelLen === undefined) {
        problems.push(
            "no max-model-len: the config has no max_position_embeddings; set vllm.maxModelLen (vllm-fleet:vllm.maxModelLen) to the longest sequence to serve, prompt and answer, in tokens",
        );
    } else if (!Number.isInteger(maxModelLen) || maxModelLen < 1) {
        problems.push(`max-model-len is ${maxModelLen}, expected a positive integer: set vllm-fleet:vllm.maxModelLen`);
    }
    if (problems.length > 0) {
        throw new FitError(problems);
    }
}

/** Assigns ranks 0..TP×PP−1 to nodes in order, `gpus` per node; refuses when there are too few GPUs. */
function assignRanks(nodes: readonly FitNode[], worldSize: number, tensorParallel: number, pipelineParallel: number): number[][] {
    const slots = nodes.reduce((sum, node) => sum + (node.gpus ?? 1), 0);
    if (slots < worldSize) {
        const counts = nodes.map((node) => ({ name: node.name, gpus: node.gpus ?? 1 }));
        throw new FitError([
            `TP×PP = ${tensorParallel}×${pipelineParallel} needs ${worldSize} GPUs but the nodes have ${slots} (${counts
                .map((node) => `${node.name}: ${node.gpus}`)
                .join(", ")}); ${gpuShortageRemedy(slots, counts)}`,
        ]);
    }
    let next = 0;
    return nodes.map((node) => {
        const ranks: number[] = [];
        for (let gpu = 0; gpu < (node.gpus ?? 1) && next < worldSize; gpu++) {
            ranks.push(next++);
        }
        return ranks;
    });
}

/** One node's part of a request: its ranks, and the least memory one rank there needs. */
export interface NodeNeed {
    readonly name: string;
    readonly ranks: readonly number[];
    readonly pipelineStages: readonly number[];
    /** The per-sequence cost of the rank on this node whose stage costs most. */
    readonly cost: SequenceCost;
    /** One `max-model-len` sequence of that cost, fixed state included. */
    readonly sequenceBytes: number;
    /** Weights per rank + runtime overhead + {@link sequenceBytes}: the least a rank here can start with. */
    readonly needBytes: number;
}

/** How a request places its ranks, and what each rank costs; see {@link planRanks}. */
export interface RankPlan {
    readonly maxModelLen: number;
    readonly worldSize: number;
    readonly kvDtypeBytes: number;
    readonly overheadBytes: number;
    readonly weightsBytes: number;
    /** Per node of the request, in its order; undefined where the node holds no rank. */
    readonly nodes: readonly (NodeNeed | undefined)[];
}

/**
 * The checks of {@link planFit} (all but the utilization's when none is given) and, per node, the
 * ranks it holds and the least memory one of them needs: weights per rank + runtime overhead + one
 * `max-model-len` sequence of KV cache. Throws {@link FitError} as planFit does.
 */
export function planRanks(request: Omit<FitRequest, "gpuMemoryUtilization">, gpuMemoryUtilization?: number): RankPlan {
    const { model, tensorParallel, pipelineParallel } = request;
    const maxModelLen = request.maxModelLen ?? model.maxPositionEmbeddings;
    checkRequest(request, gpuMemoryUtilization, maxModelLen);
    checkParallelism(model, tensorParallel, pipelineParallel);
    const worldSize = tensorParallel * pipelineParallel;
    const ranksByNode = assignRanks(request.nodes, worldSize, tensorParallel, pipelineParallel);
    const kvDtypeBytes = kvCacheDtypeBytes(request.kvCacheDtype ?? "auto");
    const overheadBytes = request.runtimeOverheadBytesPerRank ?? RUNTIME_OVERHEAD_BYTES_PER_RANK;
    const weightsBytes = Math.ceil(request.weightBytes / worldSize);

    const stageCounts = pipelineStageLayerCounts(model.numHiddenLayers, pipelineParallel);
    const stageCosts = stageCounts.map((count, stage) => {
        const first = stageCounts.slice(0, stage).reduce((sum, layers) => sum + layers, 0);
        return sequenceCost(model, model.layerKinds.slice(first, first + count), tensorParallel, kvDtypeBytes, maxModelLen);
    });
    const nodes = request.nodes.map((node, index): NodeNeed | undefined => {
        const ranks = ranksByNode[index];
        if (ranks.length === 0) {
            return undefined;
        }
        const pipelineStages = [...new Set(ranks.map((rank) => Math.floor(rank / tensorParallel)))];
        // The rank on this node whose stage costs most per sequence decides for the node.
        const cost = pipelineStages
            .map((stage) => stageCosts[stage])
            .reduce((worst, candidate) =>
                candidate.kvBytesPerToken * maxModelLen + candidate.fixedBytesPerSequence > worst.kvBytesPerToken * maxModelLen + worst.fixedBytesPerSequence
                    ? candidate
                    : worst,
            );
        const sequenceBytes = cost.kvBytesPerToken * maxModelLen + cost.fixedBytesPerSequence;
        return { name: node.name, ranks, pipelineStages, cost, sequenceBytes, needBytes: weightsBytes + overheadBytes + sequenceBytes };
    });
    return { maxModelLen, worldSize, kvDtypeBytes, overheadBytes, weightsBytes, nodes };
}

/**
 * Plans TP×PP of the model over the nodes, or throws {@link FitError} with every node that lacks
 * memory for its weights, or whose KV room cannot hold one `max-model-len` sequence.
 */
export function planFit(request: FitRequest): FitPlan {
    const { tensorParallel, pipelineParallel, gpuMemoryUtilization } = request;
    const { maxModelLen, worldSize, kvDtypeBytes, overheadBytes, weightsBytes, nodes: needs } = planRanks(request, gpuMemoryUtilization);

    const problems: string[] = [];
    const nodes: NodeFit[] = [];
    request.nodes.forEach((node, index) => {
        const need = needs[index];
        if (need === undefined) {
            return;
        }
        const { ranks, pipelineStages, cost, sequenceBytes } = need;
        const usableBytes = Math.floor(node.memoryBytes * gpuMemoryUtilization);
        const neededBytes = weightsBytes + overheadBytes;
        if (neededBytes > usableBytes) {
            problems.push(
                `model needs ${formatGiB(neededBytes)} per rank (${formatGiB(weightsBytes)} of weights + ${formatGiB(overheadBytes)} runtime overhead), ` +
                    `${node.name} has ${formatGiB(usableBytes)} usable (${gpuMemoryUtilization} × ${formatGiB(node.memoryBytes)}); ` +
                    weightsRemedy(request.weightBytes, worldSize, neededBytes, usableBytes, overheadBytes, node.memoryBytes),
            );
            return;
        }
        const kvBytes = usableBytes - neededBytes;
        if (sequenceBytes > kvBytes) {
            // The longest sequence the room holds, its fixed state included.
            const fits = cost.kvBytesPerToken > 0 ? Math.max(0, Math.floor((kvBytes - cost.fixedBytesPerSequence) / cost.kvBytesPerToken)) : 0;
            const ranks = "add ranks (vllm-fleet:parallelism.tensor × vllm-fleet:parallelism.pipeline, with the nodes to hold them)";
            const fp8 = kvDtypeBytes > 1 ? ", or keep the KV cache in fp8 (--kv-cache-dtype fp8 in vllm-fleet:vllm.extraArgs)" : "";
            problems.push(
                `max-model-len ${maxModelLen} needs ${formatGiB(sequenceBytes)} of KV cache per sequence on a rank, ` +
                    `${node.name} has ${formatGiB(kvBytes)} left after ${formatGiB(neededBytes)} of weights and overhead ` +
                    `(room for ${cost.kvBytesPerToken > 0 ? Math.floor(kvBytes / cost.kvBytesPerToken) : 0} tokens); ` +
                    (fits > 0
                        ? `expected a max-model-len of at most ${fits} here: set vllm-fleet:vllm.maxModelLen to ${fits} or less, raise vllm-fleet:vllm.gpuMemoryUtilization, ${ranks}${fp8}`
                        : `expected room for one sequence's state: raise vllm-fleet:vllm.gpuMemoryUtilization, ${ranks}${fp8}`),
            );
            return;
        }
        nodes.push({
            name: node.name,
            ranks,
            pipelineStages,
            memoryBytes: node.memoryBytes,
            usableBytes,
            weightsBytes,
            overheadBytes,
            kvBytes,
            kvBytesPerToken: cost.kvBytesPerToken,
            fixedBytesPerSequence: cost.fixedBytesPerSequence,
            kvTokens: cost.kvBytesPerToken > 0 ? Math.floor(kvBytes / cost.kvBytesPerToken) : Number.POSITIVE_INFINITY,
            maxConcurrentSequences: sequenceBytes > 0 ? Math.floor(kvBytes / sequenceBytes) : Number.POSITIVE_INFINITY,
        });
    });
    if (problems.length > 0) {
        throw new FitError(problems);
    }
    return {
        modelName: request.modelName,
        weightBytes: request.weightBytes,
        tensorParallel,
        pipelineParallel,
        gpuMemoryUtilization,
        maxModelLen,
        kvCacheDtypeBytes: kvDtypeBytes,
        runtimeOverheadBytesPerRank: overheadBytes,
        nodes,
        maxConcurrentSequences: Math.min(...nodes.map((node) => node.maxConcurrentSequences)),
    };
}

/** Rows as aligned text columns (the first row is the header). */
export function textTable(rows: readonly (readonly string[])[]): string {
    const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
    return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column])).join("  ").trimEnd()).join("\n");
}

/** The plan as a short table (GiB with one decimal), for `pulumi.log.info` during preview. */
export function describeFitPlan(plan: FitPlan): string {
    const count = (value: number) => (Number.isFinite(value) ? String(value) : "unbounded");
    const header =
        `fit: ${plan.modelName ? `${plan.modelName}, ` : ""}${formatGiB(plan.weightBytes)} of weights, TP=${plan.tensorParallel} × PP=${plan.pipelineParallel}, ` +
        `gpu-memory-utilization ${plan.gpuMemoryUtilization}, max-model-len ${plan.maxModelLen}, ` +
        `KV cache ${plan.kvCacheDtypeBytes} B/element, runtime overhead ${formatGiB(plan.runtimeOverheadBytesPerRank)}/rank`;
    const rows = [
        ["node", "ranks", "usable", "weights", "KV room", "KV tokens", "max seqs"],
        ...plan.nodes.map((node) => [
            node.name,
            node.ranks.join(","),
            formatGiB(node.usableBytes),
            formatGiB(node.weightsBytes),
            formatGiB(node.kvBytes),
            count(node.kvTokens),
            count(node.maxConcurrentSequences),
        ]),
    ];
    const sequences = plan.maxConcurrentSequences === 1 ? "sequence" : "sequences";
    return `${header}\n${textTable(rows)}\nat most ${count(plan.maxConcurrentSequences)} concurrent ${sequences} of ${plan.maxModelLen} tokens`;
}

