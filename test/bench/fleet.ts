/**
 * The fleet bench (`npm run bench -- --fleet [--nodes 2,4,8] [--runs K] [--out DIR]`): how the cost of
 * a fleet of services grows with the node count, and issue 23's 4-node, 3-service fleet, each against
 * its floor (./fleetReport.ts says how the floor extends to several services).
 *
 * One simulated cluster of the largest node count (`fleet<N>`); each fleet is a stack of its own on
 * the cluster's first nodes (./fleetPlan.ts: one TP-2 service per pair of nodes, Ray on the first pair
 * and mp on the others; issue 23's A, B and C). Per run and fleet: a round (cold up after an untimed
 * preview, no-op preview, no-op up, destroy), then the baselines (a cold up with one step at a time,
 * `--parallel 1`, whose solo step times give the graph's bound, then destroy). The hosts are checked:
 * every service answers from every rank of its own nodes, a no-op reads each node once and changes
 * no container, destroy leaves none. With a gateway in the fleet (issue 23's), its cost: TTFT
 * through it against a service directly (./gatewayCost.ts).
 */
import { ConfigMap, OutputMap } from "@pulumi/pulumi/automation";
import * as fs from "fs";
import { openStack } from "../automation";
import { SimCluster, complete, onNode, putTinyModel, simDown, simStackConfig, simUp, tempWorkspace } from "../e2e/simCluster";
import { BenchOptions } from "./args";
import { nodeCgroupDirs } from "./cpu";
import { FleetSpec, benchFleets } from "./fleetPlan";
import { FleetRecord, writeFleetReport } from "./fleetWrite";
import { GatewayLevelSamples, gatewayCost, measureGatewayCost } from "./gatewayCost";
import { log } from "./log";
import { Deployment, Measurements, recordedUp } from "./rounds";
import { followUpCpuSeconds, timedPulumi } from "./timed";

const MODEL_DIR = "/home/spark/models/tiny-moe";

/** The single-model keys simStackConfig sets, which the services form leaves out. */
const ONE_MODEL_KEYS = ["image", "model", "vllm"];

/** A fleet's stack on its cluster's first nodes, and what was measured on it. */
interface FleetDeployment extends Deployment {
    readonly spec: FleetSpec;
    readonly measurements: Measurements;
    followUpCpuSeconds?: number;
    gateway?: GatewayLevelSamples[];
    /** Why the fleet's runs stopped, when one failed. */
    failure?: string;
}

/** The stack config of a fleet: the cluster's first `spec.nodes` nodes, its services with the cluster's image. */
export function fleetStackConfig(cluster: SimCluster, spec: FleetSpec): ConfigMap {
    const config = simStackConfig(cluster, MODEL_DIR);
    for (const key of ONE_MODEL_KEYS) {
        delete config[`vllm-fleet:${key}`];
    }
    const image = { name: cluster.workloadImage };
    config["vllm-fleet:services"] = { value: JSON.stringify(spec.services.map((service) => ({ image, ...service }))) };
    if (spec.gateway !== undefined) {
        config["vllm-fleet:gateway"] = { value: JSON.stringify({ ...spec.gateway, image }) };
    }
    return config;
}

/** Every container of the stack on the fleet's nodes, `spark<k>/<name>` -> id (by the stack's label). */
function containerIds(deployment: FleetDeployment): Record<string, string> {
    return Object.fromEntries(
        deployment.cluster.nodes.flatMap((node) =>
            onNode(node, `docker ps -a --filter label=vllm-fleet.stack=${deployment.clusterName} --format '{{.Names}} {{.ID}}'`)
                .split("\n")
                .filter((line) => line !== "")
                .map((line) => [`spark${node.index + 1}/${line.split(" ")[0]}`, line.split(" ")[1]]),
        ),
    );
}

/** The SSH sessions each node's sshd has opened so far (sshd logs at VERBOSE: test/sim/node/sshd_config.conf). */
function sshSessions(deployment: FleetDeployment): number[] {
    return deployment.cluster.nodes.map((node) => Number(onNode(node, `grep -c 'Starting session: ' /var/log/sshd.log || true`).trim()));
}

/** Service outputs of an up: each service's endpoint, model and nodes. */
type ServicesOutput = Record<string, { endpoint: string; model: string; nodes: string[] }>;

/**
 * Each service answers a completion on its own endpoint (or, given `through`, the gateway's) from
 * every rank of its own nodes: what is missing.
 */
async function servingProblems(deployment: FleetDeployment, outputs: OutputMap, through?: string): Promise<string[]> {
    const services = (outputs.services?.value ?? {}) as ServicesOutput;
    const apiKey = String(outputs.apiKey?.value ?? "");
    const problems: string[] = [];
    const expected = deployment.spec.services.map((service) => service.name).sort();
    if (JSON.stringify(Object.keys(services).sort()) !== JSON.stringify(expected)) {
        problems.push(`services output ${Object.keys(services).join(",")}, expected ${expected.join(",")}`);
    }
    for (const [name, service] of Object.entries(services)) {
        try {
            const body = await complete(through ?? service.endpoint, service.model, apiKey);
            const answered = body.vllm_fleet_ranks.map((rank) => rank.ip).sort();
            const fabric = service.nodes.map((node) => deployment.cluster.nodes[Number(node.replace("spark", "")) - 1].fabricIp).sort();
            if (JSON.stringify(answered) !== JSON.stringify(fabric)) {
                problems.push(`${name}: ranks answered from ${answered.join(",")}, expected ${fabric.join(",")}`);
            }
        } catch (error) {
            problems.push(`${name}: ${(error as Error).message.split("\n")[0]}`);
        }
    }
    return problems;
}

/** The gateway's endpoint (the stack output gatewayEndpoint) of a fleet with a gateway; undefined for the others. */
function gatewayEndpoint(spec: FleetSpec, outputs: OutputMap): string | undefined {
    if (spec.gateway === undefined) {
        return undefined;
    }
    const endpoint = outputs.gatewayEndpoint?.value;
    if (typeof endpoint !== "string" || endpoint === "") {
        throw new Error(`${spec.id}: the stack declares a gateway but its output gatewayEndpoint is empty`);
    }
    return endpoint;
}

async function coldUp(deployment: FleetDeployment, run: number, operation: "coldUp" | "coldUpParallel1"): Promise<void> {
    const { spec, measurements, stack } = deployment;
    await stack.setAllConfig(deployment.config);
    // As a user does, and as the single-model bench does: an untimed preview first.
    await stack.preview();
    const { up } = await recordedUp(deployment, run, operation, measurements);
    const problems = await servingProblems(deployment, up.outputs);
    measurements.checks.push({
        nodes: spec.nodes,
        run,
        name: "cold up: every service answers from every rank of its own nodes",
        passed: problems.length === 0,
        detail: problems.length === 0 ? `${spec.services.length} services answered` : problems.join("; "),
    });
    deployment.followUpCpuSeconds ??= await followUpCpuSeconds(stack);
    const gateway = gatewayEndpoint(spec, up.outputs);
    if (gateway !== undefined) {
        const throughGateway = await servingProblems(deployment, up.outputs, gateway);
        measurements.checks.push({
            nodes: spec.nodes,
            run,
            name: "cold up: the gateway answers each service's model from every rank of that service",
            passed: throughGateway.length === 0,
            detail: throughGateway.length === 0 ? `${spec.services.length} models through ${gateway}` : throughGateway.join("; "),
        });
    }
    if (gateway !== undefined && deployment.gateway === undefined) {
        // Service A (the first), asked directly and through the gateway.
        const name = spec.services[0].name;
        const service = ((up.outputs.services?.value ?? {}) as ServicesOutput)[name];
        log(`${spec.id} run ${run}: the gateway's cost (TTFT through ${gateway} against ${name} at ${service.endpoint}, concurrency 1 and 16)`);
        deployment.gateway = await measureGatewayCost({ direct: service.endpoint, gateway, model: service.model, apiKey: String(up.outputs.apiKey?.value ?? "") });
        for (const cost of gatewayCost(deployment.gateway)) {
            log(`${spec.id}: concurrency ${cost.concurrency}: TTFT p50 ${cost.directTtftP50Ms?.toFixed(1)} ms directly, ${cost.gatewayTtftP50Ms?.toFixed(1)} ms through the gateway`);
        }
    }
}

async function destroy(deployment: FleetDeployment, run: number, timed: boolean): Promise<void> {
    const { spec, measurements, stack } = deployment;
    const { result, seconds, apiSeconds } = await timedPulumi((onOutput) => stack.destroy({ onOutput }));
    if (result.summary.result !== "succeeded") {
        throw new Error(`destroy of ${spec.id}: ${result.summary.result}`);
    }
    const left = Object.keys(containerIds(deployment));
    measurements.checks.push({
        nodes: spec.nodes,
        run,
        name: "destroy leaves no container of the stack on any node",
        passed: left.length === 0,
        detail: left.length === 0 ? "none left" : `left: ${left.join(", ")}`,
    });
    if (timed) {
        measurements.samples.push({ nodes: spec.nodes, run, operation: "destroy", seconds, apiSeconds });
    }
    log(`${spec.id} run ${run}: destroy ${seconds.toFixed(1)} s`);
}

/** Cold up, no-op preview, no-op up (each node read once, no container changed), destroy. */
async function fleetRound(deployment: FleetDeployment, run: number): Promise<void> {
    const { spec, measurements, stack } = deployment;
    const check = (name: string, passed: boolean, detail: string) => measurements.checks.push({ nodes: spec.nodes, run, name, passed, detail });
    await coldUp(deployment, run, "coldUp");
    const ids = containerIds(deployment);
    const deployed = sshSessions(deployment);
    const preview = await timedPulumi((onOutput) => stack.preview({ onOutput }));
    measurements.samples.push({ nodes: spec.nodes, run, operation: "previewNoChange", seconds: preview.seconds, apiSeconds: preview.apiSeconds });
    const afterPreview = sshSessions(deployment);
    const once = (before: number[], after: number[]) => after.every((sessions, index) => sessions - before[index] === 1);
    const onlySame = (changes: Record<string, number> | undefined) => Object.keys(changes ?? {}).every((op) => op === "same");
    check(
        "no-op preview reads each node once and changes nothing",
        onlySame(preview.result.changeSummary) && once(deployed, afterPreview),
        `changes ${JSON.stringify(preview.result.changeSummary)}, ssh sessions ${deployed.join(",")} -> ${afterPreview.join(",")}`,
    );
    const noop = await recordedUp(deployment, run, "upNoChange", measurements);
    const afterNoop = sshSessions(deployment);
    const unchanged = JSON.stringify(containerIds(deployment)) === JSON.stringify(ids);
    const ops = [...new Set(Object.values(noop.record.opsByResource).flat())];
    check(
        "no-op up reads each node once and changes nothing",
        onlySame(noop.up.summary.resourceChanges) && ops.every((op) => op === "same") && once(afterPreview, afterNoop) && unchanged,
        `changes ${JSON.stringify(noop.up.summary.resourceChanges)}, engine ops ${ops.join(",")}, ssh sessions ${afterPreview.join(",")} -> ${afterNoop.join(",")}, ` +
            `containers ${unchanged ? "unchanged" : "CHANGED"} (${Object.keys(ids).length})`,
    );
    await destroy(deployment, run, true);
}

/** The baseline: a cold up with one step at a time (its solo step times: the graph's bound), then destroy. */
async function fleetBaseline(deployment: FleetDeployment, run: number): Promise<void> {
    await coldUp(deployment, run, "coldUpParallel1");
    await destroy(deployment, run, false);
}

/** Opens the stack of one fleet on the cluster's first nodes. */
async function prepareFleet(cluster: SimCluster, spec: FleetSpec): Promise<FleetDeployment> {
    const nodes = { ...cluster, nodes: cluster.nodes.slice(0, spec.nodes) };
    const workspace = tempWorkspace(`vllm-fleet-${spec.id}-`);
    const config = fleetStackConfig(nodes, spec);
    const stack = await openStack(spec.id, { workDir: workspace.dir, envVars: workspace.envVars, config });
    return {
        spec,
        nodes: spec.nodes,
        clusterName: spec.id,
        cluster: nodes,
        stack,
        workDir: workspace.dir,
        config,
        nodeCgroups: nodeCgroupDirs(nodes),
        measurements: { samples: [], checks: [], ups: [], sshRoundTripSeconds: {}, loadtests: {} },
    };
}

/** Runs the fleet bench and writes its report; returns whether it ran to the end. */
export async function runFleetBench(options: BenchOptions): Promise<boolean> {
    const startedAt = new Date();
    const largest = Math.max(...options.nodeCounts);
    const clusterName = `fleet${largest}`;
    const fleets = benchFleets(options.nodeCounts, MODEL_DIR);
    const deployments: FleetDeployment[] = [];
    let clusterUp = false;
    let cleaning: Promise<void> | undefined;
    const cleanUp = () =>
        (cleaning ??= (async () => {
            for (const deployment of deployments) {
                // A fleet left up by a failure: its stack goes with the cluster; only the workspace is ours to remove.
                fs.rmSync(deployment.workDir, { recursive: true, force: true });
            }
            if (clusterUp) {
                try {
                    log(`removing simulated cluster ${clusterName}`);
                    await simDown(clusterName);
                } catch (error) {
                    log(`could not remove ${clusterName}: ${(error as Error).message}`);
                }
            }
        })());
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
        process.once(signal, () => {
            log(`${signal}: cleaning up`);
            void cleanUp().finally(() => process.exit(130));
        });
    }
    let failure: Error | undefined;
    let pulumiVersion = "?";
    try {
        log(`bringing up simulated cluster ${clusterName} (${largest} nodes) for ${fleets.map((fleet) => fleet.id).join(", ")}`);
        clusterUp = true;
        const cluster = await simUp(clusterName, largest);
        putTinyModel(cluster, MODEL_DIR);
        for (const spec of fleets) {
            deployments.push(await prepareFleet(cluster, spec));
        }
        pulumiVersion = deployments[0].stack.workspace.pulumiVersion;
        // A fleet that fails is recorded and left out of the later runs; the others go on.
        const attempt = async (deployment: FleetDeployment, run: number, step: (deployment: FleetDeployment, run: number) => Promise<void>) => {
            if (deployment.failure !== undefined) {
                return;
            }
            try {
                await step(deployment, run);
            } catch (error) {
                deployment.failure = `run ${run}: ${(error as Error).message.split("\n").slice(0, 3).join(" ")}`;
                log(`${deployment.spec.id} FAILED ${deployment.failure}; its stack is destroyed and the other fleets go on`);
                await deployment.stack.destroy().catch((destroyError: Error) => log(`${deployment.spec.id}: destroy after the failure: ${destroyError.message.split("\n")[0]}`));
            }
        };
        for (let run = 1; run <= options.runs; run++) {
            for (const deployment of deployments) {
                await attempt(deployment, run, fleetRound);
            }
            for (const deployment of deployments) {
                await attempt(deployment, run, fleetBaseline);
            }
        }
    } catch (error) {
        failure = error as Error;
        log(`FAILED: ${failure.stack ?? failure.message}`);
    } finally {
        await cleanUp();
    }
    const records: FleetRecord[] = deployments.map((deployment) => ({
        spec: deployment.spec,
        measurements: deployment.measurements,
        followUpCpuSeconds: deployment.followUpCpuSeconds,
        gateway: deployment.gateway,
        failure: deployment.failure,
    }));
    const reportPath = writeFleetReport(options, records, { startedAt, pulumiVersion, clusterNodes: largest, error: failure });
    console.log(fs.readFileSync(reportPath, "utf8"));
    log(`report: ${reportPath}`);
    return failure === undefined && deployments.every((deployment) => deployment.failure === undefined);
}
