/**
 * `vllm-fleet:services`: the models a stack serves, each on some of its nodes with its own image,
 * executor, parallelism, vLLM and Ray settings; the single-model form (the top-level keys) is one
 * service named `vllm` on every node. The schema of an entry, the services resolved over the stack's
 * nodes, and the checks of one service and across services (the stack's config as one service
 * sees it: serviceConfig in schema.ts). Pure.
 */
import { z } from "zod";
import { DEFAULT_SERVICE } from "../names";
import { cacheIssues } from "./cache";
import { DEFAULT_GPU_MEMORY_UTILIZATION, FleetNode, NAME, executorSchema, imageSchema, parallelismSchema, raySchema, serviceVllmSchema, vllmSchema } from "./fields";
import { modelSchema, modelSchemaAt } from "./model";
import { CrossKeyIssue, portIssues, rayTakes } from "./ports";

/** The top-level keys of the single-model form: set together with `services`, the stack is refused. */
export const ONE_MODEL_KEYS = ["image", "model", "executor", "parallelism", "vllm", "ray"] as const;

export const serviceSchema = z.strictObject({
    name: z.string().regex(NAME, "a lowercase name of letters, digits and '-' (at most 32), e.g. coder"),
    /** The names of the service's nodes (from `nodes`); default: every node. */
    nodes: z.array(z.string()).min(1, "at least one node name (leave nodes out for every node)").optional(),
    image: imageSchema,
    executor: executorSchema,
    /** Its Hub messages say "the service's model.source" (the issue's key names the service). */
    model: modelSchemaAt("the service's model"),
    parallelism: parallelismSchema,
    vllm: serviceVllmSchema,
    ray: raySchema,
});

export const servicesSchema = z.array(serviceSchema).min(1, "at least one service").max(16, "at most 16 services");

/** An entry of `services` as parsed (or the single-model form's keys), before its nodes are resolved. */
export type ServiceInput = z.output<typeof serviceSchema>;

export type VllmConfig = z.output<typeof vllmSchema>;

/** One service of the stack: a model on some of its nodes. */
export interface ServiceConfig {
    readonly name: string;
    /** The service's nodes, in the stack's node order. */
    readonly nodes: readonly FleetNode[];
    readonly image: z.output<typeof imageSchema>;
    readonly executor: "ray" | "mp";
    readonly model: z.output<typeof modelSchema>;
    /** Resolved over the service's nodes (tensor: the node count / pipeline by default). */
    readonly parallelism: { readonly tensor: number; readonly pipeline: number };
    /** gpuMemoryUtilization is unset when a service leaves it to the planner. */
    readonly vllm: Omit<VllmConfig, "gpuMemoryUtilization"> & { readonly gpuMemoryUtilization?: number };
    readonly ray: { readonly port: number };
    /** True when gpuMemoryUtilization was given by the user (the single-model form: always, default 0.9). */
    readonly gpuMemoryUtilizationSet: boolean;
    /** Where its keys live: "" in the single-model form (`vllm.maxModelLen`), else `services[i].`. */
    readonly keyPrefix: string;
}

/** The service's settings' keys in `text` as its form spells them (`vllm-fleet:services[2].vllm.maxModelLen`). */
export function inServiceKeys(text: string, service: Pick<ServiceConfig, "keyPrefix">): string {
    return service.keyPrefix === "" ? text : text.replace(new RegExp(`vllm-fleet:(${ONE_MODEL_KEYS.join("|")})\\b`, "g"), `vllm-fleet:${service.keyPrefix}$1`);
}

/** TP and PP; by default tensor parallelism spans every node of the service (one GPU per DGX Spark). */
export function resolveParallelism(parallelism: { readonly tensor?: number; readonly pipeline: number }, nodeCount: number): { readonly tensor: number; readonly pipeline: number } {
    const tensor = parallelism.tensor ?? Math.max(1, Math.floor(nodeCount / parallelism.pipeline));
    return { tensor, pipeline: parallelism.pipeline };
}

/** The nodes named (every node when `names` is undefined), in the stack's order. */
function serviceNodes(nodes: readonly FleetNode[], names: readonly string[] | undefined): FleetNode[] {
    return names === undefined ? [...nodes] : nodes.filter((node) => names.includes(node.name));
}

/** A service over the stack's nodes. `oneModel`: the single-model form's service (its memory share always set). */
export function resolveService(input: ServiceInput, nodes: readonly FleetNode[], oneModel: boolean, index = 0): ServiceConfig {
    const own = serviceNodes(nodes, input.nodes);
    return {
        name: input.name,
        nodes: own,
        image: input.image,
        executor: input.executor,
        model: input.model,
        parallelism: resolveParallelism(input.parallelism, own.length),
        vllm: oneModel ? { ...input.vllm, gpuMemoryUtilization: input.vllm.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION } : input.vllm,
        ray: input.ray,
        gpuMemoryUtilizationSet: oneModel || input.vllm.gpuMemoryUtilization !== undefined,
        keyPrefix: oneModel ? "" : `services[${index}].`,
    };
}

/** The single-model form's keys as its one service `vllm`. */
export function oneModelService(keys: Omit<ServiceInput, "name" | "nodes">): ServiceInput {
    return { name: DEFAULT_SERVICE, image: keys.image, executor: keys.executor, model: keys.model, parallelism: keys.parallelism, vllm: keys.vllm, ray: keys.ray };
}

/**
 * The checks of one service on its nodes (the single-model form: `prefix` empty, every node):
 * a tool choice without a parser, the mp layout, the cache directory across its model, its ports.
 */
export function serviceIssues(
    service: ServiceInput,
    nodes: readonly FleetNode[],
    cache: { readonly enabled: boolean; readonly dir: string },
    prefix: readonly (string | number)[],
): CrossKeyIssue[] {
    const at = (...path: (string | number)[]) => [...prefix, ...path];
    const issues: CrossKeyIssue[] = [];
    if (service.vllm.enableAutoToolChoice && !service.vllm.toolCallParser) {
        issues.push({
            path: at("vllm", "toolCallParser"),
            value: undefined,
            expected: "a tool-call parser when vllm.enableAutoToolChoice is true (vLLM refuses one without the other)",
        });
    }
    const parallelism = resolveParallelism(service.parallelism, nodes.length);
    const worldSize = parallelism.tensor * parallelism.pipeline;
    if (service.executor === "mp" && nodes.length > 0 && worldSize % nodes.length !== 0) {
        const count = prefix.length === 0 ? `the number of nodes (${nodes.length})` : `the number of the service's nodes (${nodes.length})`;
        issues.push({
            path: at("parallelism"),
            value: parallelism,
            expected: `TP×PP (${worldSize}) divisible by ${count} with the mp executor, which runs the same number of ranks on every node`,
        });
    }
    const modelKey = prefix.length === 0 ? "model.path" : `${keyText([...prefix, "model", "path"])}`;
    issues.push(...cacheIssues(cache, service.model.path, modelKey));
    for (const issue of portIssues(service.vllm.port, service.vllm.masterPort, service.ray.port, nodes, service.executor)) {
        issues.push({ ...issue, path: at(...issue.path) });
    }
    return issues;
}

/** A path below the namespace as the user writes it: `services[1].model.path`. */
function keyText(path: readonly (string | number)[]): string {
    return path.map((part, index) => (typeof part === "number" ? `[${part}]` : index === 0 ? part : `.${part}`)).join("");
}

/** The ports a service takes on its nodes, by key (the mp rendezvous port with mp, Ray's with ray). */
function servicePorts(service: ServiceInput): { key: [string, string]; port: number }[] {
    const ports: { key: [string, string]; port: number }[] = [{ key: ["vllm", "port"], port: service.vllm.port }];
    ports.push(service.executor === "mp" ? { key: ["vllm", "masterPort"], port: service.vllm.masterPort } : { key: ["ray", "port"], port: service.ray.port });
    return ports;
}

/**
 * The checks across the entries of `services`: names used twice, node names not in `nodes` (or
 * listed twice), TP×PP beyond the service's GPUs, and, on a node two services share, two Ray
 * clusters or one port taken twice.
 */
export function acrossServicesIssues(services: readonly ServiceInput[], nodes: readonly FleetNode[]): CrossKeyIssue[] {
    const issues: CrossKeyIssue[] = [];
    const known = nodes.map((node) => node.name);
    const firstNamed = new Map<string, number>();
    services.forEach((service, index) => {
        const first = firstNamed.get(service.name);
        if (first !== undefined) {
            issues.push({ path: ["services", index, "name"], value: service.name, expected: `a name not already used by vllm-fleet:services[${first}]` });
        } else {
            firstNamed.set(service.name, index);
        }
        (service.nodes ?? []).forEach((name, position) => {
            const earlier = service.nodes!.indexOf(name);
            if (!known.includes(name)) {
                issues.push({ path: ["services", index, "nodes", position], value: name, expected: `the name of a node in vllm-fleet:nodes (${known.join(", ")})` });
            } else if (earlier !== position) {
                issues.push({ path: ["services", index, "nodes", position], value: name, expected: `a node not already listed at vllm-fleet:services[${index}].nodes[${earlier}]` });
            }
        });
        const own = serviceNodes(nodes, service.nodes);
        const parallelism = resolveParallelism(service.parallelism, own.length);
        const worldSize = parallelism.tensor * parallelism.pipeline;
        if (own.length > 0 && worldSize > own.length) {
            issues.push({
                path: ["services", index, "parallelism"],
                value: parallelism,
                expected: `TP×PP (${worldSize}) at most the GPUs of service ${service.name}'s nodes (${own.length}: one per DGX Spark); give it more nodes or less parallelism`,
            });
        }
    });
    services.forEach((later, j) => {
        const laterNodes = serviceNodes(nodes, later.nodes).map((node) => node.name);
        services.slice(0, j).forEach((earlier, i) => {
            const shared = serviceNodes(nodes, earlier.nodes).filter((node) => laterNodes.includes(node.name)).map((node) => node.name);
            if (shared.length > 0) {
                issues.push(...sharedNodeIssues(earlier, i, later, j, shared));
            }
        });
    });
    return issues;
}

/** What two services on the same nodes (`shared`) collide in: Ray clusters, ports. `i` < `j`; the issues are the later one's. */
function sharedNodeIssues(earlier: ServiceInput, i: number, later: ServiceInput, j: number, shared: readonly string[]): CrossKeyIssue[] {
    const issues: CrossKeyIssue[] = [];
    const other = `vllm-fleet:services[${i}] (${earlier.name})`;
    const where = `${shared.length === 1 ? "node" : "nodes"} ${shared.join(", ")}`;
    const bothRay = earlier.executor === "ray" && later.executor === "ray";
    if (bothRay) {
        issues.push({
            path: ["services", j, "executor"],
            value: later.executor,
            expected:
                `mp, or nodes apart from ${other}, which runs Ray on ${where} too: two Ray clusters on one node: Ray's internal ports (10001-19999, 52365) ` +
                "and its object store would collide; give one of them executor mp or other nodes",
        });
    }
    // Two Ray clusters are refused above, their GCS ports with them.
    const earlierPorts = servicePorts(earlier).filter(({ key }) => !bothRay || key[0] !== "ray");
    for (const { key, port } of servicePorts(later).filter(({ key }) => !bothRay || key[0] !== "ray")) {
        const taken = earlierPorts.filter((theirs) => theirs.port === port).map((theirs) => `vllm-fleet:services[${i}].${theirs.key.join(".")}`);
        // An mp service beside a Ray cluster: its ports may not be the ones Ray's workers take (and the reverse).
        const byRay = later.executor === "mp" && earlier.executor === "ray" ? rayTakes(port, true) : undefined;
        if (byRay) {
            taken.push(`${byRay} of ${other}'s Ray`);
        }
        if (taken.length > 0) {
            issues.push({
                path: ["services", j, ...key],
                value: port,
                expected: `a port other than ${taken.join(" and ")}, on ${where} that ${other} shares (the serving containers use the host's network)`,
            });
        }
    }
    if (later.executor === "ray" && earlier.executor === "mp") {
        for (const { key, port } of servicePorts(earlier)) {
            const byRay = rayTakes(port, true);
            if (byRay) {
                issues.push({
                    path: ["services", j, "executor"],
                    value: later.executor,
                    expected: `mp, or nodes apart from ${other}, whose ${key.join(".")} (${port}) is among ${byRay} on ${where}`,
                });
            }
        }
    }
    return issues;
}
