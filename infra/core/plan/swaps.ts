/**
 * Swaps (issue 23): a service that runs now (the read of the nodes: its containers, by the stack's
 * and the service's labels) leaves the config, and another service of the stack, new on its nodes,
 * takes over its served name (a new model, a new image). Pulumi deletes what left the program at
 * the end of an update, after every create and update, so by default the new service starts, its
 * readiness gate waits until it serves, and only then do the old one's containers go: blue/green.
 * That holds only when both fit side by side on every node they share, in memory (the old
 * service's share while it runs, beside every share planned there) and in ports (both use the
 * host's network). Otherwise the old service is stopped first: a step on each of its nodes that the
 * new service's containers wait for, announced at preview with the reason and how long the model
 * is not served; or, with `swap: refuseDowntime`, refused.
 *
 * The same check applies to any service that leaves the config beside a new one it is in the way
 * of (no swap: its model goes anyway). A service that changes its served name or model in place
 * (same name) is a replacement with downtime, which preview says. Pure.
 */
import { FleetConfig } from "../config";
import { rayTakes } from "../config/ports";
import { FleetError } from "../errors";
import { GIVEN_BUDGET, formatGiB } from "../fit";
import { DEFAULT_SERVICE, ROLE_LABEL, SERVICE_LABEL } from "../names";
import { NodeObservation } from "../observe";
import { containerModelPath } from "./serveArgs";

/** vLLM's own default share when a start's arguments do not say (they always do for vllm-fleet's). */
const VLLM_DEFAULT_UTILIZATION = 0.9;

/** The roles of the containers that hold a GPU's memory and ports (not the watchdog). */
const SERVING_ROLES = ["ray-head", "ray-worker", "vllm-rank0", "vllm-headless"];

/** A service of the stack that runs now, as its running containers and their arguments show it. */
export interface RunningService {
    readonly name: string;
    readonly executor: "ray" | "mp";
    /** The node of its Ray head or rank 0 (its API, its rendezvous). */
    readonly firstNode: string;
    /** The nodes where its serving containers run. */
    readonly nodes: readonly string[];
    /** Its running containers (serving and watchdog) on each node. */
    readonly containers: Readonly<Record<string, readonly string[]>>;
    /** From the arguments of `vllm serve`; undefined when they could not be read. */
    readonly servedName?: string;
    /** The model directory as the containers see it (`/models/<name>`). */
    readonly model?: string;
    readonly image?: string;
    readonly port?: number;
    readonly gpuMemoryUtilization?: number;
    /** mp: the rendezvous port on its first node. */
    readonly masterPort?: number;
    /** ray: the GCS port of its head. */
    readonly rayPort?: number;
}

/** The value after `flag` in `args` (`--port 8000` or `--port=8000`). */
function flagValue(args: readonly string[] | undefined, flag: string): string | undefined {
    if (!args) {
        return undefined;
    }
    const index = args.findIndex((arg) => arg === flag || arg.startsWith(`${flag}=`));
    if (index < 0) {
        return undefined;
    }
    return args[index] === flag ? args[index + 1] : args[index].slice(flag.length + 1);
}

const numberOf = (text: string | undefined) => (text !== undefined && text !== "" && Number.isFinite(Number(text)) ? Number(text) : undefined);

/**
 * The services of the stack running on the nodes read, by their containers' labels (a container
 * without a service label is the single-model form's service). A node seen by several services (one
 * observation each) counts once. Only running containers count: a stopped one holds neither memory nor ports.
 */
export function runningServices(observations: readonly NodeObservation[]): RunningService[] {
    const seen = new Set<string>();
    const byService = new Map<string, { node: string; container: NodeObservation["containers"][number]; observation: NodeObservation }[]>();
    for (const observation of observations) {
        for (const container of observation.containers) {
            const key = `${observation.node}/${container.id}`;
            if (seen.has(key) || !(container.running || container.restarting)) {
                continue;
            }
            seen.add(key);
            const service = container.labels[SERVICE_LABEL] ?? DEFAULT_SERVICE;
            const list = byService.get(service) ?? [];
            list.push({ node: observation.node, container, observation });
            byService.set(service, list);
        }
    }
    const services: RunningService[] = [];
    for (const [name, list] of byService) {
        const serving = list.filter((entry) => SERVING_ROLES.includes(entry.container.labels[ROLE_LABEL] ?? ""));
        const head = serving.find((entry) => ["ray-head", "vllm-rank0"].includes(entry.container.labels[ROLE_LABEL] ?? ""));
        if (serving.length === 0 || !head) {
            continue;
        }
        const executor = head.container.labels[ROLE_LABEL] === "ray-head" ? "ray" : "mp";
        const args =
            executor === "ray" ? (head.observation.serveArgs?.[head.container.name] ?? head.observation.serve?.args) : fromServe(head.container.args);
        const containers: Record<string, string[]> = {};
        for (const entry of list) {
            (containers[entry.node] ??= []).push(entry.container.name);
        }
        services.push({
            name,
            executor,
            firstNode: head.node,
            nodes: [...new Set(serving.map((entry) => entry.node))],
            containers,
            servedName: flagValue(args, "--served-model-name") ?? (args?.[0] === "serve" ? args[1] : undefined),
            model: args?.[0] === "serve" ? args[1] : undefined,
            image: head.container.image,
            port: numberOf(flagValue(args, "--port")),
            gpuMemoryUtilization: numberOf(flagValue(args, "--gpu-memory-utilization")),
            masterPort: executor === "mp" ? numberOf(flagValue(args, "--master-port")) : undefined,
            rayPort: executor === "ray" ? numberOf(flagValue(head.container.args, "--port")) : undefined,
        });
    }
    return services;
}

/** An mp rank's arguments from `serve` on: its container runs `<keeper> vllm serve ...` (containers.ts). */
function fromServe(args: readonly string[] | undefined): readonly string[] | undefined {
    const serve = args?.indexOf("serve") ?? -1;
    return serve < 0 ? args : args!.slice(serve);
}

/** A service of the config, as the swap planner sees it. */
export interface SwapService {
    readonly name: string;
    /** The stack's config as this service sees it (its utilization as the budgets gave it). */
    readonly config: FleetConfig;
    /** Where its keys live ("" in the single-model form, else `services[i].`). */
    readonly keyPrefix: string;
}

/** Stopping a service that leaves the config on one of its nodes, before a new service starts. */
export interface SwapStop {
    /** The service that leaves. */
    readonly service: string;
    readonly node: string;
    /** Its running containers there, the watchdog first (it would start vLLM again). */
    readonly containers: readonly string[];
}

/** A served name moving from a service that leaves to a new one. */
export interface Swap {
    readonly servedName: string;
    readonly from: string;
    readonly to: string;
    readonly mode: "blue-green" | "stop-first";
    /** Why not blue/green: one line per node and cause. */
    readonly reasons: readonly string[];
}

export interface SwapPlan {
    readonly swaps: readonly Swap[];
    /**
     * For each new service, the stops its serving containers wait for (none: it starts right away);
     * each leaving service's stops begin with its first node's (its watchdog and its head or rank 0).
     */
    readonly stopsBefore: Readonly<Record<string, readonly SwapStop[]>>;
    /** For `pulumi.log.warn`: downtime that preview announces. */
    readonly warnings: readonly string[];
    /** For `pulumi.log.info`: blue/green swaps and why they can be. */
    readonly notes: readonly string[];
}

/** Thrown when `swap: refuseDowntime` and a swap would stop the old service first. */
export class SwapError extends FleetError {}

/** What {@link planSwaps} plans from. */
export interface SwapInput {
    /** The services of the config, in its order. */
    readonly services: readonly SwapService[];
    /** What runs now ({@link runningServices}). */
    readonly running: readonly RunningService[];
    /** Each node's memory as the budgets count it (fit: MemTotal less the OS reserve on GB10). */
    readonly memoryBytes: (node: string) => number;
    /** `swap`: stop the old service first when both cannot run side by side, or refuse. */
    readonly policy: "stopFirst" | "refuseDowntime";
}

const fraction = (value: number) => String(+value.toFixed(3));

/** A port a service binds on a node, and what it is. */
interface BoundPort {
    readonly port: number;
    readonly what: string;
}

/** The ports `service` (new) binds on `node`, by key. */
function plannedPorts(service: SwapService, node: string): BoundPort[] {
    const { config } = service;
    if (config.nodes[0]?.name !== node) {
        return [];
    }
    const key = (path: string) => `vllm-fleet:${service.keyPrefix}${path}`;
    return [
        { port: config.vllm.port, what: `${key("vllm.port")} of ${service.name}` },
        config.executor === "mp" ? { port: config.vllm.masterPort, what: `${key("vllm.masterPort")} of ${service.name}` } : { port: config.ray.port, what: `${key("ray.port")} of ${service.name}` },
    ];
}

/** The ports a running service binds on `node`, as its arguments say. */
function runningPorts(service: RunningService, node: string): BoundPort[] {
    if (service.firstNode !== node) {
        return [];
    }
    const ports: BoundPort[] = [];
    if (service.port !== undefined) {
        ports.push({ port: service.port, what: `the API port of ${service.name}` });
    }
    if (service.masterPort !== undefined) {
        ports.push({ port: service.masterPort, what: `the mp rendezvous port of ${service.name}` });
    }
    if (service.rayPort !== undefined) {
        ports.push({ port: service.rayPort, what: `the Ray GCS port of ${service.name}` });
    }
    return ports;
}

/** Why `leaving` (running) and `arriving` (new) cannot share `node`: ports and Ray clusters, one line each. */
function portConflicts(leaving: RunningService, arriving: SwapService, node: string): string[] {
    const reasons: string[] = [];
    if (leaving.executor === "ray" && arriving.config.executor === "ray") {
        reasons.push(`${node}: two Ray clusters on one node (Ray's ports 10001-19999 and 52365 of ${leaving.name}'s Ray would be taken twice)`);
        return reasons;
    }
    const theirs = runningPorts(leaving, node);
    const ours = plannedPorts(arriving, node);
    for (const own of ours) {
        const taken = theirs.filter((other) => other.port === own.port);
        if (taken.length > 0) {
            reasons.push(`${node}: port ${own.port}, ${own.what}, is ${taken.map((other) => other.what).join(" and ")}, held while it runs`);
        } else if (leaving.executor === "ray" && rayTakes(own.port, true)) {
            reasons.push(`${node}: port ${own.port}, ${own.what}, is among ${rayTakes(own.port, true)} of ${leaving.name}'s Ray`);
        }
    }
    if (arriving.config.executor === "ray") {
        for (const other of theirs) {
            const byRay = rayTakes(other.port, true);
            if (byRay) {
                reasons.push(`${node}: ${other.what} (${other.port}) is among ${byRay} that ${arriving.name}'s Ray takes`);
            }
        }
    }
    return reasons;
}

/** How long a model is not served when its service stops first: the bound the new service's readiness gate waits. */
function downtime(arriving: SwapService): string {
    const seconds = arriving.config.timeouts.vllmReadySeconds;
    return `at most ${seconds} s (timeouts.vllmReadySeconds, the bound of ${arriving.name}'s readiness gate; a start takes as long as loading the model and compiling)`;
}

/**
 * The swaps of this run and what they need: for each new service, the services that leave the
 * config and must stop first on the nodes they share (memory or ports), with a warning naming the
 * service, the model name, the reason and the downtime; a note for each blue/green swap; a warning
 * for a service that changes its served name or model in place. Throws SwapError with
 * `policy: refuseDowntime` where a swap would stop the old service first.
 */
export function planSwaps(input: SwapInput): SwapPlan {
    const configured = new Set(input.services.map((service) => service.name));
    const runningNames = new Set(input.running.map((service) => service.name));
    const leaving = input.running.filter((service) => !configured.has(service.name));
    const arriving = input.services.filter((service) => !runningNames.has(service.name));
    const nodesOf = (service: SwapService) => service.config.nodes.map((node) => node.name);
    const utilizationOf = (service: RunningService) => service.gpuMemoryUtilization ?? VLLM_DEFAULT_UTILIZATION;

    // Memory while both run: on each node, every share planned there and every leaving service's.
    const memoryReasons = new Map<string, string>();
    const nodes = new Set(leaving.flatMap((service) => service.nodes));
    for (const node of nodes) {
        const planned = input.services.filter((service) => nodesOf(service).includes(node));
        const old = leaving.filter((service) => service.nodes.includes(node));
        const plannedSum = planned.reduce((sum, service) => sum + service.config.vllm.gpuMemoryUtilization, 0);
        const oldSum = old.reduce((sum, service) => sum + utilizationOf(service), 0);
        if (plannedSum + oldSum > GIVEN_BUDGET + 1e-9 && planned.some((service) => arriving.includes(service))) {
            const memory = input.memoryBytes(node);
            const share = (value: number) => `${fraction(value)} (${formatGiB(memory * value)})`;
            const olds = old
                .map((service) => `${service.name} holds ${share(utilizationOf(service))}${service.gpuMemoryUtilization === undefined ? " (vLLM's default, its arguments unread)" : ""}`)
                .join(", ");
            const news = planned.map((service) => `${service.name} ${fraction(service.config.vllm.gpuMemoryUtilization)}`).join(" + ");
            memoryReasons.set(
                node,
                `${node} (${formatGiB(memory)}): memory: ${olds} while it runs, and the services planned there take ${share(plannedSum)} (${news}): ${fraction(plannedSum + oldSum)} of the node together, more than ${GIVEN_BUDGET}`,
            );
        }
    }

    const swaps: Swap[] = [];
    const warnings: string[] = [];
    const notes: string[] = [];
    const stopsBefore: Record<string, SwapStop[]> = {};
    for (const service of arriving) {
        const own = nodesOf(service);
        for (const old of leaving) {
            const shared = old.nodes.filter((node) => own.includes(node));
            const reasons = shared.flatMap((node) => [...(memoryReasons.has(node) ? [memoryReasons.get(node)!] : []), ...portConflicts(old, service, node)]);
            const servedName = service.config.model.servedName;
            const isSwap = old.servedName === servedName;
            if (reasons.length === 0) {
                if (isSwap) {
                    swaps.push({ servedName, from: old.name, to: service.name, mode: "blue-green", reasons: [] });
                    notes.push(
                        `swap of model "${servedName}" from service ${old.name} to service ${service.name}: blue/green: ${service.name} starts ${shared.length > 0 ? `beside ${old.name} on ${shared.join(", ")} (memory and ports fit both)` : `on its own nodes`} and serves before ${old.name}'s containers go, at the end of the up`,
                    );
                }
                continue;
            }
            if (isSwap && input.policy === "refuseDowntime") {
                throw new SwapError(
                    `swap of model "${servedName}" from service ${old.name} to service ${service.name} refused (vllm-fleet:swap is refuseDowntime): they cannot run side by side, and stopping ${old.name} first would leave "${servedName}" unserved: ${reasons.join("; ")}; give ${service.name} other nodes, another port or a smaller vllm.gpuMemoryUtilization (or set vllm-fleet:swap to stopFirst)`,
                );
            }
            // Its first node first (the watchdog and the head or rank 0), then the others.
            const stops = [old.firstNode, ...old.nodes.filter((node) => node !== old.firstNode)].map((node) => ({
                service: old.name,
                node,
                containers: [...(old.containers[node] ?? [])].sort((a, b) => Number(b.endsWith("-watchdog")) - Number(a.endsWith("-watchdog"))),
            }));
            (stopsBefore[service.name] ??= []).push(...stops);
            const stopped = stops.map((stop) => `${stop.node}: ${stop.containers.join(", ")}`).join("; ");
            if (isSwap) {
                swaps.push({ servedName, from: old.name, to: service.name, mode: "stop-first", reasons });
                warnings.push(
                    `swap of model "${servedName}" from service ${old.name} to service ${service.name} stops ${old.name} first (not blue/green): they cannot run side by side: ${reasons.join("; ")}. ` +
                        `up stops ${old.name}'s containers (${stopped}) before ${service.name}'s start, so "${servedName}" is not served until ${service.name} is ready: ${downtime(service)}. ` +
                        `For blue/green, give ${service.name} other nodes, another port or a smaller vllm.gpuMemoryUtilization so that both fit`,
                );
            } else {
                warnings.push(
                    `service ${service.name} starts only once ${old.name}, which leaves the config, has stopped (${stopped}): they cannot run side by side: ${reasons.join("; ")}`,
                );
            }
        }
    }

    // In place: the same service serving another name or model is replaced, with downtime.
    for (const service of input.services) {
        const now = input.running.find((running) => running.name === service.name);
        if (!now) {
            continue;
        }
        const changes: string[] = [];
        if (now.servedName !== undefined && now.servedName !== service.config.model.servedName) {
            changes.push(`served name "${now.servedName}" -> "${service.config.model.servedName}"`);
        }
        if (now.model !== undefined && now.model !== containerModelPath(service.config)) {
            changes.push(`model ${now.model} -> ${containerModelPath(service.config)}`);
        }
        if (changes.length > 0) {
            const was = now.servedName ?? service.config.model.servedName;
            warnings.push(
                `service ${service.name} changes what it serves in place (${changes.join(", ")}): a replacement with downtime, "${was}" is not served from its stop until ${service.name} is ready again: ${downtime(service)}. ` +
                    `For blue/green, declare the new model as a new service (e.g. ${service.name}-2, on nodes and a port where both fit) and remove ${service.name} in the same up`,
            );
        }
    }
    return { swaps, stopsBefore, warnings, notes };
}
