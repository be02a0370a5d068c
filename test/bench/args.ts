/** The benchmark's command line: `--runs K`, `--nodes 2,4`, `--out DIR`, `--fabric-only`, `--fleet`, `--image-update`, `--real`. */
import * as path from "path";
import { REPO_ROOT } from "../automation";
import { invocationDir } from "../../tools/command";

/** Command-line options. */
export interface BenchOptions {
    readonly runs: number;
    readonly nodeCounts: readonly number[];
    readonly outDir: string;
    /** Only the copies over the fabric (raw TCP, image copy, weight sync) on a 2-node cluster. */
    readonly fabricOnly?: boolean;
    /** Fleets of services (./fleet.ts): one TP-2 service per pair of nodes at each node count, and issue 23's fleet. */
    readonly fleet?: boolean;
    /** An image update copied to a node with the build before (./imageUpdate.ts): bytes over the fabric against the new layer. */
    readonly imageUpdate?: boolean;
    /** Real vLLM (its CPU build) through the product against by hand, and warm against cold compile caches (./realVllm.ts). */
    readonly real?: boolean;
}

/** Parses `--runs K`, `--nodes 2,4`, `--out DIR`, `--fabric-only`, `--fleet` (default nodes then 2,4,8) and `--image-update` (2 nodes). */
export function parseBenchArgs(argv: readonly string[]): BenchOptions {
    let runs = 3;
    let nodeCounts: number[] | undefined;
    let fleet = false;
    let outDir = path.join(REPO_ROOT, "bench-report");
    let fabricOnly = false;
    let imageUpdate = false;
    let real = false;
    for (let index = 0; index < argv.length; index++) {
        const flag = argv[index];
        const value = argv[index + 1];
        if (flag === "--runs" && value !== undefined) {
            runs = Number(value);
            index++;
        } else if (flag === "--nodes" && value !== undefined) {
            nodeCounts = value.split(",").map(Number);
            index++;
        } else if (flag === "--fabric-only") {
            fabricOnly = true;
        } else if (flag === "--fleet") {
            fleet = true;
        } else if (flag === "--image-update") {
            imageUpdate = true;
        } else if (flag === "--real") {
            real = true;
        } else if (flag === "--out" && value !== undefined) {
            outDir = path.resolve(invocationDir(), value);
            index++;
        } else {
            throw new Error(`unknown argument ${flag}; usage: bench [--runs K] [--nodes 2,4] [--out DIR] [--fabric-only | --fleet | --image-update | --real]`);
        }
    }
    if (!Number.isInteger(runs) || runs < 1) {
        throw new Error(`--runs must be a positive integer, not ${runs}`);
    }
    const nodesGiven = nodeCounts !== undefined;
    const runsGiven = argv.includes("--runs");
    nodeCounts ??= fleet ? [2, 4, 8] : [2, 4];
    if (nodeCounts.length === 0 || nodeCounts.some((count) => !Number.isInteger(count) || count < 1 || count > 8)) {
        throw new Error(`--nodes must list node counts 1..8, not ${nodeCounts.join(",")}`);
    }
    if ([fleet, fabricOnly, imageUpdate, real].filter(Boolean).length > 1) {
        throw new Error("--fleet, --fabric-only, --image-update and --real are separate benchmarks: give one");
    }
    for (const [given, flag] of [
        [imageUpdate, "--image-update copies between 2 nodes"],
        [real, "--real serves tensor parallel 2 on 2 nodes"],
    ] as const) {
        if (given && nodesGiven && nodeCounts.join(",") !== "2") {
            throw new Error(`${flag}: leave out --nodes (not ${nodeCounts.join(",")})`);
        }
    }
    if (fleet && nodeCounts.some((count) => count % 2 !== 0)) {
        throw new Error(`--fleet deploys one TP-2 service per pair of nodes: --nodes must list even counts, not ${nodeCounts.join(",")}`);
    }
    if (fabricOnly || imageUpdate || real) {
        nodeCounts = [2];
    }
    // A run of real vLLM takes about ten minutes on 2 cores: one unless asked for more.
    return { runs: real && !runsGiven ? 1 : runs, nodeCounts: [...new Set(nodeCounts)].sort((a, b) => a - b), outDir, fabricOnly, fleet, imageUpdate, real };
}
