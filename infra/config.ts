/**
 * The stack configuration of vllm-fleet: its schema, its defaults and the errors a bad value gets.
 *
 * Pure: `parseFleetConfig` takes the raw values of the `vllm-fleet:*` keys and either returns a
 * complete, defaulted {@link FleetConfig} or throws a {@link ConfigError} listing every problem, each
 * naming the key, the value it got and what was expected. Nothing here touches a host, so a stack
 * whose config fails validation never registers a resource.
 */
import { z } from "zod";
import { FleetError } from "./errors";

/** The Pulumi config namespace (the project name). */
export const CONFIG_NAMESPACE = "vllm-fleet";

/** The top-level keys read from stack config, in the order errors are reported. */
export const CONFIG_KEYS = [
    "nodes",
    "ssh",
    "fabric",
    "image",
    "containerDriver",
    "commandRunner",
    "executor",
    "model",
    "parallelism",
    "vllm",
    "ray",
    "container",
    "timeouts",
    "supervision",
] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];

/** Flags that vllm-fleet sets itself and that `vllm.extraArgs` therefore may not carry. */
export const MANAGED_VLLM_FLAGS = [
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "-pp",
    "--distributed-executor-backend",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
    "--host",
    "--port",
    "--served-model-name",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--api-key",
    "--reasoning-parser",
    "--tool-call-parser",
    "--enable-auto-tool-choice",
    "--trust-remote-code",
] as const;

const NAME = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;
const POSIX_USER = /^[a-z_][a-z0-9_-]{0,31}$/;
// A hostname (RFC 1123 labels) or an IPv4 address; IPv6 literals are accepted too.
const HOST = /^(([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?))*|[0-9a-fA-F:]+)$/;
// An image reference: [registry[:port]/]repo[:tag][@digest]; no whitespace or shell syntax.
const IMAGE_REF = /^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$/;
const ABSOLUTE_PATH = /^\/[^\0\n\r]*$/;
// A parser name as vLLM spells them (qwen3, qwen3_coder, deepseek_r1, ...).
const PARSER = /^[A-Za-z0-9_.-]{1,64}$/;

/** Parses dotted-quad IPv4 into a 32-bit unsigned number, or undefined. */
export function ipv4ToNumber(ip: string): number | undefined {
    const parts = ip.split(".");
    if (parts.length !== 4) {
        return undefined;
    }
    let value = 0;
    for (const part of parts) {
        if (!/^(0|[1-9][0-9]{0,2})$/.test(part) || Number(part) > 255) {
            return undefined;
        }
        value = value * 256 + Number(part);
    }
    return value;
}

/** An IPv4 CIDR block, parsed. */
export interface Cidr {
    readonly cidr: string;
    readonly network: number;
    readonly prefix: number;
}

/** Parses `a.b.c.d/n`; undefined when it is not an IPv4 CIDR or has host bits set. */
export function parseCidr(cidr: string): Cidr | undefined {
    const match = /^([0-9.]+)\/([0-9]{1,2})$/.exec(cidr);
    if (!match) {
        return undefined;
    }
    const network = ipv4ToNumber(match[1]);
    const prefix = Number(match[2]);
    if (network === undefined || prefix > 32) {
        return undefined;
    }
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if ((network & mask) >>> 0 !== network) {
        return undefined;
    }
    return { cidr, network, prefix };
}

/** True when `ip` lies inside `block`. */
export function cidrContains(block: Cidr, ip: string): boolean {
    const value = ipv4ToNumber(ip);
    if (value === undefined) {
        return false;
    }
    const mask = block.prefix === 0 ? 0 : (0xffffffff << (32 - block.prefix)) >>> 0;
    return (value & mask) >>> 0 === block.network;
}

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

const modelSchema = z
    .strictObject({
        path: z.string().regex(ABSOLUTE_PATH, "an absolute path to the model directory on every node"),
        servedName: z.string().min(1).max(256).optional(),
        /** `rsync`: copy the first node's model directory to the others over the fabric. */
        sync: z.enum(["none", "rsync"]).default("none"),
    })
    .transform((model) => ({
        path: model.path.replace(/\/+$/, "") || "/",
        servedName: model.servedName ?? (model.path.replace(/\/+$/, "").split("/").pop() || model.path),
        sync: model.sync,
    }));

const parallelismSchema = z
    .strictObject({
        tensor: z.number().int().min(1).max(64).optional(),
        pipeline: z.number().int().min(1).max(64).default(1),
    })
    .default({ pipeline: 1 });

const vllmSchema = z
    .strictObject({
        port: z.number().int().min(1).max(65535).default(8000),
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
        extraArgs: z.array(z.string().regex(/^[^\0\n\r]*$/, "one argument without newlines")).default([]),
        /** Rendezvous port of rank 0 with the `mp` executor (vLLM's --master-port). */
        masterPort: z.number().int().min(1).max(65535).default(29501),
    })
    .default({ port: 8000, gpuMemoryUtilization: 0.9, enableAutoToolChoice: false, trustRemoteCode: false, extraArgs: [], masterPort: 29501 });

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
    })
    .default({ shmSizeBytes: Math.round(10.24 * 1024 ** 3), memlockBytes: -1, stackBytes: 67108864 });

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

const rawSchema = z.strictObject({
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
});

/** One host of the fleet, with the SSH settings resolved. */
export interface FleetNode {
    readonly name: string;
    readonly host: string;
    readonly user: string;
    readonly port: number;
    readonly hostKey?: string;
}

/** The validated, defaulted configuration of a stack. Secrets are not part of it. */
export interface FleetConfig {
    readonly nodes: readonly FleetNode[];
    /** A private key file to read when the secret vllm-fleet:sshPrivateKey is not set. */
    readonly sshPrivateKeyPath?: string;
    readonly fabric: { readonly subnet: string };
    readonly image: { readonly name: string; readonly source: "present" | "pull" | "copy" };
    readonly containerDriver: "docker" | "ssh";
    /** How commands reach the hosts: @pulumi/command, or vllm-fleet's own SSH resource. */
    readonly commandRunner: "pulumi-command" | "builtin";
    /** vLLM's distributed executor: `ray` (a Ray cluster) or `mp` (vLLM's native multi-node). */
    readonly executor: "ray" | "mp";
    readonly model: { readonly path: string; readonly servedName: string; readonly sync: "none" | "rsync" };
    readonly parallelism: { readonly tensor: number; readonly pipeline: number };
    readonly vllm: {
        readonly port: number;
        readonly gpuMemoryUtilization: number;
        readonly maxModelLen?: number;
        readonly reasoningParser?: string;
        readonly toolCallParser?: string;
        readonly enableAutoToolChoice: boolean;
        readonly trustRemoteCode: boolean;
        readonly extraArgs: readonly string[];
        readonly masterPort: number;
    };
    readonly ray: { readonly port: number };
    readonly container: { readonly shmSizeBytes: number; readonly memlockBytes: number; readonly stackBytes: number };
    readonly timeouts: { readonly sshConnectSeconds: number; readonly rayReadySeconds: number; readonly vllmReadySeconds: number };
    readonly supervision: {
        readonly restartRetries: number;
        readonly watchdog: boolean;
        readonly probeIntervalSeconds: number;
        readonly failuresBeforeRestart: number;
        readonly maxRestarts: number;
        readonly restartWindowSeconds: number;
    };
}

/** One problem with one config value. */
export interface ConfigIssue {
    /** The full key, e.g. `vllm-fleet:vllm.gpuMemoryUtilization` or `vllm-fleet:nodes[1].host`. */
    readonly key: string;
    /** The value found there (undefined when missing). */
    readonly value: unknown;
    /** What was expected. */
    readonly expected: string;
}

/** Thrown when a stack's config is invalid; its message lists every issue. */
export class ConfigError extends FleetError {
    constructor(readonly issues: readonly ConfigIssue[]) {
        super(
            `invalid stack configuration (${issues.length} problem${issues.length === 1 ? "" : "s"}); nothing was run on any host:\n` +
                issues.map((issue) => `  - ${issue.key}: ${describeValue(issue.value)}; expected ${issue.expected}`).join("\n"),
        );
    }
}

function describeValue(value: unknown): string {
    if (value === undefined) {
        return "missing";
    }
    const text = JSON.stringify(value);
    return `got ${text.length > 80 ? `${text.slice(0, 77)}...` : text}`;
}

function formatKey(path: readonly PropertyKey[]): string {
    let key = CONFIG_NAMESPACE + ":";
    path.forEach((part, index) => {
        if (typeof part === "number") {
            key += `[${part}]`;
        } else {
            key += index === 0 ? String(part) : `.${String(part)}`;
        }
    });
    return key;
}

function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
    let current: unknown = raw;
    for (const part of path) {
        if (current === null || typeof current !== "object") {
            return undefined;
        }
        current = (current as Record<PropertyKey, unknown>)[part];
    }
    return current;
}

function expectedFor(issue: z.core.$ZodIssue): string {
    switch (issue.code) {
        case "invalid_type":
            return issue.expected === "object" ? "an object" : issue.expected === "array" ? "a list" : `a ${issue.expected}`;
        case "unrecognized_keys":
            return `no unknown field (unknown: ${issue.keys.join(", ")})`;
        case "invalid_value":
            return `one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
        case "too_small":
            return issue.message.startsWith("Too small") ? `at least ${String(issue.minimum)}` : issue.message;
        case "too_big":
            return issue.message.startsWith("Too big") ? `at most ${String(issue.maximum)}` : issue.message;
        default:
            return issue.message;
    }
}

/**
 * Validates the raw config values (as read from `vllm-fleet:*` keys) and applies the defaults.
 * Throws {@link ConfigError} naming every bad key; returns a complete {@link FleetConfig}.
 */
export function parseFleetConfig(raw: Partial<Record<ConfigKey, unknown>>): FleetConfig {
    const result = rawSchema.safeParse(raw);
    if (!result.success) {
        throw new ConfigError(
            result.error.issues.map((issue) => ({
                key: formatKey(issue.path),
                value: issue.code === "unrecognized_keys" ? undefined : valueAt(raw, issue.path),
                expected: expectedFor(issue),
            })),
        );
    }
    const parsed = result.data;
    const issues: ConfigIssue[] = [];

    const nodes: FleetNode[] = parsed.nodes.map((node, index) => {
        const user = node.user ?? parsed.ssh.user ?? "";
        if (!user) {
            issues.push({ key: formatKey(["nodes", index, "user"]), value: undefined, expected: "a user name here or in vllm-fleet:ssh.user" });
        }
        return { name: node.name, host: node.host, user, port: node.port ?? parsed.ssh.port, hostKey: node.hostKey };
    });
    for (const field of ["name", "host"] as const) {
        const seen = new Map<string, number>();
        nodes.forEach((node, index) => {
            const first = seen.get(node[field]);
            if (first !== undefined) {
                issues.push({
                    key: formatKey(["nodes", index, field]),
                    value: node[field],
                    expected: `a ${field} not already used by vllm-fleet:nodes[${first}]`,
                });
            }
            seen.set(node[field], index);
        });
    }

    // One GPU per DGX Spark: by default tensor parallelism spans every node.
    const tensor = parsed.parallelism.tensor ?? Math.max(1, Math.floor(nodes.length / parsed.parallelism.pipeline));
    const parallelism = { tensor, pipeline: parsed.parallelism.pipeline };

    const extraArgs = parsed.vllm.extraArgs;
    extraArgs.forEach((arg, index) => {
        const flag = arg.split("=")[0];
        if ((MANAGED_VLLM_FLAGS as readonly string[]).includes(flag)) {
            issues.push({
                key: formatKey(["vllm", "extraArgs", index]),
                value: arg,
                expected: `a flag vllm-fleet does not set itself (${flag} comes from another vllm-fleet key)`,
            });
        }
    });
    if (parsed.vllm.enableAutoToolChoice && !parsed.vllm.toolCallParser) {
        issues.push({
            key: formatKey(["vllm", "toolCallParser"]),
            value: undefined,
            expected: "a tool-call parser when vllm.enableAutoToolChoice is true (vLLM refuses one without the other)",
        });
    }
    const worldSize = parallelism.tensor * parallelism.pipeline;
    if (parsed.executor === "mp" && worldSize % nodes.length !== 0) {
        issues.push({
            key: formatKey(["parallelism"]),
            value: parallelism,
            expected: `TP×PP (${worldSize}) divisible by the number of nodes (${nodes.length}) with the mp executor, which runs the same number of ranks on every node`,
        });
    }
    if (parsed.vllm.masterPort === parsed.vllm.port) {
        issues.push({ key: formatKey(["vllm", "masterPort"]), value: parsed.vllm.masterPort, expected: "a port other than vllm.port" });
    }
    if (parsed.vllm.port === parsed.ray.port) {
        issues.push({ key: formatKey(["ray", "port"]), value: parsed.ray.port, expected: "a port other than vllm.port" });
    }
    if (issues.length > 0) {
        throw new ConfigError(issues);
    }
    return {
        nodes,
        sshPrivateKeyPath: parsed.ssh.privateKeyPath,
        fabric: parsed.fabric,
        image: parsed.image,
        containerDriver: parsed.containerDriver,
        commandRunner: parsed.commandRunner,
        executor: parsed.executor,
        model: parsed.model,
        parallelism,
        vllm: parsed.vllm,
        ray: parsed.ray,
        container: parsed.container,
        timeouts: parsed.timeouts,
        supervision: parsed.supervision,
    };
}
