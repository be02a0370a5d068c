/**
 * Memory budgets across services (issue 23), pure: several services may share a node (a GB10's
 * unified memory), and vLLM's `--gpu-memory-utilization` is a fraction of the node's whole memory
 * that a second vLLM on the node needs free when it starts. {@link planBudgets} gives each service a
 * utilization so that, on every node, the services placed there sum to at most the node's budget and
 * each one's share holds its least need (planRanks: weights per rank + runtime overhead + one
 * `max-model-len` sequence of KV cache), or refuses with the numbers per node and per service.
 *
 * The units are those of plan.ts: a node's `memoryBytes` is already MemTotal less the OS reserve on
 * GB10, and a service's usable bytes on a node are `memoryBytes × utilization`.
 *
 * Rules:
 * - Utilizations the user gave are kept; on a node they may sum to at most 1.0.
 * - The others ("automatic") split what is left of {@link AUTOMATIC_BUDGET} after the given ones on
 *   each node, in proportion to their least needs there, or equally when one of them has no known
 *   need (its config.json is not known at plan time). A service's utilization is the smallest of its
 *   shares over its nodes, rounded down to 3 decimals. A service alone on all its nodes therefore
 *   gets 0.9, today's default, and planFit alone speaks for it (same numbers, same messages).
 * - A node a service's request gives no rank holds none of its memory and is not budgeted for it.
 */
import { FitError } from "./model";
import { FitNode, FitPlan, FitRequest, formatGiB, planFit, planRanks, textTable } from "./plan";

/** What the automatic utilizations of a node may sum to with the given ones: today's default. */
export const AUTOMATIC_BUDGET = 0.9;
/** What the given utilizations of a node may sum to. */
export const GIVEN_BUDGET = 1.0;

export interface BudgetService {
    /** Service name. */
    readonly name: string;
    /** Names of the nodes it runs on. */
    readonly nodes: readonly string[];
    /** The user's vllm.gpuMemoryUtilization for it, when given. */
    readonly utilization?: number;
    /** The fit request of the service (planFit's FitRequest without gpuMemoryUtilization), when the
     *  model's config.json is known at plan time; undefined when not (e.g. model downloaded later). */
    readonly request?: Omit<FitRequest, "gpuMemoryUtilization">;
}

/** One service on one node of a {@link BudgetPlan}. */
export interface BudgetShare {
    readonly name: string;
    /** The service's utilization (the same on each of its nodes). */
    readonly utilization: number;
    /** `memoryBytes × utilization`, as planFit counts usable bytes. */
    readonly shareBytes: number;
    /** Its least need on this node; undefined when its request is not known. */
    readonly needBytes?: number;
    /** true when the user gave the utilization. */
    readonly given: boolean;
}

export interface BudgetPlan {
    /** The utilization each service is given (vLLM's --gpu-memory-utilization), by service name. */
    readonly utilization: Readonly<Record<string, number>>;
    /** Per node: each service placed there with its share (fraction and bytes) and its minimum need. */
    readonly nodes: readonly { name: string; memoryBytes: number; services: readonly BudgetShare[] }[];
    /** planFit's plan of each service whose request is known, at its utilization, by service name. */
    readonly fits: Readonly<Record<string, FitPlan>>;
}

/** The key of a service's setting, as the error messages name it. */
function serviceKey(service: string, key: string): string {
    return `vllm-fleet:services[${service}].${key}`;
}

const floor3 = (fraction: number) => Math.floor(fraction * 1000 + 1e-9) / 1000;
const ceil3 = (fraction: number) => Math.ceil(fraction * 1000 - 1e-9) / 1000;
const fraction = (value: number) => String(+value.toFixed(3));

/** The least need of each service on each node its request gives ranks, by service then node name. */
function leastNeeds(services: readonly BudgetService[]): Map<string, Map<string, number>> {
    const needs = new Map<string, Map<string, number>>();
    for (const service of services) {
        if (service.request === undefined) {
            continue;
        }
        const ranks = planRanks(service.request);
        const byNode = new Map<string, number>();
        service.request.nodes.forEach((node, index) => {
            const need = ranks.nodes[index];
            if (need === undefined) {
                return;
            }
            if (!service.nodes.includes(node.name)) {
                throw new FitError([
                    `the fit request of service ${service.name} places ranks ${need.ranks.join(",")} on ${node.name}, which is not among its nodes (${service.nodes.join(", ")}): check ${serviceKey(service.name, "nodes")}`,
                ]);
            }
            byNode.set(node.name, need.needBytes);
        });
        needs.set(service.name, byNode);
    }
    return needs;
}

/** Refuses given utilizations outside (0, 1] and nodes the stack does not have. */
function checkServices(services: readonly BudgetService[], nodes: readonly FitNode[]): void {
    const problems: string[] = [];
    const names = new Set(nodes.map((node) => node.name));
    for (const service of services) {
        const { utilization } = service;
        if (utilization !== undefined && !(utilization > 0 && utilization <= 1)) {
            problems.push(`gpu-memory-utilization of service ${service.name} is ${utilization}, expected a fraction in (0, 1]: set ${serviceKey(service.name, "vllm.gpuMemoryUtilization")}`);
        }
        const unknown = service.nodes.filter((node) => !names.has(node));
        if (unknown.length > 0) {
            problems.push(`service ${service.name} is placed on ${unknown.join(", ")}, not among the nodes (${[...names].join(", ")}): check ${serviceKey(service.name, "nodes")}`);
        }
    }
    if (problems.length > 0) {
        throw new FitError(problems, "the services cannot be budgeted");
    }
}

interface Placed {
    readonly service: BudgetService;
    /** Least need on the node, bytes; undefined when not known. */
    readonly needBytes?: number;
}

/** The services on a node: those placed there, less those whose known request gives it no rank. */
function placedOn(node: FitNode, services: readonly BudgetService[], needs: Map<string, Map<string, number>>): Placed[] {
    return services
        .filter((service) => service.nodes.includes(node.name))
        .map((service) => ({ service, needBytes: needs.get(service.name)?.get(node.name), known: needs.has(service.name) }))
        .filter((placed) => !placed.known || placed.needBytes !== undefined)
        .map(({ service, needBytes }) => ({ service, needBytes }));
}

/** Each automatic service's share of the node, as a fraction of its memory. */
function automaticShares(node: FitNode, placed: readonly Placed[]): Map<string, number> {
    const given = placed.reduce((sum, entry) => sum + (entry.service.utilization ?? 0), 0);
    const automatic = placed.filter((entry) => entry.service.utilization === undefined);
    // Below 0.9, this is also below 1.0 less the given ones.
    const pool = Math.max(0, AUTOMATIC_BUDGET - given);
    const needs = automatic.map((entry) => entry.needBytes);
    const total = needs.reduce<number>((sum, need) => sum + (need ?? 0), 0);
    const proportional = needs.every((need) => need !== undefined) && total > 0;
    return new Map(automatic.map((entry) => [entry.service.name, proportional ? (pool * (entry.needBytes ?? 0)) / total : pool / automatic.length]));
}

/** What is wrong on a node, as one problem, or undefined when every service there fits. */
function nodeProblem(node: FitNode, placed: readonly Placed[], utilization: Readonly<Record<string, number>>, smallestAt: ReadonlyMap<string, string>): string | undefined {
    const given = placed.filter((entry) => entry.service.utilization !== undefined);
    const givenSum = given.reduce((sum, entry) => sum + (entry.service.utilization ?? 0), 0);
    const overGiven = givenSum > GIVEN_BUDGET + 1e-9;
    const short = placed.filter((entry) => {
        const share = Math.floor(node.memoryBytes * utilization[entry.service.name]);
        return utilization[entry.service.name] <= 0 || (entry.needBytes !== undefined && entry.needBytes > share);
    });
    if (!overGiven && short.length === 0) {
        return undefined;
    }
    const rows = placed.map((entry) => {
        const name = entry.service.name;
        const need =
            entry.needBytes === undefined
                ? "need unknown (its config.json is not known at plan time)"
                : `needs ${formatGiB(entry.needBytes)} (${fraction(ceil3(entry.needBytes / node.memoryBytes))})`;
        const from = smallestAt.get(name);
        const kind = entry.service.utilization !== undefined ? "given" : from !== undefined && from !== node.name ? `automatic: its smallest share, on ${from}` : "automatic";
        return `${name} ${need}, gets ${formatGiB(Math.floor(node.memoryBytes * utilization[name]))} (${fraction(utilization[name])}, ${kind})`;
    });
    const automatic = placed.length - given.length;
    const budget = overGiven
        ? `the given utilizations sum to ${fraction(givenSum)}, more than the node's whole memory (${GIVEN_BUDGET})`
        : automatic > 0
          ? `the automatic shares split ${fraction(Math.max(0, AUTOMATIC_BUDGET - givenSum))}${givenSum > 0 ? ` (${AUTOMATIC_BUDGET} less the given ${fraction(givenSum)})` : ""}${placed.some((entry) => entry.service.utilization === undefined && entry.needBytes === undefined) ? " equally (a need is unknown)" : " in proportion to their needs"}`
          : `the given utilizations sum to ${fraction(givenSum)}`;
    const remedies: string[] = [];
    if (overGiven) {
        remedies.push(`lower ${given.map((entry) => serviceKey(entry.service.name, "vllm.gpuMemoryUtilization")).join(" or ")} so that they sum to at most ${GIVEN_BUDGET}`);
    }
    const knownNeeds = placed.reduce((sum, entry) => sum + (entry.needBytes ?? 0), 0) / node.memoryBytes;
    for (const entry of short) {
        const key = serviceKey(entry.service.name, "vllm.gpuMemoryUtilization");
        if (entry.needBytes === undefined) {
            remedies.push(`set ${key} (with its model unknown at plan time, it gets an equal share)`);
        } else if (knownNeeds <= GIVEN_BUDGET) {
            remedies.push(`set ${key} to at least ${fraction(ceil3(entry.needBytes / node.memoryBytes))} with the others' lowered to leave it room`);
        }
    }
    const shortKnown = short.filter((entry) => entry.needBytes !== undefined).map((entry) => entry.service.name);
    if (shortKnown.length > 0) {
        remedies.push(`lower ${shortKnown.map((name) => serviceKey(name, "vllm.maxModelLen")).join(" or ")} (one sequence of KV cache is part of the need)`);
    }
    remedies.push(`give one of the services other nodes (${placed.map((entry) => serviceKey(entry.service.name, "nodes")).join(", ")})`);
    return `${node.name} (${formatGiB(node.memoryBytes)}) cannot give every service placed there its least need (weights per rank + runtime overhead + one max-model-len sequence of KV cache): ${rows.join("; ")}; ${budget}; expected each share to hold its need: ${remedies.join(", or ")}`;
}

/**
 * Gives each service its `--gpu-memory-utilization` so that the services sharing a node fit in it,
 * or throws {@link FitError} with one problem per node that cannot hold them (and planFit's errors
 * for a service whose request does not fit at its utilization).
 */
export function planBudgets(services: readonly BudgetService[], nodes: readonly FitNode[]): BudgetPlan {
    checkServices(services, nodes);
    const needs = leastNeeds(services);
    const placedByNode = nodes.map((node) => ({ node, placed: placedOn(node, services, needs) }));

    const utilization: Record<string, number> = {};
    for (const service of services) {
        if (service.utilization !== undefined) {
            utilization[service.name] = service.utilization;
        }
    }
    const smallest = new Map<string, number>();
    const smallestAt = new Map<string, string>();
    for (const { node, placed } of placedByNode) {
        for (const [name, share] of automaticShares(node, placed)) {
            if (share < (smallest.get(name) ?? Number.POSITIVE_INFINITY)) {
                smallest.set(name, share);
                smallestAt.set(name, node.name);
            }
        }
    }
    for (const service of services) {
        utilization[service.name] ??= floor3(smallest.get(service.name) ?? AUTOMATIC_BUDGET);
    }

    // A service alone on all its nodes is left to planFit, whose messages say more about one model.
    const alone = (name: string) => placedByNode.every(({ placed }) => placed.length === 1 || !placed.some((entry) => entry.service.name === name));
    const problems = placedByNode
        .filter(({ placed }) => placed.length > 1 || (placed.length === 1 && !alone(placed[0].service.name)))
        .map(({ node, placed }) => nodeProblem(node, placed, utilization, smallestAt))
        .filter((problem): problem is string => problem !== undefined);
    if (problems.length > 0) {
        throw new FitError(problems, "the services do not fit their nodes");
    }

    const fits: Record<string, FitPlan> = {};
    for (const service of services) {
        if (service.request !== undefined) {
            fits[service.name] = planFit({ ...service.request, gpuMemoryUtilization: utilization[service.name] });
        }
    }
    return {
        utilization,
        fits,
        nodes: placedByNode
            .filter(({ placed }) => placed.length > 0)
            .map(({ node, placed }) => ({
                name: node.name,
                memoryBytes: node.memoryBytes,
                services: placed.map((entry) => ({
                    name: entry.service.name,
                    utilization: utilization[entry.service.name],
                    shareBytes: Math.floor(node.memoryBytes * utilization[entry.service.name]),
                    needBytes: entry.needBytes,
                    given: entry.service.utilization !== undefined,
                })),
            })),
    };
}

/** true when some node holds several services: then {@link describeBudgets} is worth printing. */
export function sharesNodes(plan: BudgetPlan): boolean {
    return plan.nodes.some((node) => node.services.length > 1);
}

/** The budgets as a short table (GiB with one decimal), for `pulumi.log.info` during preview. */
export function describeBudgets(plan: BudgetPlan): string {
    const rows = [
        ["node", "memory", "service", "utilization", "share", "least need"],
        ...plan.nodes.flatMap((node) =>
            node.services.map((service, index) => [
                index === 0 ? node.name : "",
                index === 0 ? formatGiB(node.memoryBytes) : "",
                service.name,
                `${service.utilization} (${service.given ? "given" : "automatic"})`,
                formatGiB(service.shareBytes),
                service.needBytes === undefined ? "unknown" : formatGiB(service.needBytes),
            ]),
        ),
    ];
    return `budgets: gpu-memory-utilization per service; automatic shares split ${AUTOMATIC_BUDGET} of a node less the given ones, by least need\n${textTable(rows)}`;
}
