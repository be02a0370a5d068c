/**
 * The schema of the stack configuration (zod), its defaults, the checks across keys, and the
 * validated, defaulted configuration it yields: {@link FleetConfig} is the schema's output type.
 * Pure.
 */
import { z } from "zod";
import { parseCidr } from "../net";
import { hostChecksSchema, hostPrepSchema } from "./host";
import { cacheSchema } from "./cache";
import { gatewayIssues, gatewaySchema } from "./gateway";
import { modelSchema } from "./model";
import { monitoringIssues, monitoringSchema } from "./monitoring";
import { securityIssues, securitySchema } from "./security";
import { CrossKeyIssue } from "./ports";
import { DEFAULT_GPU_MEMORY_UTILIZATION, FleetNode, NAME, executorSchema, imageSchema, parallelismSchema, raySchema, vllmSchema } from "./fields";
import { ONE_MODEL_KEYS, ServiceConfig, ServiceInput, VllmConfig, acrossServicesIssues, oneModelService, resolveService, serviceIssues, servicesSchema } from "./services";

export { API_KEY_NONE_EXPECTED } from "./fields";
export { FleetNode } from "./fields";
const POSIX_USER = /^[a-z_][a-z0-9_-]{0,31}$/;
// A hostname (RFC 1123 labels) or an IPv4 address; IPv6 literals are accepted too.
const HOST = /^(([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?))*|[0-9a-fA-F:]+)$/;

const nodeSchema = z.strictObject({
    name: z.string().regex(NAME, "a lowercase name of letters, digits and '-' (at most 32), e.g. spark1"),
    host: z.string().regex(HOST, "a hostname or IP address that SSH can reach"),
    user: z.string().regex(POSIX_USER, "a POSIX user name").optional(),
    port: z.number().int().min(1).max(65535).optional(),
    /** The host's public key line (`ssh-ed25519 AAAA...`), checked when given. */
    hostKey: z
        .string()
        .regex(/^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( .*)?$/, "a public key line such as 'ssh-ed25519 AAAA...'")
        .optional(),
});

const sshSchema = z
    .strictObject({
        user: z.string().regex(POSIX_USER, "a POSIX user name").optional(),
        port: z.number().int().min(1).max(65535).default(22),
        /** A private key file on the machine running Pulumi (relative paths: from the project). */
        privateKeyPath: z.string().regex(/^[^\0\n\r]+$/, "a path to a private key file").optional(),
    })
    .default({ port: 22 });

const fabricSchema = z.strictObject({
    subnet: z
        .string()
        .refine((value) => parseCidr(value) !== undefined, "an IPv4 CIDR block such as 192.168.200.0/24 (no host bits set)"),
    /**
     * What to do when NCCL chose TCP sockets (NET/Socket) instead of RoCE (NET/IB) on a node: `auto`
     * refuses on nodes whose probe shows RoCE devices and warns on the others; `refuse` and `warn`
     * apply to every node.
     */
    socketTransport: z.enum(["auto", "refuse", "warn"]).default("auto"),
});

const containerSchema = z
    .strictObject({
        /** Shared memory, bytes (vLLM's run_cluster.sh gives 10.24 GB). */
        shmSizeBytes: z.number().int().min(64 * 1024 ** 2).default(Math.round(10.24 * 1024 ** 3)),
        /** Locked-memory limit in bytes for RDMA; -1 is unlimited (needs a host that allows it). */
        memlockBytes: z.number().int().min(-1).default(-1),
        /** Stack size limit, bytes. */
        stackBytes: z.number().int().min(-1).default(67108864),
        /** Run the serving containers privileged instead of giving them only the RDMA devices, IPC_LOCK and unlimited memlock. */
        privileged: z.boolean().default(false),
    })
    .default({ shmSizeBytes: Math.round(10.24 * 1024 ** 3), memlockBytes: -1, stackBytes: 67108864, privileged: false });

const timeoutsSchema = z
    .strictObject({
        sshConnectSeconds: z.number().int().min(1).max(600).default(20),
        rayReadySeconds: z.number().int().min(5).max(3600).default(300),
        vllmReadySeconds: z.number().int().min(5).max(7200).default(1800),
    })
    .default({ sshConnectSeconds: 20, rayReadySeconds: 300, vllmReadySeconds: 1800 });

const SUPERVISION_DEFAULTS = {
    restartRetries: 10,
    watchdog: true,
    probeIntervalSeconds: 10,
    failuresBeforeRestart: 3,
    maxRestarts: 3,
    restartWindowSeconds: 6 * 3600,
};

const supervisionSchema = z
    .strictObject({
        /** Docker restarts a serving container that exits with an error this many times (with Docker's doubling delay). */
        restartRetries: z.number().int().min(0).max(1000).default(SUPERVISION_DEFAULTS.restartRetries),
        /** The watchdog on the first node: probes a completion, restarts vLLM when it stops answering. */
        watchdog: z.boolean().default(SUPERVISION_DEFAULTS.watchdog),
        probeIntervalSeconds: z.number().min(1).max(3600).default(SUPERVISION_DEFAULTS.probeIntervalSeconds),
        failuresBeforeRestart: z.number().int().min(1).max(100).default(SUPERVISION_DEFAULTS.failuresBeforeRestart),
        /** At most this many watchdog restarts within restartWindowSeconds; then it only reports. */
        maxRestarts: z.number().int().min(0).max(100).default(SUPERVISION_DEFAULTS.maxRestarts),
        restartWindowSeconds: z.number().int().min(60).max(7 * 86400).default(SUPERVISION_DEFAULTS.restartWindowSeconds),
    })
    .default(SUPERVISION_DEFAULTS);

/** The keys of the stack; `image` and `model` are required in the single-model form only. */
const stackShape = {
    nodes: z.array(nodeSchema).min(1, "at least one node").max(16, "at most 16 nodes"),
    ssh: sshSchema,
    fabric: fabricSchema,
    services: servicesSchema.optional(),
    image: imageSchema,
    containerDriver: z.enum(["docker", "ssh"]).default("docker"),
    commandRunner: z.enum(["pulumi-command", "builtin"]).default("pulumi-command"),
    /**
     * A swap whose services cannot run side by side (plan/swaps.ts): stop the old service first
     * (announced at preview), or refuse it.
     */
    swap: z.enum(["stopFirst", "refuseDowntime"]).default("stopFirst"),
    executor: executorSchema,
    model: modelSchema,
    parallelism: parallelismSchema,
    vllm: vllmSchema,
    ray: raySchema,
    container: containerSchema,
    timeouts: timeoutsSchema,
    supervision: supervisionSchema,
    security: securitySchema,
    hostChecks: hostChecksSchema,
    hostPrep: hostPrepSchema,
    cache: cacheSchema,
    /** One endpoint for every service (config/gateway.ts); none when unset. */
    gateway: gatewaySchema.optional(),
    /** Prometheus, the node (and GPU) exporters and the alert rules (config/monitoring.ts); none when unset. */
    monitoring: monitoringSchema.optional(),
};
/** The single-model form: today's keys, `image` and `model` required (every key the program reads is here). */
const oneModelObjectSchema = z.strictObject(stackShape);
/** The services form: `services` required; the single-model keys are refused before (parse.ts), never read. */
const servicesObjectSchema = z.strictObject({ ...stackShape, services: servicesSchema, image: imageSchema.optional(), model: modelSchema.optional() });
type ParsedConfig = z.output<typeof servicesObjectSchema> | z.output<typeof oneModelObjectSchema>;

/** Every node with its SSH user and port resolved (user "" when neither the node nor `ssh` names one). */
function resolveNodes(parsed: ParsedConfig): readonly FleetNode[] {
    return parsed.nodes.map((node) => ({
        name: node.name,
        host: node.host,
        user: node.user ?? parsed.ssh.user ?? "",
        port: node.port ?? parsed.ssh.port,
        hostKey: node.hostKey,
    }));
}

/** The services as written: the entries of `services`, or the single-model form's keys as the service `vllm`. */
function serviceInputs(parsed: ParsedConfig): readonly ServiceInput[] {
    return parsed.services ?? [oneModelService({ ...parsed, image: parsed.image!, model: parsed.model! })];
}

/** The configuration the program works with: nodes and services resolved, the subnet parsed. */
function resolveConfig(parsed: ParsedConfig) {
    const nodes = resolveNodes(parsed);
    const oneModel = parsed.services === undefined;
    const services: readonly ServiceConfig[] = serviceInputs(parsed).map((service, index) => resolveService(service, nodes, oneModel, index));
    // The single-model keys: the service's own, or, with `services`, the first service's.
    const first = services[0];
    return {
        nodes,
        /** A private key file to read when the secret vllm-fleet:sshPrivateKey is not set. */
        sshPrivateKeyPath: parsed.ssh.privateKeyPath,
        /** `cidr`: the subnet, parsed (it passed the schema's check). */
        fabric: { ...parsed.fabric, cidr: parseCidr(parsed.fabric.subnet)! },
        image: first.image,
        containerDriver: parsed.containerDriver,
        commandRunner: parsed.commandRunner,
        swap: parsed.swap,
        executor: first.executor,
        model: first.model,
        parallelism: first.parallelism,
        vllm: oneModel ? parsed.vllm : ({ ...first.vllm, gpuMemoryUtilization: first.vllm.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION } as VllmConfig),
        ray: first.ray,
        container: parsed.container,
        timeouts: parsed.timeouts,
        supervision: parsed.supervision,
        security: parsed.security,
        hostChecks: parsed.hostChecks,
        hostPrep: parsed.hostPrep,
        cache: parsed.cache,
        /** The gateway in front of the services, when the stack has one. */
        gateway: parsed.gateway,
        /** Prometheus and its exporters, when the stack has them. */
        monitoring: parsed.monitoring,
        /** The models the stack serves (at least one; the single-model form: `vllm` on every node). */
        services,
    };
}

/**
 * The schema of a stack's configuration in one form: the keys as the user writes them, with the
 * checks across keys, and the configuration the program works with as its output (SSH users and
 * ports resolved per node, the services and their parallelism resolved over their nodes, the fabric
 * subnet parsed once). The checks across keys run on the defaulted values even when some field
 * broke a rule (a pattern, a bound), so that one run reports them together; not when a value has
 * the wrong type or a required one is missing.
 */
function formSchema<T extends typeof oneModelObjectSchema | typeof servicesObjectSchema>(object: T) {
    return object
        .superRefine((parsed, context) => {
            for (const issue of crossKeyIssues(parsed as ParsedConfig)) {
                context.addIssue({ code: "custom", path: [...issue.path], message: issue.expected, params: { value: issue.value } });
            }
        })
        .transform((parsed) => resolveConfig(parsed as ParsedConfig));
}

/** The single-model form's schema; it names every key the program reads (what the unknown-key hints walk). */
export const fleetConfigSchema = formSchema(oneModelObjectSchema);
/** The services form's schema. */
export const servicesFleetConfigSchema = formSchema(servicesObjectSchema);

/** The schema for the raw values `input`: the services form when `services` is set. */
export function fleetConfigSchemaFor(input: Readonly<Record<string, unknown>>): typeof fleetConfigSchema | typeof servicesFleetConfigSchema {
    return input.services === undefined ? fleetConfigSchema : servicesFleetConfigSchema;
}

/** The single-model keys set in `input` together with `services` (none: the forms do not mix). */
export function mixedOneModelKeys(input: Readonly<Record<string, unknown>>): string[] {
    return input.services === undefined ? [] : ONE_MODEL_KEYS.filter((key) => input[key] !== undefined);
}

/** The validated, defaulted configuration of a stack (the schema's output). Secrets are not part of it. */
export type FleetConfig = ReturnType<typeof resolveConfig>;

/**
 * The stack's config as `service` sees it: its nodes, image, executor, model, parallelism, vLLM
 * and Ray settings, `services` only it. `utilization`: the memory share when the service leaves it
 * to the planner (default 0.9).
 */
export function serviceConfig(config: FleetConfig, service: ServiceConfig, utilization?: number): FleetConfig {
    const vllm: VllmConfig = {
        ...service.vllm,
        gpuMemoryUtilization: service.vllm.gpuMemoryUtilization ?? utilization ?? DEFAULT_GPU_MEMORY_UTILIZATION,
        ...(config.vllm.apiKey !== undefined ? { apiKey: config.vllm.apiKey } : {}),
    };
    return {
        ...config,
        nodes: service.nodes,
        image: service.image,
        executor: service.executor,
        model: service.model,
        parallelism: service.parallelism,
        vllm,
        ray: service.ray,
        services: [service],
    };
}

/** The problems no single key shows: users, duplicates, and each service's (parsers, the mp layout, ports). */
function crossKeyIssues(parsed: ParsedConfig): CrossKeyIssue[] {
    const issues: CrossKeyIssue[] = [];
    const nodes = resolveNodes(parsed);
    nodes.forEach((node, index) => {
        if (!node.user) {
            issues.push({ path: ["nodes", index, "user"], value: undefined, expected: "a user name here or in vllm-fleet:ssh.user" });
        }
    });
    for (const field of ["name", "host"] as const) {
        const seen = new Map<string, number>();
        nodes.forEach((node, index) => {
            const first = seen.get(node[field]);
            if (first !== undefined) {
                issues.push({ path: ["nodes", index, field], value: node[field], expected: `a ${field} not already used by vllm-fleet:nodes[${first}]` });
            }
            seen.set(node[field], index);
        });
    }
    issues.push(...securityIssues(parsed.security, parsed.gateway !== undefined));
    if (parsed.gateway) {
        issues.push(...gatewayIssues(parsed.gateway, serviceInputs(parsed), nodes, parsed.services === undefined));
    }
    if (parsed.monitoring) {
        issues.push(...monitoringIssues(parsed.monitoring, serviceInputs(parsed), nodes, parsed.services === undefined, parsed.gateway, parsed.vllm.apiKey === "none"));
    }
    if (parsed.services === undefined) {
        issues.push(...serviceIssues(serviceInputs(parsed)[0], nodes, parsed.cache, []));
        return issues;
    }
    const known = new Set(nodes.map((node) => node.name));
    parsed.services.forEach((service, index) => {
        const own = service.nodes === undefined ? nodes : nodes.filter((node) => service.nodes!.includes(node.name) && known.has(node.name));
        issues.push(...serviceIssues(service, own, parsed.cache, ["services", index]));
    });
    issues.push(...acrossServicesIssues(parsed.services, nodes));
    return issues;
}
