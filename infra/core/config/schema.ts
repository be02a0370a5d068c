/**
 * The schema of the stack configuration (zod), its defaults, the checks across keys, and the
 * validated, defaulted configuration it yields: {@link FleetConfig} is the schema's output type.
 * Pure.
 */
import { z } from "zod";
import { parseCidr } from "../net";
import { hostChecksSchema, hostPrepSchema } from "./host";
import { cacheSchema, cacheIssues } from "./cache";
import { modelSchema } from "./model";
import { managedFlagExpectation, managedVllmFlag } from "./vllmFlags";
import { CrossKeyIssue, portIssues } from "./ports";

const NAME = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;
const POSIX_USER = /^[a-z_][a-z0-9_-]{0,31}$/;
// A hostname (RFC 1123 labels) or an IPv4 address; IPv6 literals are accepted too.
const HOST = /^(([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?))*|[0-9a-fA-F:]+)$/;
// An image reference: [registry[:port]/]repo[:tag][@digest]; no whitespace or shell syntax.
const IMAGE_REF = /^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$/;
// A parser name as vLLM spells them (qwen3, qwen3_coder, deepseek_r1, ...).
const PARSER = /^[A-Za-z0-9_.-]{1,64}$/;

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

const imageSchema = z.strictObject({
    name: z.string().regex(IMAGE_REF, "a Docker image reference such as nvcr.io/nvidia/vllm:25.11-py3"),
    /**
     * How the image gets onto the nodes: `present` (already there; preflight checks), `pull` (docker
     * pull on every node), `copy` (docker save on the first node, docker load on the others over SSH,
     * skipped where the id already matches).
     */
    source: z.enum(["present", "pull", "copy"]).default("present"),
});

const parallelismSchema = z
    .strictObject({
        tensor: z.number().int().min(1).max(64).optional(),
        pipeline: z.number().int().min(1).max(64).default(1),
    })
    .default({ pipeline: 1 });

/** What vllm.apiKey takes. */
export const API_KEY_NONE_EXPECTED =
    'none, to serve without a key (a key of your own is the secret vllm-fleet:vllmApiKey: pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"; without either the stack makes one)';

const vllmSchema = z
    .strictObject({
        port: z.number().int().min(1).max(65535).default(8000),
        /** Where the API listens on the first node: `all` its addresses, or only its `fabric` address. */
        host: z.enum(["all", "fabric"]).default("all"),
        gpuMemoryUtilization: z
            .number()
            .gt(0, "a fraction in (0, 1], e.g. 0.9")
            .max(1, "a fraction in (0, 1], e.g. 0.9")
            .default(0.9),
        maxModelLen: z.number().int().min(16).max(10_000_000).optional(),
        reasoningParser: z.string().regex(PARSER, "a vLLM reasoning parser name such as qwen3").optional(),
        toolCallParser: z.string().regex(PARSER, "a vLLM tool-call parser name such as qwen3_coder").optional(),
        enableAutoToolChoice: z.boolean().default(false),
        trustRemoteCode: z.boolean().default(false),
        extraArgs: z
            .array(z.string().regex(/^[^\0\n\r]*$/, "one argument without newlines"))
            .superRefine((args, context) => {
                args.forEach((arg, index) => {
                    const managed = managedVllmFlag(arg);
                    if (managed) {
                        context.addIssue({ code: "custom", path: [index], message: managedFlagExpectation(managed) });
                    }
                });
            })
            .default([]),
        /** Rendezvous port of rank 0 with the `mp` executor (vLLM's --master-port). */
        masterPort: z.number().int().min(1).max(65535).default(29501),
        /**
         * `none` serves the API without a key. Otherwise the key is the secret vllm-fleet:vllmApiKey,
         * or, when that is not set, one the stack makes and keeps (the stack output `apiKey`).
         */
        apiKey: z.literal("none").optional(),
    })
    .default({ port: 8000, host: "all", gpuMemoryUtilization: 0.9, enableAutoToolChoice: false, trustRemoteCode: false, extraArgs: [], masterPort: 29501 });

const raySchema = z
    .strictObject({
        port: z.number().int().min(1).max(65535).default(6379),
    })
    .default({ port: 6379 });

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

const SECURITY_DEFAULTS = { rayTokenRotation: "", firewall: false };

const securitySchema = z
    .strictObject({
        /** Any text; a new one makes a new Ray token (the Ray containers restart with it). */
        rayTokenRotation: z.string().max(200).default(SECURITY_DEFAULTS.rayTokenRotation),
        /** Host firewall rules that admit Ray's and vLLM's internal ports from the fabric subnet only. */
        firewall: z.boolean().default(SECURITY_DEFAULTS.firewall),
    })
    .default(SECURITY_DEFAULTS);

const rawObjectSchema = z.strictObject({
    nodes: z.array(nodeSchema).min(1, "at least one node").max(16, "at most 16 nodes"),
    ssh: sshSchema,
    fabric: fabricSchema,
    image: imageSchema,
    containerDriver: z.enum(["docker", "ssh"]).default("docker"),
    commandRunner: z.enum(["pulumi-command", "builtin"]).default("pulumi-command"),
    executor: z.enum(["ray", "mp"]).default("ray"),
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
});
type ParsedConfig = z.output<typeof rawObjectSchema>;

/** One host of the fleet, with the SSH settings resolved. */
export interface FleetNode {
    readonly name: string;
    readonly host: string;
    readonly user: string;
    readonly port: number;
    readonly hostKey?: string;
}

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

/** TP and PP; by default tensor parallelism spans every node (one GPU per DGX Spark). */
function resolveParallelism(parsed: ParsedConfig): { readonly tensor: number; readonly pipeline: number } {
    const tensor = parsed.parallelism.tensor ?? Math.max(1, Math.floor(parsed.nodes.length / parsed.parallelism.pipeline));
    return { tensor, pipeline: parsed.parallelism.pipeline };
}

/**
 * The schema of a stack's configuration: the keys as the user writes them, with the checks across
 * keys, and the configuration the program works with as its output (SSH users and ports resolved
 * per node, the parallelism defaulted from the nodes, the fabric subnet parsed once). The checks
 * across keys run on the defaulted values even when some field broke a rule (a pattern, a bound),
 * so that one run reports them together; not when a value has the wrong type or a required one is
 * missing.
 */
export const fleetConfigSchema = rawObjectSchema
    .superRefine((parsed, context) => {
        for (const issue of crossKeyIssues(parsed)) {
            context.addIssue({ code: "custom", path: [...issue.path], message: issue.expected, params: { value: issue.value } });
        }
    })
    .transform((parsed) => ({
        nodes: resolveNodes(parsed),
        /** A private key file to read when the secret vllm-fleet:sshPrivateKey is not set. */
        sshPrivateKeyPath: parsed.ssh.privateKeyPath,
        /** `cidr`: the subnet, parsed (it passed the schema's check). */
        fabric: { ...parsed.fabric, cidr: parseCidr(parsed.fabric.subnet)! },
        image: parsed.image,
        containerDriver: parsed.containerDriver,
        commandRunner: parsed.commandRunner,
        executor: parsed.executor,
        model: parsed.model,
        parallelism: resolveParallelism(parsed),
        vllm: parsed.vllm,
        ray: parsed.ray,
        container: parsed.container,
        timeouts: parsed.timeouts,
        supervision: parsed.supervision,
        security: parsed.security,
        hostChecks: parsed.hostChecks,
        hostPrep: parsed.hostPrep,
        cache: parsed.cache,
    }));

/** The validated, defaulted configuration of a stack (the schema's output). Secrets are not part of it. */
export type FleetConfig = z.output<typeof fleetConfigSchema>;


/** The problems no single key shows: users, duplicates, parsers, the mp layout, ports. */
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
    if (parsed.vllm.enableAutoToolChoice && !parsed.vllm.toolCallParser) {
        issues.push({
            path: ["vllm", "toolCallParser"],
            value: undefined,
            expected: "a tool-call parser when vllm.enableAutoToolChoice is true (vLLM refuses one without the other)",
        });
    }
    const parallelism = resolveParallelism(parsed);
    const worldSize = parallelism.tensor * parallelism.pipeline;
    if (parsed.executor === "mp" && nodes.length > 0 && worldSize % nodes.length !== 0) {
        issues.push({
            path: ["parallelism"],
            value: parallelism,
            expected: `TP×PP (${worldSize}) divisible by the number of nodes (${nodes.length}) with the mp executor, which runs the same number of ranks on every node`,
        });
    }
    issues.push(...cacheIssues(parsed.cache, parsed.model.path));
    issues.push(...portIssues(parsed.vllm.port, parsed.vllm.masterPort, parsed.ray.port, nodes, parsed.executor));
    return issues;
}
