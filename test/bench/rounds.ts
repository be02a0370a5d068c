/**
 * The rounds on one simulated cluster: a round (cold up, no-op preview, no-op up, vLLM-only change,
 * destroy) and the baseline (a cold up with one step at a time, then destroy), each operation timed
 * on a quiet machine, every up's engine events made a timeline, and the hosts checked: a no-op only
 * reads each node, once; a vLLM-only change leaves every Ray container as it was.
 */
import { ConfigMap, EngineEvent, Stack, UpResult } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { RAY_CONTAINER } from "../../infra/core/names";
import { formatLoadtestTable } from "../../tools/loadtest/report";
import { LoadtestReport, runLoadtest } from "../../tools/loadtest/run";
import { Timeline, buildTimeline } from "../../tools/timeline/criticalPath";
import { resourceGraphFromExport } from "../../tools/timeline/events";
import { SimCluster, onNode, putTinyModel, simStackConfig, simUp, tempWorkspace } from "../e2e/simCluster";
import { nodeCgroupDirs } from "./cpu";
import { FabricThroughput } from "./fabricTargets";
import { log } from "./log";
import { Check, CpuUse, OPERATION_LABELS, Operation, Sample } from "./targets";
import { EventRecorder, timedPulumi } from "./timed";

const MODEL_DIR = "/home/spark/models/tiny-moe";
/** The attention heads of the model putTinyModel writes. */
const TINY_MODEL_ATTENTION_HEADS = 6;
const BASE_VLLM = { port: 8000, maxModelLen: 4096 };
const CHANGED_VLLM = { port: 8000, maxModelLen: 2048, gpuMemoryUtilization: 0.3 };

/** One simulated cluster with its stack in a temporary workspace. */
export interface Deployment {
    readonly nodes: number;
    readonly clusterName: string;
    readonly cluster: SimCluster;
    readonly stack: Stack;
    readonly workDir: string;
    readonly config: ConfigMap;
    /** The cgroup directories of the simulated nodes (for their CPU time), empty if not found. */
    readonly nodeCgroups: readonly string[];
}

/**
 * What the hosts show: the SSH sessions each node's sshd opened (a channel of a shared connection
 * too: sshd logs at VERBOSE, test/sim/node/sshd_config.conf) and each node's Ray container (id and
 * start time).
 */
interface HostSnapshot {
    readonly sshSessions: readonly number[];
    readonly rayContainers: readonly string[];
}

function snapshotHosts(cluster: SimCluster): HostSnapshot {
    const sshSessions: number[] = [];
    const rayContainers: string[] = [];
    for (const node of cluster.nodes) {
        const [sessions, container] = onNode(
            node,
            `grep -c 'Starting session: ' /var/log/sshd.log || true; ` +
                `docker inspect --format '{{.Id}} {{.State.StartedAt}}' ${RAY_CONTAINER} 2>/dev/null | grep . || echo none`,
        )
            .trim()
            .split("\n");
        sshSessions.push(Number(sessions));
        rayContainers.push(container);
    }
    return { sshSessions, rayContainers };
}

/** The `pulumi up` operations whose engine events become a timeline. */
export type UpOperation = Extract<Operation, "coldUp" | "coldUpParallel1" | "upNoChange" | "vllmChange">;

/** One `pulumi up`: its wall time, its timeline, and the raw material to draw it again. */
export interface RecordedUp {
    readonly nodes: number;
    readonly run: number;
    readonly operation: UpOperation;
    readonly seconds: number;
    readonly timeline: Timeline;
    /** Share of the machine's CPU busy during the up (2 cores shared by every simulated node and other runs). */
    readonly cpuBusyShare: number;
    readonly cpu: CpuUse;
    readonly events: readonly EngineEvent[];
    readonly exported: unknown;
    /** Operations the engine ran per resource (providers excluded), e.g. `{ "vllm-serve": ["update"] }`. */
    readonly opsByResource: Record<string, readonly string[]>;
    /** Operations on providers: a config change "updates" the dynamic provider, which holds the config. */
    readonly providerOps: readonly string[];
}

/** Everything measured so far (kept whole so that a failed round still leaves a report). */
export interface Measurements {
    readonly samples: Sample[];
    readonly checks: Check[];
    readonly ups: RecordedUp[];
    readonly sshRoundTripSeconds: Record<number, number>;
    fabric?: FabricThroughput;
    /** `npm run loadtest` against the endpoint after the first cold up, by node count. */
    readonly loadtests: Record<number, LoadtestReport>;
}

function onlySame(changes: Record<string, number> | undefined): boolean {
    return Object.keys(changes ?? {}).every((op) => op === "same");
}

/** Runs `pulumi up` (one step at a time for the baseline), timing it and recording its timeline. */
export async function recordedUp(deployment: Deployment, run: number, operation: UpOperation, measurements: Measurements): Promise<{ up: UpResult; record: RecordedUp }> {
    const recorder = new EventRecorder();
    const { result: up, seconds, apiSeconds, startMs, endMs, cpuBusyShare, cpu } = await timedPulumi(
        (onOutput) => deployment.stack.up({ onEvent: recorder.onEvent, onOutput, ...(operation === "coldUpParallel1" ? { parallel: 1 } : {}) }),
        deployment.nodeCgroups,
    );
    if (up.summary.result !== "succeeded") {
        throw new Error(`${operation} on ${deployment.nodes} nodes: ${up.summary.result}`);
    }
    const exported = await deployment.stack.exportStack();
    const timeline = buildTimeline(recorder.events, { graph: resourceGraphFromExport(exported), timeOf: recorder.timeOf, window: { startMs, endMs } });
    const record: RecordedUp = {
        nodes: deployment.nodes,
        run,
        operation,
        seconds,
        timeline,
        cpuBusyShare,
        cpu,
        events: recorder.events,
        exported,
        opsByResource: Object.fromEntries(timeline.spans.filter((span) => span.kind !== "provider").map((span) => [span.name, span.ops])),
        providerOps: [...new Set(timeline.spans.filter((span) => span.kind === "provider").flatMap((span) => span.ops))],
    };
    measurements.samples.push({ nodes: deployment.nodes, run, operation, seconds, apiSeconds });
    measurements.ups.push(record);
    log(
        `${deployment.nodes} nodes run ${run}: ${OPERATION_LABELS[operation]} ${seconds.toFixed(1)} s ` +
            `(critical path ${(timeline.criticalMs / 1000).toFixed(1)} s, outside it ${(100 * timeline.outsideShare).toFixed(0)}%, ` +
            `CPU busy ${(100 * cpuBusyShare).toFixed(0)}%, ${cpu.machineSeconds.toFixed(1)} CPU-s of which ${cpu.workloadSeconds?.toFixed(1) ?? "?"} in Ray/vLLM)`,
    );
    return { up, record };
}

async function coldUp(deployment: Deployment, run: number, operation: "coldUp" | "coldUpParallel1", measurements: Measurements): Promise<void> {
    // As a user does: `pulumi preview`, then `pulumi up` (untimed). Both cold ups then start alike:
    // the SSH connections to the nodes open (they stay 30 s) and the bench's process past what it
    // loads once (a `pulumi` command loads it on every run).
    await deployment.stack.preview();
    const { up } = await recordedUp(deployment, run, operation, measurements);
    if (operation === "coldUp" && measurements.loadtests[deployment.nodes] === undefined) {
        // The serving benchmark users run (tools/loadtest/), at concurrency 1 and 4, with the key the stack made.
        const report = await runLoadtest({
            endpoint: String(up.outputs.endpoint.value),
            apiKey: String(up.outputs.apiKey?.value ?? ""),
            apiKeySource: "the stack output apiKey",
            concurrency: 4,
            requests: 8,
            maxTokens: 16,
        });
        measurements.loadtests[deployment.nodes] = report;
        const failed = report.levels.reduce((sum, level) => sum + level.summary.errors, 0);
        measurements.checks.push({
            nodes: deployment.nodes,
            run,
            name: "the load test's streamed requests all succeed",
            passed: failed === 0,
            detail: `${report.levels.map((level) => `concurrency ${level.summary.concurrency}: ${level.summary.requests - level.summary.errors}/${level.summary.requests}`).join(", ")}`,
        });
        log(`${deployment.nodes} nodes run ${run}: load test (the vLLM stand-in's numbers)\n${formatLoadtestTable(report)}`);
    }
    const completion = String(up.outputs.completion?.value ?? "");
    const missing = deployment.cluster.nodes.filter((node) => !completion.includes(node.fabricIp)).map((node) => node.fabricIp);
    measurements.checks.push({
        nodes: deployment.nodes,
        run,
        name: "cold up serves a completion from every node's fabric address",
        passed: missing.length === 0,
        detail: missing.length === 0 ? "every fabric address answered" : `missing ${missing.join(", ")} in ${completion.slice(0, 200)}`,
    });
}

async function destroy(deployment: Deployment, run: number, measurements: Measurements, timedAs?: Operation): Promise<void> {
    const { result, seconds, apiSeconds } = await timedPulumi((onOutput) => deployment.stack.destroy({ onOutput }));
    if (result.summary.result !== "succeeded") {
        throw new Error(`destroy on ${deployment.nodes} nodes: ${result.summary.result}`);
    }
    const left = snapshotHosts(deployment.cluster).rayContainers.filter((container) => container !== "none");
    measurements.checks.push({
        nodes: deployment.nodes,
        run,
        name: "destroy leaves no Ray container on any node",
        passed: left.length === 0,
        detail: left.length === 0 ? "none left" : `left: ${left.join(", ")}`,
    });
    if (timedAs) {
        measurements.samples.push({ nodes: deployment.nodes, run, operation: timedAs, seconds, apiSeconds });
    }
    log(`${deployment.nodes} nodes run ${run}: destroy ${seconds.toFixed(1)} s`);
}

/** One round on one cluster: cold up, no-op preview, no-op up, vLLM-only change, destroy. */
export async function round(deployment: Deployment, run: number, measurements: Measurements): Promise<void> {
    const { nodes, stack, cluster } = deployment;
    const check = (name: string, passed: boolean, detail: string) => measurements.checks.push({ nodes, run, name, passed, detail });
    const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
    await stack.setAllConfig(deployment.config);
    await coldUp(deployment, run, "coldUp", measurements);

    const deployed = snapshotHosts(cluster);
    const preview = await timedPulumi((onOutput) => stack.preview({ onOutput }));
    measurements.samples.push({ nodes, run, operation: "previewNoChange", seconds: preview.seconds, apiSeconds: preview.apiSeconds });
    const afterPreview = snapshotHosts(cluster);
    // Every run reads each node once (one SSH session, read-only: infra/core/observe.ts) and does nothing else.
    const readOnce = (before: HostSnapshot, after: HostSnapshot) => after.sshSessions.every((sessions, index) => sessions - before.sshSessions[index] === 1);
    check(
        "no-op preview reads each node once and changes nothing",
        onlySame(preview.result.changeSummary) && readOnce(deployed, afterPreview) && same(afterPreview.rayContainers, deployed.rayContainers),
        `changes ${JSON.stringify(preview.result.changeSummary)}, ssh sessions ${deployed.sshSessions.join(",")} -> ${afterPreview.sshSessions.join(",")}`,
    );
    log(`${nodes} nodes run ${run}: ${OPERATION_LABELS.previewNoChange} ${preview.seconds.toFixed(1)} s`);

    const noop = await recordedUp(deployment, run, "upNoChange", measurements);
    const afterNoop = snapshotHosts(cluster);
    const noopOps = [...new Set(Object.values(noop.record.opsByResource).flat())];
    check(
        "no-op up reads each node once and changes nothing",
        onlySame(noop.up.summary.resourceChanges) &&
            noopOps.every((op) => op === "same") &&
            readOnce(afterPreview, afterNoop) &&
            same(afterNoop.rayContainers, deployed.rayContainers),
        `changes ${JSON.stringify(noop.up.summary.resourceChanges)}, engine ops ${noopOps.join(",")}, ` +
            `ssh sessions ${afterPreview.sshSessions.join(",")} -> ${afterNoop.sshSessions.join(",")}, ` +
            `Ray containers ${same(afterNoop.rayContainers, deployed.rayContainers) ? "unchanged" : "CHANGED"}`,
    );

    await stack.setConfig("vllm-fleet:vllm", { value: JSON.stringify(CHANGED_VLLM) });
    const change = await recordedUp(deployment, run, "vllmChange", measurements);
    const afterChange = snapshotHosts(cluster);
    check(
        "vLLM-only change restarts no Ray container",
        same(afterChange.rayContainers, deployed.rayContainers),
        `Ray containers (id, StartedAt) ${same(afterChange.rayContainers, deployed.rayContainers) ? "unchanged" : `${deployed.rayContainers.join(" ")} -> ${afterChange.rayContainers.join(" ")}`}`,
    );
    const changed = Object.entries(change.record.opsByResource).filter(([, ops]) => ops.some((op) => op !== "same"));
    const endpoint = String(change.up.outputs.endpoint?.value ?? "");
    const apiKey = String(change.up.outputs.apiKey?.value ?? "");
    const models = (await (await fetch(`${endpoint}/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).json()) as { data: { max_model_len?: number }[] };
    const servedLength = models.data[0]?.max_model_len;
    // vllm serve restarts in place once the image's vLLM checked the new arguments; the fabric
    // checks run again; the watchdog (it reads the serve arguments from the Ray head) runs on.
    const byName = Object.fromEntries(changed.map(([name, ops]) => [name, ops.join()]));
    const fabricChecks = changed.filter(([name, ops]) => /^vllm-fabric-/.test(name) && ops.some((op) => /replace/.test(op)));
    check(
        "vLLM-only change updates vllm-serve and reruns the checks, nothing else, and takes effect",
        changed.length === 2 + fabricChecks.length &&
            fabricChecks.length === deployment.cluster.nodes.length &&
            byName["vllm-serve"] === "update" &&
            byName["vllm-args-check"] === "update" &&
            servedLength === CHANGED_VLLM.maxModelLen,
        `changed: ${changed.map(([name, ops]) => `${name} ${ops.join(",")}`).join("; ")} (provider: ${change.record.providerOps.join(",")}); ` +
            `served max_model_len ${servedLength}`,
    );

    await destroy(deployment, run, measurements, "destroy");
}

/** The baseline: a cold up with one step at a time, then destroy (untimed). */
export async function baselineRound(deployment: Deployment, run: number, measurements: Measurements): Promise<void> {
    await deployment.stack.setAllConfig(deployment.config);
    await coldUp(deployment, run, "coldUpParallel1", measurements);
    await destroy(deployment, run, measurements);
}

/**
 * One GPU per node: TP = the node count where it divides the tiny model's 6 attention heads (as vLLM
 * requires), else TP 2 × PP nodes/2 (4 nodes: TP 2, PP 2). The deployment is the same either way:
 * one Ray container per node, `vllm serve` on the head.
 */
export function parallelismFor(nodes: number): { tensor: number; pipeline: number } {
    const tensor = TINY_MODEL_ATTENTION_HEADS % nodes === 0 ? nodes : 2;
    if (nodes % tensor !== 0) {
        throw new Error(`no TP×PP split of ${nodes} GPUs fits a model with ${TINY_MODEL_ATTENTION_HEADS} attention heads`);
    }
    return { tensor, pipeline: nodes / tensor };
}

export async function prepare(nodes: number): Promise<Deployment> {
    const clusterName = `bench${nodes}`;
    log(`bringing up simulated cluster ${clusterName} (${nodes} nodes)`);
    const cluster = await simUp(clusterName, nodes);
    putTinyModel(cluster, MODEL_DIR);
    const workspace = tempWorkspace(`vllm-fleet-${clusterName}-`);
    const config = simStackConfig(cluster, MODEL_DIR, { parallelism: parallelismFor(nodes), vllm: BASE_VLLM });
    const stack = await openStack(clusterName, { workDir: workspace.dir, envVars: workspace.envVars, config });
    return { nodes, clusterName, cluster, stack, workDir: workspace.dir, config, nodeCgroups: nodeCgroupDirs(cluster) };
}
