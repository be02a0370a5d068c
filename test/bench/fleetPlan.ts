/**
 * The fleets the fleet bench deploys (pure): per pair of nodes one TP-2 service (Ray on the first
 * pair, mp on the others), and issue 23's fleet of three services on four nodes. Each is the
 * `vllm-fleet:services` value of a stack on the first nodes of one simulated cluster.
 */

/** A service as the stack's `services` takes it, without its image (the cluster's workload image is added). */
export interface FleetService {
    readonly name: string;
    readonly nodes: readonly string[];
    readonly executor: "ray" | "mp";
    readonly parallelism: { readonly tensor: number };
    readonly model: { readonly path: string; readonly servedName: string };
    readonly vllm: Readonly<Record<string, number>>;
}

/** One fleet: an id (its stack's name and file names), what the report calls it, its nodes and services. */
export interface FleetSpec {
    readonly id: string;
    readonly title: string;
    readonly nodes: number;
    readonly services: readonly FleetService[];
    /** The fleets of the growth table (one service per pair) against issue 23's mixed fleet. */
    readonly kind: "pairs" | "issue23";
    /** The stack's `vllm-fleet:gateway` value without its image (the cluster's is added), for a fleet with a gateway. */
    readonly gateway?: { readonly node: string; readonly port: number };
}

/** `spark<k>`, 1-based, as simStackConfig names the nodes. */
const node = (index: number) => `spark${index + 1}`;

/**
 * `nodes / 2` services, one per pair of nodes, each TP 2 with one GPU per node: `pair1` with Ray on
 * spark1-2, `pair2`... with mp on the next pairs. Every service uses port 8000 (they share no node).
 */
export function pairFleet(nodes: number, modelDir: string): FleetSpec {
    if (!Number.isInteger(nodes) || nodes < 2 || nodes % 2 !== 0) {
        throw new Error(`a fleet of TP-2 pairs needs an even node count of at least 2, not ${nodes}`);
    }
    const services = Array.from({ length: nodes / 2 }, (_, pair): FleetService => ({
        name: `pair${pair + 1}`,
        nodes: [node(2 * pair), node(2 * pair + 1)],
        executor: pair === 0 ? "ray" : "mp",
        parallelism: { tensor: 2 },
        model: { path: modelDir, servedName: `tiny-moe-pair${pair + 1}` },
        vllm: { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.3 },
    }));
    return {
        id: `fleet${nodes}`,
        title: `${nodes} nodes, ${services.length} service${services.length === 1 ? "" : "s"} (TP 2 each: ray on spark1-2${services.length > 1 ? ", mp on the other pairs" : ""})`,
        nodes,
        services,
        kind: "pairs",
    };
}

/**
 * Issue 23's fleet: A (ray, TP 2) on spark1-2, B (mp, TP 2) on spark3-4 and a small C (mp, TP 1) on
 * spark1 beside A, with ports of its own; A leaves room for C (gpuMemoryUtilization 0.6), C's share
 * is the planner's (as test/e2e/fleet.test.ts deploys them); the gateway on spark3, port 4000.
 */
export function issue23Fleet(modelDir: string): FleetSpec {
    const model = (servedName: string) => ({ path: modelDir, servedName });
    return {
        id: "fleet4-abc",
        title: "issue 23: 4 nodes, 3 services (A ray TP 2 on spark1-2, B mp TP 2 on spark3-4, C mp TP 1 on spark1) and the gateway on spark3",
        nodes: 4,
        services: [
            { name: "a", nodes: ["spark1", "spark2"], executor: "ray", parallelism: { tensor: 2 }, model: model("a-moe"), vllm: { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.3 } },
            { name: "b", nodes: ["spark3", "spark4"], executor: "mp", parallelism: { tensor: 2 }, model: model("b-moe"), vllm: { port: 8001, maxModelLen: 4096, gpuMemoryUtilization: 0.4 } },
            { name: "c", nodes: ["spark1"], executor: "mp", parallelism: { tensor: 1 }, model: model("c-moe"), vllm: { port: 8002, maxModelLen: 2048, masterPort: 29502, gpuMemoryUtilization: 0.2 } },
        ],
        kind: "issue23",
        gateway: { node: "spark3", port: 4000 },
    };
}

/** The fleets of one fleet bench: a pair fleet per node count, then issue 23's (needs 4 nodes in the cluster). */
export function benchFleets(nodeCounts: readonly number[], modelDir: string): FleetSpec[] {
    const fleets = [...nodeCounts].sort((a, b) => a - b).map((nodes) => pairFleet(nodes, modelDir));
    return Math.max(...nodeCounts) >= 4 ? [...fleets, issue23Fleet(modelDir)] : fleets;
}
