/**
 * The stack configuration of vllm-fleet: its schema, its defaults and the errors a bad value gets.
 *
 * Pure: `parseFleetConfig` takes the raw values of the `vllm-fleet:*` keys and either returns a
 * complete, defaulted {@link FleetConfig} or throws a {@link ConfigError} listing every problem, each
 * naming the key, the value it got and what was expected. Nothing here touches a host, so a stack
 * whose config fails validation never registers a resource.
 */
import * as path from "path";
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
    "security",
] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];

/**
 * The secret keys the program reads besides {@link CONFIG_KEYS}: never part of {@link FleetConfig},
 * and never printed.
 */
export const SECRET_CONFIG_KEYS = ["sshPrivateKey", "vllmApiKey", "hfToken"] as const;
export type SecretConfigKey = (typeof SECRET_CONFIG_KEYS)[number];

/**
 * Flags that vllm-fleet sets itself and that `vllm.extraArgs` therefore may not carry, each with where
 * its value comes from. vLLM registers `--no-` twins of its boolean flags (argparse's
 * BooleanOptionalAction) and short aliases ({@link MANAGED_FLAG_ALIASES}). `-O` is not among them: vLLM
 * rewrites it to --optimization-level (or --compilation-config), which vllm-fleet does not set.
 */
const MANAGED_FLAG_SOURCES: Readonly<Record<string, string>> = {
    "--tensor-parallel-size": "comes from vllm-fleet:parallelism.tensor",
    "--pipeline-parallel-size": "comes from vllm-fleet:parallelism.pipeline",
    "--distributed-executor-backend": "comes from vllm-fleet:executor",
    "--nnodes": "is the number of vllm-fleet:nodes with the mp executor",
    "--node-rank": "is each node's place in vllm-fleet:nodes with the mp executor",
    "--master-addr": "is the first node's fabric address with the mp executor",
    "--master-port": "comes from vllm-fleet:vllm.masterPort",
    "--headless": "marks every node but the first with the mp executor",
    "--host": "comes from vllm-fleet:vllm.host",
    "--port": "comes from vllm-fleet:vllm.port",
    "--served-model-name": "comes from vllm-fleet:model.servedName",
    "--gpu-memory-utilization": "comes from vllm-fleet:vllm.gpuMemoryUtilization",
    "--max-model-len": "comes from vllm-fleet:vllm.maxModelLen",
    "--api-key": "comes from the secret vllm-fleet:vllmApiKey (as VLLM_API_KEY)",
    "--reasoning-parser": "comes from vllm-fleet:vllm.reasoningParser",
    "--tool-call-parser": "comes from vllm-fleet:vllm.toolCallParser",
    "--enable-auto-tool-choice": "comes from vllm-fleet:vllm.enableAutoToolChoice",
    "--no-enable-auto-tool-choice": "comes from vllm-fleet:vllm.enableAutoToolChoice",
    "--trust-remote-code": "comes from vllm-fleet:vllm.trustRemoteCode",
    "--no-trust-remote-code": "comes from vllm-fleet:vllm.trustRemoteCode",
};

/** vLLM's short aliases of managed flags (vllm/engine/arg_utils.py). */
const MANAGED_FLAG_ALIASES: Readonly<Record<string, string>> = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-n": "--nnodes",
    "-r": "--node-rank",
};

/** Flags that vllm-fleet sets itself and that `vllm.extraArgs` therefore may not carry. */
export const MANAGED_VLLM_FLAGS: readonly string[] = [...Object.keys(MANAGED_FLAG_SOURCES), ...Object.keys(MANAGED_FLAG_ALIASES)];

/** A managed flag found in one `vllm.extraArgs` element. */
export interface ManagedFlagUse {
    /** The managed flags vLLM may read the element as (more than one for an ambiguous abbreviation). */
    readonly flags: readonly string[];
    /**
     * How the element names it: `exact` (`--port`, `--port=80`), `respelled` (vLLM rewrites it into the
     * flag: `--tensor_parallel_size`, `-n2`) or `abbreviated` (a prefix of the flag: `--tensor-par`).
     */
    readonly spelling: "exact" | "respelled" | "abbreviated";
}

/** What a `vllm.extraArgs` element that carries a managed flag should be instead, in words. */
function managedFlagExpectation(use: ManagedFlagUse): string {
    const named = (flag: string) => (MANAGED_FLAG_ALIASES[flag] ? `${flag} (${MANAGED_FLAG_ALIASES[flag]})` : flag);
    const source = (flag: string) => MANAGED_FLAG_SOURCES[MANAGED_FLAG_ALIASES[flag] ?? flag];
    const [flag] = use.flags;
    if (use.flags.length > 1) {
        return `a flag vllm-fleet does not set itself: it abbreviates ${use.flags.map(named).join(" or ")}, all set by vllm-fleet`;
    }
    switch (use.spelling) {
        case "abbreviated":
            return `a flag vllm-fleet does not set itself: it abbreviates ${named(flag)}, which ${source(flag)} (vLLM takes a flag's unambiguous prefix for the flag)`;
        case "respelled":
            return `a flag vllm-fleet does not set itself: vLLM reads it as ${named(flag)}, which ${source(flag)}`;
        default:
            return `a flag vllm-fleet does not set itself: ${named(flag)} ${source(flag)}`;
    }
}

/**
 * The managed flag that one `vllm.extraArgs` element sets in vLLM, if any, read the way `vllm serve`
 * reads its arguments (vllm/utils/argparse_utils.py FlexibleArgumentParser, then argparse):
 * - `--flag=value` is `--flag`, and an element with a space inside (`--flag 4`, one argument) is
 *   taken for the flag it begins with;
 * - underscores in a long flag's name are dashes (`--tensor_parallel_size`), up to the first `.`
 *   (`--flag.key value` sets `--flag` to a JSON object);
 * - abbreviations: FlexibleArgumentParser keeps argparse's default allow_abbrev=True, so a long flag
 *   may be shortened to any prefix that is unambiguous among vLLM's flags (`--tensor-par 4`), and a
 *   single-dash alias likewise (`-t 4` is `-tp 4`). A prefix that is ambiguous makes vLLM refuse to
 *   start, so every prefix of a managed flag is refused here without needing vLLM's whole flag list
 *   (an exact flag would win over an abbreviation, but in the vLLM versions read no flag is a proper
 *   prefix of a managed one);
 * - one-letter aliases take their value attached: `-n2` is `--nnodes 2`, `-r1` is `--node-rank 1`.
 * Pure.
 */
export function managedVllmFlag(arg: string): ManagedFlagUse | undefined {
    const head = /^[^=\s]*/.exec(arg)?.[0] ?? "";
    const found = (flags: string[], spelling: ManagedFlagUse["spelling"]): ManagedFlagUse | undefined =>
        flags.length === 0 ? undefined : { flags, spelling: spelling === "exact" && flags[0] !== head ? "respelled" : spelling };
    if (head.startsWith("--")) {
        const name = head.slice(2).split(".")[0].replace(/_/g, "-");
        if (name === "") {
            return undefined;
        }
        const long = MANAGED_VLLM_FLAGS.filter((flag) => flag.startsWith("--"));
        if (long.includes(`--${name}`)) {
            return found([`--${name}`], "exact");
        }
        return found(
            long.filter((flag) => flag.startsWith(`--${name}`)),
            "abbreviated",
        );
    }
    if (!head.startsWith("-") || head.length < 2 || head.startsWith("-O")) {
        return undefined;
    }
    const short = MANAGED_VLLM_FLAGS.filter((flag) => !flag.startsWith("--"));
    if (short.includes(head)) {
        return found([head], "exact");
    }
    // A one-letter alias with its value attached (`-n2`), before prefixes of the longer aliases.
    const attached = short.filter((flag) => flag.length === 2 && head.startsWith(flag));
    if (attached.length > 0) {
        return found(attached, "respelled");
    }
    return found(
        short.filter((flag) => flag.startsWith(head)),
        "abbreviated",
    );
}

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

/**
 * Directories of the operating system: a model path may not be one of them (it is mounted into every
 * serving container and, with `model.sync: rsync`, written to), nor lie inside a kernel file system.
 */
const SYSTEM_DIRECTORIES = new Set([
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var",
    "/usr/bin", "/usr/include", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/sbin", "/usr/share", "/usr/src",
    "/var/cache", "/var/lib", "/var/log", "/var/run", "/var/tmp",
]);
const KERNEL_FILE_SYSTEMS = ["/proc/", "/sys/", "/dev/"];

/** An absolute path without `.`, `..`, repeated or trailing slashes (`/` stays `/`). */
export function normalizeAbsolutePath(value: string): string {
    return path.posix.normalize(value).replace(/(.)\/+$/, "$1");
}

/** Why `value` (an absolute path) cannot be a model directory, or undefined when it can. */
function modelPathProblem(value: string): string | undefined {
    if (!ABSOLUTE_PATH.test(value)) {
        return undefined; // the regex reports it
    }
    const normalized = normalizeAbsolutePath(value);
    if (normalized === "/") {
        return "a model directory, not the root directory";
    }
    if (SYSTEM_DIRECTORIES.has(normalized)) {
        return `a model directory, not the system directory ${normalized}`;
    }
    const kernel = KERNEL_FILE_SYSTEMS.find((prefix) => normalized.startsWith(prefix));
    if (kernel) {
        return `a model directory, not a path inside ${kernel.slice(0, -1)} (a kernel file system)`;
    }
    return undefined;
}

// A Hub repo id as huggingface_hub validates it (validate_repo_id), with the owner: owner/name.
const HUB_REPO = /^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?\/[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/;
/** A commit of a Hub repo, as huggingface_hub recognizes one (REGEX_COMMIT_HASH). */
export const HUB_COMMIT = /^[0-9a-f]{40}$/;

/** Why `value` cannot be `model.hubEndpoint` (HF_ENDPOINT), or undefined when it can. */
function hubEndpointProblem(value: string): string | undefined {
    let url: URL;
    try {
        url = new URL(value);
    } catch {
        return "not a URL";
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
        return "not http(s)";
    }
    if (url.username || url.password || url.search || url.hash || /\s/.test(value)) {
        return "credentials, a query or a fragment";
    }
    return undefined;
}

/**
 * The problems of the Hub keys of `model` across one another: `repo` and `revision` with
 * `source: hub` (the revision a commit, so every `up` gets the same bytes), none of the Hub keys
 * without it. Pure.
 */
function hubIssues(model: { source: "path" | "hub"; repo?: string; revision?: string; hubEndpoint?: string }): { key: string; value: unknown; expected: string }[] {
    const issues: { key: string; value: unknown; expected: string }[] = [];
    if (model.source !== "hub") {
        for (const key of ["repo", "revision", "hubEndpoint"] as const) {
            if (model[key] !== undefined) {
                issues.push({ key, value: model[key], expected: `no value: vllm-fleet:model.${key} is read only with vllm-fleet:model.source hub` });
            }
        }
        return issues;
    }
    if (model.repo === undefined) {
        issues.push({ key: "repo", value: undefined, expected: "a Hugging Face repo id such as Qwen/Qwen3-8B (owner/name) with vllm-fleet:model.source hub" });
    }
    const find = `the commit of a branch: curl -s ${(model.hubEndpoint ?? "https://huggingface.co").replace(/\/+$/, "")}/api/models/${model.repo ?? "<owner>/<name>"}/revision/main | jq -r .sha`;
    if (model.revision === undefined) {
        issues.push({ key: "revision", value: undefined, expected: `a commit of the repo (40 hex digits) with vllm-fleet:model.source hub, so every up gets the same files; ${find}` });
    } else if (!HUB_COMMIT.test(model.revision)) {
        const expected = /^[0-9A-Fa-f]{40}$/.test(model.revision)
            ? "a commit in lowercase hex (huggingface_hub takes another spelling for a branch name)"
            : `a commit (40 hex digits), not a branch or tag, which moves: the same config would download other files later; ${find}`;
        issues.push({ key: "revision", value: model.revision, expected });
    }
    return issues;
}

const modelSchema = z
    .strictObject({
        path: z
            .string()
            .regex(ABSOLUTE_PATH, "an absolute path to the model directory on every node")
            .superRefine((value, context) => {
                const problem = modelPathProblem(value);
                if (problem) {
                    context.addIssue({ code: "custom", message: `${problem} (it is mounted into every serving container)` });
                }
            }),
        servedName: z.string().min(1).max(256).optional(),
        /**
         * `rsync`: copy the first node's model directory to the others over the fabric. Default:
         * `none`, and `rsync` with `source: hub` (the download is on the first node only).
         */
        sync: z.enum(["none", "rsync"]).optional(),
        /** `path`: the directory is there already; `hub`: downloaded into it from the Hugging Face Hub. */
        source: z.enum(["path", "hub"]).default("path"),
        /** The Hub repo id (`owner/name`), with `source: hub`. */
        repo: z
            .string()
            .regex(HUB_REPO, "a Hugging Face repo id such as Qwen/Qwen3-8B (owner/name: letters, digits, '-', '_', '.')")
            .refine((value) => !/--|\.\.|\.git$/.test(value), "a Hugging Face repo id without '--' or '..' and not ending in .git")
            .optional(),
        /** The commit of the repo to download (40 hex digits), with `source: hub`. */
        revision: z.string().optional(),
        /** The Hub's address (HF_ENDPOINT): a mirror or a Hub of your own; default https://huggingface.co. */
        hubEndpoint: z
            .string()
            .refine((value) => hubEndpointProblem(value) === undefined, "an http(s) URL such as https://huggingface.co (no query, no credentials)")
            .optional(),
    })
    .superRefine((model, context) => {
        for (const issue of hubIssues(model)) {
            context.addIssue({ code: "custom", path: [issue.key], message: issue.expected, params: { value: issue.value } });
        }
    })
    .transform((model) => {
        const modelPath = normalizeAbsolutePath(model.path);
        const hub =
            model.source === "hub" && model.repo !== undefined && model.revision !== undefined
                ? { repo: model.repo, revision: model.revision, ...(model.hubEndpoint ? { endpoint: model.hubEndpoint.replace(/\/+$/, "") } : {}) }
                : undefined;
        return {
            path: modelPath,
            servedName: model.servedName ?? hub?.repo ?? path.posix.basename(modelPath),
            sync: model.sync ?? (hub ? "rsync" : "none"),
            ...(hub ? { hub } : {}),
        };
    });

const parallelismSchema = z
    .strictObject({
        tensor: z.number().int().min(1).max(64).optional(),
        pipeline: z.number().int().min(1).max(64).default(1),
    })
    .default({ pipeline: 1 });

/** What vllm.apiKey takes. */
const API_KEY_NONE_EXPECTED =
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
});
type ParsedConfig = z.output<typeof rawObjectSchema>;

/**
 * The schema, with the checks across keys. Those run on the defaulted values even when some field
 * broke a rule (a pattern, a bound), so that one run reports them together; not when a value has the
 * wrong type or a required one is missing.
 */
const rawSchema = rawObjectSchema.superRefine((parsed, context) => {
    for (const issue of crossKeyIssues(parsed)) {
        context.addIssue({ code: "custom", path: [...issue.path], message: issue.expected, params: { value: issue.value } });
    }
});

/** Every node with its SSH user and port resolved (user "" when neither the node nor `ssh` names one). */
function resolveNodes(parsed: ParsedConfig): FleetNode[] {
    return parsed.nodes.map((node) => ({
        name: node.name,
        host: node.host,
        user: node.user ?? parsed.ssh.user ?? "",
        port: node.port ?? parsed.ssh.port,
        hostKey: node.hostKey,
    }));
}

/** TP and PP; by default tensor parallelism spans every node (one GPU per DGX Spark). */
function resolveParallelism(parsed: ParsedConfig): { tensor: number; pipeline: number } {
    const tensor = parsed.parallelism.tensor ?? Math.max(1, Math.floor(parsed.nodes.length / parsed.parallelism.pipeline));
    return { tensor, pipeline: parsed.parallelism.pipeline };
}

/** A problem found across keys, at `path` below the namespace. */
interface CrossKeyIssue {
    readonly path: readonly (string | number)[];
    readonly value: unknown;
    readonly expected: string;
}

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
    issues.push(...portIssues(parsed.vllm.port, parsed.vllm.masterPort, parsed.ray.port, nodes, parsed.executor));
    return issues;
}

/** sshd's port: taken on every node whatever port vllm-fleet reaches it by. */
const SSHD_PORT = 22;

/**
 * The ports `ray start` takes on every node by its defaults, which vllm-fleet keeps: the client
 * server (10001), the dashboard agent (52365) and the range its worker processes listen in.
 */
const RAY_CLIENT_SERVER_PORT = 10001;
const RAY_DASHBOARD_AGENT_PORT = 52365;
const RAY_WORKER_PORTS = { min: 10002, max: 19999 };

/**
 * What Ray's own defaults hold `port` for, with the ray executor; undefined when free. The worker
 * range counts for a port bound after Ray's workers exist (vLLM's), not for Ray's GCS port, which is
 * bound first and which Ray's workers then avoid.
 */
function rayTakes(port: number, boundAfterWorkers: boolean): string | undefined {
    if (port === RAY_CLIENT_SERVER_PORT) {
        return `Ray's client server port (${RAY_CLIENT_SERVER_PORT})`;
    }
    if (port === RAY_DASHBOARD_AGENT_PORT) {
        return `Ray's dashboard agent port (${RAY_DASHBOARD_AGENT_PORT})`;
    }
    if (boundAfterWorkers && port >= RAY_WORKER_PORTS.min && port <= RAY_WORKER_PORTS.max) {
        return `Ray's worker ports (${RAY_WORKER_PORTS.min}-${RAY_WORKER_PORTS.max})`;
    }
    return undefined;
}

/**
 * The serving containers use the host's network, so vLLM's port, the mp rendezvous port and Ray's
 * GCS port may not be a node's SSH port (nor sshd's 22) nor one another, and with the ray executor
 * vLLM's port and Ray's may not be one Ray takes by default. Ports below 1024 are allowed: the
 * containers run as root, and `vllm serve --port` takes any port (vLLM's 1024-65535 check belongs to
 * its older api_server entry point).
 */
function portIssues(vllmPort: number, masterPort: number, rayPort: number, nodes: readonly FleetNode[], executor: "ray" | "mp"): CrossKeyIssue[] {
    // Which of Ray's ports each one may meet with the ray executor (none: the mp rendezvous port is unused then).
    const ports: { path: [string, string]; port: number; ray?: "after-workers" | "first" }[] = [
        { path: ["vllm", "port"], port: vllmPort, ray: "after-workers" },
        { path: ["vllm", "masterPort"], port: masterPort },
        { path: ["ray", "port"], port: rayPort, ray: "first" },
    ];
    const issues: CrossKeyIssue[] = [];
    ports.forEach(({ path: portPath, port, ray }, index) => {
        const taken: string[] = ports
            .slice(0, index)
            .filter((other) => other.port === port)
            .map((other) => other.path.join("."));
        const ssh = nodes.filter((node) => node.port === port).map((node) => node.name);
        if (ssh.length > 0) {
            taken.push(`the SSH port of ${ssh.join(", ")}`);
        } else if (port === SSHD_PORT) {
            taken.push("sshd's port on every node");
        }
        const byRay = executor === "ray" && ray ? rayTakes(port, ray === "after-workers") : undefined;
        if (byRay) {
            taken.push(byRay);
        }
        if (taken.length > 0) {
            issues.push({ path: portPath, value: port, expected: `a port other than ${taken.join(" and ")} (the serving containers use the host's network)` });
        }
    });
    return issues;
}

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
    readonly fabric: {
        readonly subnet: string;
        /** When NCCL chose TCP sockets over RoCE on a node: `auto` (refuse where the probe shows RoCE devices, else warn), `refuse` or `warn`. */
        readonly socketTransport: "auto" | "refuse" | "warn";
    };
    readonly image: { readonly name: string; readonly source: "present" | "pull" | "copy" };
    readonly containerDriver: "docker" | "ssh";
    /** How commands reach the hosts: @pulumi/command, or vllm-fleet's own SSH resource. */
    readonly commandRunner: "pulumi-command" | "builtin";
    /** vLLM's distributed executor: `ray` (a Ray cluster) or `mp` (vLLM's native multi-node). */
    readonly executor: "ray" | "mp";
    readonly model: {
        readonly path: string;
        readonly servedName: string;
        readonly sync: "none" | "rsync";
        /** With `model.source: hub`: the repo and commit downloaded into `path` on the first node, and the Hub's address. */
        readonly hub?: { readonly repo: string; readonly revision: string; readonly endpoint?: string };
    };
    readonly parallelism: { readonly tensor: number; readonly pipeline: number };
    readonly vllm: {
        readonly port: number;
        /** Where the API listens on the first node: every address, or only its fabric address. */
        readonly host: "all" | "fabric";
        readonly gpuMemoryUtilization: number;
        readonly maxModelLen?: number;
        readonly reasoningParser?: string;
        readonly toolCallParser?: string;
        readonly enableAutoToolChoice: boolean;
        readonly trustRemoteCode: boolean;
        readonly extraArgs: readonly string[];
        readonly masterPort: number;
        /** `none`: no API key (else the secret vllmApiKey, or one the stack makes). */
        readonly apiKey?: "none";
    };
    readonly ray: { readonly port: number };
    readonly container: {
        readonly shmSizeBytes: number;
        readonly memlockBytes: number;
        readonly stackBytes: number;
        /** Serving containers run privileged instead of with only the RDMA devices, IPC_LOCK and unlimited memlock. */
        readonly privileged: boolean;
    };
    readonly timeouts: { readonly sshConnectSeconds: number; readonly rayReadySeconds: number; readonly vllmReadySeconds: number };
    readonly supervision: {
        readonly restartRetries: number;
        readonly watchdog: boolean;
        readonly probeIntervalSeconds: number;
        readonly failuresBeforeRestart: number;
        readonly maxRestarts: number;
        readonly restartWindowSeconds: number;
    };
    readonly security: {
        /** Any text; a new one makes a new Ray token. */
        readonly rayTokenRotation: string;
        /** Host firewall rules keeping Ray's and vLLM's internal ports to the fabric subnet. */
        readonly firewall: boolean;
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
    /**
     * What was found, in words, instead of the value: for secrets (never printed) and unknown keys
     * (whose value may be a secret set under a misspelled name).
     */
    readonly found?: string;
}

/**
 * Thrown when a stack's config is invalid; its message lists every issue, one line each. Issues about
 * the same key are merged into one line.
 */
export class ConfigError extends FleetError {
    readonly issues: readonly ConfigIssue[];

    constructor(issues: readonly ConfigIssue[]) {
        const merged = mergeIssues(issues);
        super(
            `invalid stack configuration (${merged.length} problem${merged.length === 1 ? "" : "s"}); nothing was run on any host:\n` +
                merged.map((issue) => `  - ${issue.key}: ${issue.found ?? describeValue(issue.value)}; expected ${issue.expected}`).join("\n"),
        );
        this.issues = merged;
    }
}

/** One issue per key, in the order of their first appearance; the expectations of a key joined. */
function mergeIssues(issues: readonly ConfigIssue[]): ConfigIssue[] {
    const byKey = new Map<string, ConfigIssue>();
    for (const issue of issues) {
        const first = byKey.get(issue.key);
        if (!first) {
            byKey.set(issue.key, issue);
        } else if (!first.expected.split("; and ").includes(issue.expected)) {
            byKey.set(issue.key, { ...first, expected: `${first.expected}; and ${issue.expected}` });
        }
    }
    return [...byKey.values()];
}

function describeValue(value: unknown): string {
    if (value === undefined) {
        return "missing";
    }
    const text = JSON.stringify(value);
    return `got ${text.length > 80 ? `${text.slice(0, 77)}...` : text}`;
}

/** A config key as the user writes it: `vllm-fleet:vllm.extraArgs[2]`, `vllm-fleet:nodes[0].host`. */
function formatKey(keyPath: readonly PropertyKey[]): string {
    let key = CONFIG_NAMESPACE + ":";
    keyPath.forEach((part, index) => {
        if (typeof part === "number") {
            key += `[${part}]`;
        } else {
            key += index === 0 ? String(part) : `.${String(part)}`;
        }
    });
    return key;
}

function valueAt(raw: unknown, keyPath: readonly PropertyKey[]): unknown {
    let current: unknown = raw;
    for (const part of keyPath) {
        if (current === null || typeof current !== "object") {
            return undefined;
        }
        current = (current as Record<PropertyKey, unknown>)[part];
    }
    return current;
}

/** A JSON type, as a sentence says it. */
function typeInWords(type: string): string {
    switch (type) {
        case "int":
            return "an integer";
        case "object":
            return "an object";
        case "array":
            return "a list";
        case "boolean":
            return "true or false";
        default:
            return `a ${type}`;
    }
}

/** zod's own wording ("Too small: expected number to be >=1"), replaced by ours; ours is kept. */
function isZodWording(message: string): boolean {
    return /^(Too small|Too big|Invalid|Unrecognized)\b/.test(message);
}

function boundInWords(issue: { origin: string; inclusive?: boolean }, bound: unknown, direction: "min" | "max"): string {
    const amount = String(bound);
    switch (issue.origin) {
        case "string":
            return `${direction === "min" ? "at least" : "at most"} ${amount} character${amount === "1" ? "" : "s"}`;
        case "array":
        case "set":
            return `${direction === "min" ? "at least" : "at most"} ${amount} item${amount === "1" ? "" : "s"}`;
        default:
            if (issue.inclusive === false) {
                return `${direction === "min" ? "more than" : "less than"} ${amount}`;
            }
            return `${direction === "min" ? "at least" : "at most"} ${amount}`;
    }
}

function expectedFor(issue: z.core.$ZodIssue): string {
    switch (issue.code) {
        case "invalid_type":
            return typeInWords(issue.expected);
        case "invalid_value":
            return issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
        case "too_small":
            return isZodWording(issue.message) ? boundInWords(issue, issue.minimum, "min") : issue.message;
        case "too_big":
            return isZodWording(issue.message) ? boundInWords(issue, issue.maximum, "max") : issue.message;
        case "not_multiple_of":
            return isZodWording(issue.message) ? `a multiple of ${String(issue.divisor)}` : issue.message;
        case "invalid_format":
            return isZodWording(issue.message) ? `a string in ${issue.format} format` : issue.message;
        default:
            return isZodWording(issue.message) ? "a valid value" : issue.message;
    }
}

/** The object schema inside defaults, optionals, transforms and lists, or undefined. */
function unwrapSchema(schema: z.core.$ZodType | undefined): z.core.$ZodType | undefined {
    let current = schema;
    for (let depth = 0; current && depth < 10; depth++) {
        const def = current._zod.def as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
        if ((def.type === "default" || def.type === "optional" || def.type === "nullable" || def.type === "prefault") && def.innerType) {
            current = def.innerType;
        } else if (def.type === "pipe" && def.in) {
            current = def.in;
        } else {
            return current;
        }
    }
    return current;
}

/** The schema at `keyPath` (names and list indexes), or undefined. */
function schemaAt(keyPath: readonly PropertyKey[]): z.core.$ZodType | undefined {
    let current: z.core.$ZodType | undefined = rawSchema;
    for (const part of keyPath) {
        const unwrapped = unwrapSchema(current);
        const def = unwrapped?._zod.def as { type: string; shape?: Record<string, z.core.$ZodType>; element?: z.core.$ZodType } | undefined;
        if (def?.type === "array" && typeof part === "number") {
            current = def.element;
        } else if (def?.type === "object" && typeof part === "string") {
            current = def.shape?.[part];
        } else {
            return undefined;
        }
    }
    return unwrapSchema(current);
}

/** The field names of the object at `keyPath`; at the top: every key the program reads. */
function fieldsAt(keyPath: readonly PropertyKey[]): string[] {
    const def = schemaAt(keyPath)?._zod.def as { type: string; shape?: Record<string, unknown> } | undefined;
    const fields = def?.type === "object" && def.shape ? Object.keys(def.shape) : [];
    return keyPath.length === 0 ? [...fields, ...SECRET_CONFIG_KEYS] : fields;
}

/**
 * Names people give keys that are spelled otherwise here (the stack outputs `tensorParallel` and
 * `pipelineParallel`, vLLM's flag names, the words of other tools).
 */
const KEY_ALIASES: Readonly<Record<string, string>> = {
    tensorParallel: "parallelism.tensor",
    tensorParallelSize: "parallelism.tensor",
    tp: "parallelism.tensor",
    pipelineParallel: "parallelism.pipeline",
    pipelineParallelSize: "parallelism.pipeline",
    pp: "parallelism.pipeline",
    apiKey: "vllmApiKey",
    huggingfaceToken: "hfToken",
    hubToken: "hfToken",
    HF_TOKEN: "hfToken",
    privateKey: "sshPrivateKey",
    sshKey: "sshPrivateKey",
    hosts: "nodes",
    servedModelName: "model.servedName",
    modelPath: "model.path",
    subnet: "fabric.subnet",
};

/** Optimal string alignment distance (Levenshtein with transpositions), case-insensitive. */
export function editDistance(a: string, b: string): number {
    const x = a.toLowerCase();
    const y = b.toLowerCase();
    const rows: number[][] = Array.from({ length: x.length + 1 }, (_, i) => Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
    for (let i = 1; i <= x.length; i++) {
        for (let j = 1; j <= y.length; j++) {
            const cost = x[i - 1] === y[j - 1] ? 0 : 1;
            rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) {
                rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
            }
        }
    }
    return rows[x.length][y.length];
}

/**
 * The known keys nearest to `name`, as paths below the namespace (`vllm.maxModelLen`): the fields of
 * the object at `keyPath`, and at the top also the fields one level down (a nested key set at the top)
 * and {@link KEY_ALIASES}. Empty when nothing is close: at most a third of the name's letters differ.
 */
export function nearestKeys(name: string, keyPath: readonly PropertyKey[] = []): string[] {
    const here = formatKey(keyPath).slice(CONFIG_NAMESPACE.length + 1);
    const join = (field: string) => (here ? `${here}.${field}` : field);
    const candidates: { label: string; target: string }[] = fieldsAt(keyPath).map((field) => ({ label: field, target: join(field) }));
    if (keyPath.length === 0) {
        for (const key of CONFIG_KEYS) {
            const below: readonly PropertyKey[] = key === "nodes" ? [key, 0] : [key];
            for (const field of fieldsAt(below)) {
                candidates.push({ label: field, target: key === "nodes" ? `nodes[i].${field}` : `${key}.${field}` });
            }
        }
        for (const [alias, target] of Object.entries(KEY_ALIASES)) {
            candidates.push({ label: alias, target });
        }
    }
    const limit = Math.max(1, Math.floor(name.length / 3));
    let best = Infinity;
    let targets: string[] = [];
    for (const candidate of candidates) {
        const distance = editDistance(name, candidate.label);
        if (distance > limit || distance > best) {
            continue;
        }
        if (distance < best) {
            best = distance;
            targets = [];
        }
        if (!targets.includes(candidate.target)) {
            targets.push(candidate.target);
        }
    }
    return targets;
}

/**
 * The issues of keys unknown at `keyPath` (the top of the namespace by default), each naming the key
 * and the nearest known one when there is one, never its value. `names` are the keys found there,
 * without the namespace (`tensorParalel`, not `vllm-fleet:tensorParalel`). `missing`: the keys
 * (`vllm-fleet:model.path`) reported missing, said of the nearest key when it is one of them. Pure.
 */
export function unknownKeyIssues(names: readonly string[], keyPath: readonly PropertyKey[] = [], missing: ReadonlySet<string> = new Set()): ConfigIssue[] {
    const known = fieldsAt(keyPath);
    const where = keyPath.length === 0 ? "a key vllm-fleet reads" : `a key of ${formatKey(keyPath)}`;
    return names
        .filter((name) => !known.includes(name))
        .map((name) => {
            const nearest = nearestKeys(name, keyPath);
            // A nested key meant at the top is set with --path; say how.
            const nested = nearest.length === 1 && keyPath.length === 0 && nearest[0].includes(".") && !nearest[0].startsWith("nodes[") ? nearest[0] : undefined;
            const hint =
                nearest.length > 0
                    ? `; did you mean ${nearest
                          .slice(0, 3)
                          .map((target) => `${CONFIG_NAMESPACE}:${target}`)
                          .join(" or ")}?${nested ? ` (set with \`pulumi config set --path ${nested} <value>\`)` : ""}${
                          nearest.length === 1 && missing.has(`${CONFIG_NAMESPACE}:${nearest[0]}`) ? " (it is required and missing)" : ""
                      }`
                    : known.length > 0
                      ? `: ${known.join(", ")}`
                      : "";
            return { key: formatKey([...keyPath, name]), value: undefined, found: "unknown key", expected: `${where}${hint}` };
        });
}

/** The parts of a PEM or OpenSSH private key block. */
const PRIVATE_KEY_BLOCK = /-----BEGIN ((?:OPENSSH |RSA |EC |DSA |ENCRYPTED )?)PRIVATE KEY-----\r?\n([\s\S]*?)-----END \1PRIVATE KEY-----/;

/**
 * Why `text` cannot serve as the SSH private key, or undefined when it looks like one: an OpenSSH
 * (`-----BEGIN OPENSSH PRIVATE KEY-----`) or PEM (`RSA`, `EC`, `DSA` or PKCS#8) block, not protected
 * by a passphrase (the program has none to give). The words never quote the key. Pure.
 */
export function privateKeyProblem(text: string): string | undefined {
    const block = PRIVATE_KEY_BLOCK.exec(text);
    if (!block) {
        const start = text.trimStart();
        if (/^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-|sk-(ssh|ecdsa))/.test(start)) {
            return "a private key, and this is a public key (the .pub file): give the file without .pub";
        }
        if (start.startsWith("PuTTY-User-Key-File")) {
            return "an OpenSSH or PEM private key, and this is a PuTTY key: convert it with `puttygen key.ppk -O private-openssh -o key`";
        }
        if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
            return "a complete private key block, and this one has no matching END line (cut short?)";
        }
        return "an OpenSSH or PEM private key (a block from -----BEGIN OPENSSH PRIVATE KEY----- to -----END OPENSSH PRIVATE KEY-----), and this text holds none";
    }
    const [, kind, body] = block;
    const passphrase = "a private key without a passphrase (vllm-fleet has none to give ssh): remove it with `ssh-keygen -p -f <key>`, or use another key";
    if (kind === "ENCRYPTED " || /^Proc-Type:\s*4,\s*ENCRYPTED/m.test(body)) {
        return passphrase;
    }
    if (kind === "OPENSSH ") {
        // openssh-key-v1: the magic, then the cipher name ("none" when the key has no passphrase). A
        // body that does not decode this way is left to ssh to judge.
        const bytes = Buffer.from(body.replace(/\s+/g, ""), "base64");
        const magic = "openssh-key-v1\0";
        if (bytes.length > magic.length + 4 && bytes.subarray(0, magic.length).toString("latin1") === magic) {
            const length = bytes.readUInt32BE(magic.length);
            const cipher = bytes.subarray(magic.length + 4, magic.length + 4 + length).toString("latin1");
            if (cipher !== "none") {
                return passphrase;
            }
        }
    }
    return undefined;
}

/** What the text of an API key holds that an HTTP header cannot carry or that breaks the exact match. */
function apiKeyProblem(value: string): string | undefined {
    if (value.length === 0) {
        return "an empty key";
    }
    if (/^\s|\s$/.test(value)) {
        return /\n$/.test(value) ? "a key ending in a newline" : "a key beginning or ending in whitespace";
    }
    if (/[\r\n]/.test(value)) {
        return "a key with a line break inside";
    }
    if (/\s/.test(value)) {
        return "a key with whitespace inside";
    }
    if (/[\u0000-\u001f\u007f]/.test(value)) {
        return "a key with a control character";
    }
    if (/[^\u0021-\u007e]/.test(value)) {
        return "a key with characters outside printable ASCII";
    }
    return undefined;
}

/** How to set each secret key, for the message that asks for it as a secret. */
const SET_AS_SECRET: Readonly<Record<SecretConfigKey, string>> = {
    sshPrivateKey: "pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519",
    vllmApiKey: 'pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"',
    hfToken: "pulumi config set --secret hfToken hf_... (a Hugging Face access token that may read the repo)",
};

/**
 * The problem of a secret key set in plain text (`isSecret` false) rather than with `--secret`; none
 * when it is a secret or not set. The value is never quoted. Pure.
 */
export function plainTextSecretIssues(key: SecretConfigKey, value: string | undefined, isSecret: boolean): ConfigIssue[] {
    if (value === undefined || isSecret) {
        return [];
    }
    return [
        {
            key: `${CONFIG_NAMESPACE}:${key}`,
            value: undefined,
            found: "a value in plain text in the stack settings",
            expected: `a secret: run \`${SET_AS_SECRET[key]}\` (and replace the old value, which the stack file holds in plain text)`,
        },
    ];
}

/**
 * The problem of the text of a secret sent as `Authorization: Bearer <value>` (`value` undefined
 * when it is not set): one token of printable ASCII, not empty (a header cannot carry a newline, and
 * the receiver compares it exactly). `noun` names it in the message; `whenEmpty` and `otherwise` are
 * what is expected. The value is never quoted. Pure.
 */
function bearerSecretIssues(key: SecretConfigKey, value: string | undefined, noun: string, whenEmpty: string, otherwise: string): ConfigIssue[] {
    const problem = value === undefined ? undefined : apiKeyProblem(value);
    if (!problem) {
        return [];
    }
    return [
        {
            key: `${CONFIG_NAMESPACE}:${key}`,
            value: undefined,
            found: `got ${problem.replace(/key/g, noun)}`,
            expected: problem === "an empty key" ? whenEmpty : otherwise,
        },
    ];
}

/** The problems of the text of the secret `vllm-fleet:vllmApiKey` (vLLM compares the Bearer token exactly). */
export function apiKeyIssues(value: string | undefined): ConfigIssue[] {
    return bearerSecretIssues(
        "vllmApiKey",
        value,
        "key",
        "a key (without it the stack makes one; to serve without any: pulumi config rm vllmApiKey, and set vllm-fleet:vllm.apiKey to none)",
        "one token of printable ASCII without spaces (vLLM compares the Bearer token exactly; a header cannot carry a newline)",
    );
}

/** The problems of the text of the secret `vllm-fleet:hfToken` (the Hub reads it from a Bearer header). */
export function hfTokenIssues(value: string | undefined): ConfigIssue[] {
    return bearerSecretIssues(
        "hfToken",
        value,
        "token",
        "a Hugging Face access token (for a repo that needs none, remove it: pulumi config rm hfToken)",
        "one token of printable ASCII without spaces (the Hub reads it from an Authorization: Bearer header)",
    );
}

/**
 * The problems of the text of the secret `vllm-fleet:sshPrivateKey` (`value` undefined when it is not
 * set): a private key the program can use ({@link privateKeyProblem}). Never quoted. Pure.
 */
export function sshPrivateKeyIssues(value: string | undefined): ConfigIssue[] {
    const problem = value === undefined ? undefined : privateKeyProblem(value);
    if (value === undefined || !problem) {
        return [];
    }
    return [{ key: `${CONFIG_NAMESPACE}:sshPrivateKey`, value: undefined, found: `got a secret of ${value.length} characters`, expected: problem }];
}

/**
 * Validates the raw config values (as read from `vllm-fleet:*` keys) and applies the defaults.
 * Throws {@link ConfigError} naming every bad key; returns a complete {@link FleetConfig}. Keys that
 * are not part of the schema are reported as unknown (with the nearest known key); the secret keys
 * ({@link SECRET_CONFIG_KEYS}) are not read here and are ignored when present.
 */
export function parseFleetConfig(raw: Readonly<Record<string, unknown>>): FleetConfig {
    const input = Object.fromEntries(Object.entries(raw).filter(([key]) => !(SECRET_CONFIG_KEYS as readonly string[]).includes(key)));
    const result = rawSchema.safeParse(input);
    if (!result.success) {
        // A required key that is missing because it was misspelled is said once, by the unknown key.
        const missing = new Set(
            result.error.issues.filter((issue) => issue.code === "invalid_type" && valueAt(input, issue.path) === undefined).map((issue) => formatKey(issue.path)),
        );
        const claimed = new Set<string>();
        for (const issue of result.error.issues) {
            if (issue.code === "unrecognized_keys") {
                for (const name of issue.keys) {
                    const nearest = nearestKeys(name, issue.path).map((target) => `${CONFIG_NAMESPACE}:${target}`);
                    if (nearest.length === 1 && missing.has(nearest[0])) {
                        claimed.add(nearest[0]);
                    }
                }
            }
        }
        throw new ConfigError(
            result.error.issues.flatMap((issue) => {
                if (issue.code === "unrecognized_keys") {
                    return unknownKeyIssues(issue.keys, issue.path, missing);
                }
                const key = formatKey(issue.path);
                if (claimed.has(key)) {
                    return [];
                }
                if (key === `${CONFIG_NAMESPACE}:vllm.apiKey`) {
                    // Whatever is there may be a key put in the wrong place: never quoted.
                    return [{ key, value: undefined, found: "a value other than none (not shown: it may be a key)", expected: API_KEY_NONE_EXPECTED }];
                }
                // The checks across keys carry the value they judged (a resolved or defaulted one).
                const judged = issue.code === "custom" && issue.params && "value" in issue.params;
                return [{ key, value: judged ? issue.params?.value : valueAt(input, issue.path), expected: expectedFor(issue) }];
            }),
        );
    }
    const parsed = result.data;
    return {
        nodes: resolveNodes(parsed),
        sshPrivateKeyPath: parsed.ssh.privateKeyPath,
        fabric: parsed.fabric,
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
    };
}
