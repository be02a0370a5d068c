import { describe, expect, it } from "vitest";
import { BudgetPlan, BudgetService, FitError, FitRequest, GIB, describeBudgets, planBudgets, planFit, sharesNodes } from "../../infra/core/fit";
import {
    LLAMA31_70B_INSTRUCT,
    LLAMA31_70B_INSTRUCT_WEIGHTS,
    LLAMA31_8B_INSTRUCT,
    LLAMA31_8B_INSTRUCT_SHARDS,
    QWEN35_122B_A10B_FP8,
    QWEN35_122B_A10B_FP8_WEIGHTS,
    QWEN3_30B_A3B,
    QWEN3_30B_A3B_WEIGHTS,
    SPARK_MEMTOTAL_KB,
    spark,
} from "./fitModels";

// The figures (sources in fitModels.ts): a Spark's memory for the planner is MemTotal less the 8 GiB
// OS reserve; each least need is weights per rank + 3 GiB runtime overhead + one max-model-len
// sequence of KV cache, worked out by hand here from the models' configs.
const SPARK_BYTES = SPARK_MEMTOTAL_KB * 1024 - 8 * GIB; // 118,971,748,352 B = 110.8 GiB
const OVERHEAD = 3 * GIB;
/** Qwen3.5-122B-A10B-FP8, TP=2, max-model-len 262,144: half the weights; 12 full-attention layers ×
 *  2 (K, V) × 1 KV head per rank × 256 × 2 B per token; 36 Gated DeltaNet layers' state per rank. */
const BIG_NEED = Math.ceil(QWEN35_122B_A10B_FP8_WEIGHTS / 2) + OVERHEAD + 12 * 2 * 1 * 256 * 2 * 262_144 + 36 * (((2 * 16 * 128 + 64 * 128) / 2) * 3 * 2 + 32 * 128 * 128 * 4);
const LLAMA8B_WEIGHTS = LLAMA31_8B_INSTRUCT_SHARDS.reduce((sum, bytes) => sum + bytes, 0);
/** Llama-3.1-8B-Instruct, TP=1: 32 layers × 2 × 8 KV heads × 128 × 2 B per token. */
const llamaNeed = (maxModelLen: number) => LLAMA8B_WEIGHTS + OVERHEAD + 32 * 2 * 8 * 128 * 2 * maxModelLen;
/** Qwen3-30B-A3B, TP=1, max-model-len 40,960: 48 layers × 2 × 4 KV heads × 128 × 2 B per token. */
const CODER_NEED = QWEN3_30B_A3B_WEIGHTS + OVERHEAD + 48 * 2 * 4 * 128 * 2 * 40_960;

const spark1 = spark("spark1");
const spark2 = spark("spark2");
const NODES = [spark1, spark2];

type Request = Omit<FitRequest, "gpuMemoryUtilization">;
const big = (): Request => ({ model: QWEN35_122B_A10B_FP8, modelName: "Qwen3.5-122B-A10B-FP8", weightBytes: QWEN35_122B_A10B_FP8_WEIGHTS, tensorParallel: 2, pipelineParallel: 1, nodes: NODES });
const llama = (maxModelLen: number, node = spark1): Request => ({
    model: LLAMA31_8B_INSTRUCT,
    weightBytes: LLAMA8B_WEIGHTS,
    tensorParallel: 1,
    pipelineParallel: 1,
    nodes: [node],
    maxModelLen,
});
const coder = (): Request => ({ model: QWEN3_30B_A3B, weightBytes: QWEN3_30B_A3B_WEIGHTS, tensorParallel: 1, pipelineParallel: 1, nodes: [spark1] });

const refusal = (services: readonly BudgetService[]): FitError => {
    try {
        planBudgets(services, NODES);
    } catch (error) {
        expect(error).toBeInstanceOf(FitError);
        return error as FitError;
    }
    throw new Error("expected planBudgets to refuse");
};
const sumOn = (plan: BudgetPlan, node: string) => plan.nodes.find((entry) => entry.name === node)!.services.reduce((sum, service) => sum + service.utilization, 0);

describe("planBudgets", () => {
    it("works out the hand-computed needs (the figures every case below relies on)", () => {
        expect(SPARK_BYTES).toBe(118_971_748_352);
        expect(BIG_NEED).toBe(70_095_432_176); // 65.3 GiB, 0.590 of a Spark
        expect(llamaNeed(32_768)).toBe(23_576_749_144); // 22.0 GiB, 0.199
        expect(CODER_NEED).toBe(68_312_002_560); // 63.6 GiB, 0.575
    });

    it("gives a service alone on all its nodes 0.9, with planFit's numbers at 0.9", () => {
        const plan = planBudgets([{ name: "big", nodes: ["spark1", "spark2"], request: big() }], NODES);
        expect(plan.utilization).toEqual({ big: 0.9 });
        expect(plan.fits.big).toEqual(planFit({ ...big(), gpuMemoryUtilization: 0.9 }));
        expect(plan.nodes).toEqual(
            ["spark1", "spark2"].map((name) => ({
                name,
                memoryBytes: SPARK_BYTES,
                services: [{ name: "big", utilization: 0.9, shareBytes: Math.floor(SPARK_BYTES * 0.9), needBytes: BIG_NEED, given: false }],
            })),
        );
        expect(sharesNodes(plan)).toBe(false);
        // The one-model form: utilization given (default 0.9), the same plan.
        expect(planBudgets([{ name: "vllm", nodes: ["spark1", "spark2"], utilization: 0.9, request: big() }], NODES).fits.vllm).toEqual(plan.fits.big);
    });

    it("leaves a lone service that does not fit to planFit: the same message as today", () => {
        const request: Request = { model: LLAMA31_70B_INSTRUCT, weightBytes: LLAMA31_70B_INSTRUCT_WEIGHTS, tensorParallel: 1, pipelineParallel: 1, nodes: [spark1] };
        let expected = "";
        try {
            planFit({ ...request, gpuMemoryUtilization: 0.9 });
        } catch (error) {
            expected = (error as Error).message;
        }
        expect(expected).toContain("spark1 has 99.7 GiB usable (0.9 × 110.8 GiB)");
        expect(() => planBudgets([{ name: "vllm", nodes: ["spark1"], request }], NODES)).toThrow(expected);
    });

    it("splits 0.9 of a shared node between two services in proportion to their needs, each share ≥ its need", () => {
        const plan = planBudgets(
            [
                { name: "big", nodes: ["spark1", "spark2"], request: big() },
                { name: "small", nodes: ["spark1"], request: llama(32_768) },
            ],
            NODES,
        );
        // 0.9 × 70.10 / (70.10 + 23.58) = 0.6735 and 0.9 × 23.58 / 93.67 = 0.2265, rounded down.
        expect(plan.utilization).toEqual({ big: 0.673, small: 0.226 });
        expect(sumOn(plan, "spark1")).toBeCloseTo(0.899, 9);
        const shared = plan.nodes[0];
        expect(shared.services.map(({ name, shareBytes, needBytes }) => ({ name, shareBytes, needBytes }))).toEqual([
            { name: "big", shareBytes: Math.floor(SPARK_BYTES * 0.673), needBytes: BIG_NEED },
            { name: "small", shareBytes: Math.floor(SPARK_BYTES * 0.226), needBytes: llamaNeed(32_768) },
        ]);
        for (const service of shared.services) {
            expect(service.shareBytes).toBeGreaterThanOrEqual(service.needBytes!);
        }
        // planFit agrees at those utilizations: room left for at least one full sequence each.
        expect(plan.fits.big.gpuMemoryUtilization).toBe(0.673);
        expect(plan.fits.big.maxConcurrentSequences).toBe(4);
        expect(plan.fits.small.maxConcurrentSequences).toBe(1);
        expect(sharesNodes(plan)).toBe(true);
    });

    it("keeps a given utilization and gives the automatic service the rest of 0.9", () => {
        const plan = planBudgets(
            [
                { name: "big", nodes: ["spark1", "spark2"], request: big() },
                { name: "small", nodes: ["spark1"], utilization: 0.2, request: llama(32_768) },
            ],
            NODES,
        );
        expect(plan.utilization).toEqual({ big: 0.7, small: 0.2 });
        expect(plan.fits.small.gpuMemoryUtilization).toBe(0.2);
        expect(plan.nodes[0].services.map(({ name, given }) => ({ name, given }))).toEqual([
            { name: "big", given: false },
            { name: "small", given: true },
        ]);
    });

    it("refuses a fleet that does not fit, with the numbers per node and per service", () => {
        const error = refusal([
            { name: "big", nodes: ["spark1", "spark2"], request: big() },
            { name: "coder", nodes: ["spark1"], request: coder() },
        ]);
        expect(error.problems).toHaveLength(2);
        const [first, second] = error.problems;
        expect(first).toMatch(/^spark1 \(110\.8 GiB\) cannot give every service placed there its least need/);
        // 0.9 × 70.10 / (70.10 + 68.31) = 0.4558, 0.9 × 68.31 / 138.41 = 0.4442.
        expect(first).toContain("big needs 65.3 GiB (0.59), gets 50.4 GiB (0.455, automatic)");
        expect(first).toContain("coder needs 63.6 GiB (0.575), gets 49.2 GiB (0.444, automatic)");
        expect(first).toContain("the automatic shares split 0.9 in proportion to their needs");
        // Together they need 1.165 of the node: no utilization can hold both, so none is offered.
        expect(first).not.toContain("gpuMemoryUtilization to at least");
        expect(first).toContain("lower vllm-fleet:services[big].vllm.maxModelLen or vllm-fleet:services[coder].vllm.maxModelLen");
        expect(first).toContain("give one of the services other nodes (vllm-fleet:services[big].nodes, vllm-fleet:services[coder].nodes)");
        // big's utilization is its share on spark1, too small for it on spark2 as well.
        expect(second).toContain("spark2 (110.8 GiB)");
        expect(second).toContain("big needs 65.3 GiB (0.59), gets 50.4 GiB (0.455, automatic: its smallest share, on spark1)");
        expect(error.message).toMatch(/^the services do not fit their nodes:\n {2}- spark1/);
    });

    it("offers the utilization that would fit when a given one leaves too little and the needs together fit", () => {
        const error = refusal([
            { name: "big", nodes: ["spark1", "spark2"], request: big() },
            { name: "small", nodes: ["spark1"], utilization: 0.35, request: llama(32_768) },
        ]);
        // big gets 0.9 − 0.35 = 0.55 of spark1 (60.9 GiB) for its 65.3 GiB; 0.59 + 0.199 ≤ 1.0.
        expect(error.problems).toHaveLength(2);
        expect(error.problems[0]).toContain("big needs 65.3 GiB (0.59), gets 60.9 GiB (0.55, automatic)");
        expect(error.problems[0]).toContain("small needs 22.0 GiB (0.199), gets 38.8 GiB (0.35, given)");
        expect(error.problems[0]).toContain("the automatic shares split 0.55 (0.9 less the given 0.35)");
        expect(error.problems[0]).toContain("set vllm-fleet:services[big].vllm.gpuMemoryUtilization to at least 0.59 with the others' lowered to leave it room");
    });

    it("refuses given utilizations that sum to more than 1.0 on a node", () => {
        const error = refusal([
            { name: "a", nodes: ["spark1"], utilization: 0.6 },
            { name: "b", nodes: ["spark1"], utilization: 0.5 },
        ]);
        expect(error.problems).toHaveLength(1);
        expect(error.problems[0]).toContain("spark1 (110.8 GiB)");
        expect(error.problems[0]).toContain("a need unknown (its config.json is not known at plan time), gets 66.5 GiB (0.6, given)");
        expect(error.problems[0]).toContain("the given utilizations sum to 1.1, more than the node's whole memory (1)");
        expect(error.problems[0]).toContain("lower vllm-fleet:services[a].vllm.gpuMemoryUtilization or vllm-fleet:services[b].vllm.gpuMemoryUtilization so that they sum to at most 1");
    });

    it("splits equally when a service's need is unknown, and says what to set when that is too little", () => {
        const plan = planBudgets(
            [
                { name: "small", nodes: ["spark1"], request: llama(32_768) },
                { name: "embed", nodes: ["spark1"] },
            ],
            NODES,
        );
        expect(plan.utilization).toEqual({ small: 0.45, embed: 0.45 });
        expect(plan.nodes).toEqual([
            {
                name: "spark1",
                memoryBytes: SPARK_BYTES,
                services: [
                    { name: "small", utilization: 0.45, shareBytes: Math.floor(SPARK_BYTES * 0.45), needBytes: llamaNeed(32_768), given: false },
                    { name: "embed", utilization: 0.45, shareBytes: Math.floor(SPARK_BYTES * 0.45), needBytes: undefined, given: false },
                ],
            },
        ]);
        expect(Object.keys(plan.fits)).toEqual(["small"]);

        // big needs 0.59 of spark1; an equal half (0.45) is too little.
        const error = refusal([
            { name: "big", nodes: ["spark1", "spark2"], request: big() },
            { name: "embed", nodes: ["spark1"] },
        ]);
        expect(error.problems[0]).toContain("big needs 65.3 GiB (0.59), gets 49.9 GiB (0.45, automatic)");
        expect(error.problems[0]).toContain("the automatic shares split 0.9 equally (a need is unknown)");
        expect(error.problems[0]).toContain("set vllm-fleet:services[big].vllm.gpuMemoryUtilization to at least 0.59 with the others' lowered to leave it room");
    });

    it("gives a service over two nodes the smaller of its shares", () => {
        const plan = planBudgets(
            [
                { name: "big", nodes: ["spark1", "spark2"], request: big() },
                { name: "small", nodes: ["spark1"], request: llama(32_768) },
                { name: "long", nodes: ["spark2"], request: llama(131_072, spark2) },
            ],
            NODES,
        );
        // spark1: big's share 0.673 (as above); spark2: 0.9 × 70.10 / (70.10 + 36.46) = 0.5920.
        expect(llamaNeed(131_072)).toBe(36_461_651_032);
        expect(plan.utilization).toEqual({ big: 0.592, small: 0.226, long: 0.307 });
        expect(sumOn(plan, "spark1")).toBeCloseTo(0.818, 9);
        expect(sumOn(plan, "spark2")).toBeCloseTo(0.899, 9);
        expect(plan.nodes[1].services[0]).toEqual({ name: "big", utilization: 0.592, shareBytes: Math.floor(SPARK_BYTES * 0.592), needBytes: BIG_NEED, given: false });
        expect(Math.floor(SPARK_BYTES * 0.592)).toBeGreaterThanOrEqual(BIG_NEED);
    });

    it("does not budget a service on a node where its request places no rank", () => {
        // TP=1 over two nodes: the one rank is on spark1, spark2 holds none of its memory.
        const plan = planBudgets(
            [
                { name: "big", nodes: ["spark1", "spark2"], request: big() },
                { name: "small", nodes: ["spark1", "spark2"], request: { ...llama(32_768), nodes: NODES } },
            ],
            NODES,
        );
        expect(plan.utilization).toEqual({ big: 0.673, small: 0.226 });
        expect(plan.nodes.map((node) => node.services.map((service) => service.name))).toEqual([["big", "small"], ["big"]]);
    });

    it("refuses a utilization outside (0, 1] and a node the stack does not have, naming the service's keys", () => {
        const error = refusal([
            { name: "a", nodes: ["spark1"], utilization: 1.5 },
            { name: "b", nodes: ["spark9"] },
        ]);
        expect(error.problems).toEqual([
            "gpu-memory-utilization of service a is 1.5, expected a fraction in (0, 1]: set vllm-fleet:services[a].vllm.gpuMemoryUtilization",
            "service b is placed on spark9, not among the nodes (spark1, spark2): check vllm-fleet:services[b].nodes",
        ]);
    });
});

describe("describeBudgets", () => {
    it("prints each node's services with utilization, share and need", () => {
        const plan = planBudgets(
            [
                { name: "big", nodes: ["spark1", "spark2"], request: big() },
                { name: "small", nodes: ["spark1"], utilization: 0.2, request: llama(32_768) },
            ],
            NODES,
        );
        expect(describeBudgets(plan).split("\n")).toEqual([
            "budgets: gpu-memory-utilization per service; automatic shares split 0.9 of a node less the given ones, by least need",
            "node    memory     service  utilization      share     least need",
            "spark1  110.8 GiB  big      0.7 (automatic)  77.6 GiB  65.3 GiB",
            "                   small    0.2 (given)      22.2 GiB  22.0 GiB",
            "spark2  110.8 GiB  big      0.7 (automatic)  77.6 GiB  65.3 GiB",
        ]);
    });
});
