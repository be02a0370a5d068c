/**
 * The vLLM flags vllm-fleet sets itself, and how a `vllm.extraArgs` element that carries one is
 * found and refused. Pure.
 */
/**
 * What the arguments of `vllm serve` say, in the words of the configuration: the values the managed
 * flags take ({@link MANAGED_FLAGS}). Filled in by the plan (plan/serveArgs.ts) from the config and
 * the node: `host` is where the API binds, the `mp` fields only with the mp executor.
 */
export interface ServeValues {
    readonly servedName: string;
    readonly host: string;
    readonly port: number;
    readonly tensor: number;
    readonly pipeline: number;
    readonly executor: "ray" | "mp";
    readonly gpuMemoryUtilization: number;
    readonly maxModelLen?: number;
    readonly reasoningParser?: string;
    readonly toolCallParser?: string;
    readonly enableAutoToolChoice: boolean;
    readonly trustRemoteCode: boolean;
    /** The web origins allowed to use the API from a browser (CORS): none unless the stack names some. */
    readonly allowedOrigins: readonly string[];
    /** vLLM's `--middleware` for the key check of every route (with an API key), else undefined. */
    readonly keyMiddleware?: string;
    /** mp only: this node's rank among `nnodes`, and where rank 0 rendezvouses. */
    readonly mp?: { readonly nnodes: number; readonly nodeRank: number; readonly masterAddr: string; readonly masterPort: number };
}

/** One flag of `vllm serve` that vllm-fleet sets itself. */
export interface ManagedFlag {
    readonly flag: string;
    /** The config key (below the namespace) its value comes from, when one does. */
    readonly key?: string;
    /** Where its value comes from, in words, when that is not simply {@link key}. */
    readonly source?: string;
    /** vLLM's short aliases of the flag (vllm/engine/arg_utils.py). */
    readonly aliases?: readonly string[];
    /** Its `--no-` twin: vLLM registers one for each boolean flag (argparse's BooleanOptionalAction). */
    readonly negation?: string;
    /** Words vLLM's refusals use for it besides the flag ("reasoning parser"). */
    readonly words?: readonly string[];
    /** A flag of vLLM's native multi-node (the mp executor), written after `vllm.extraArgs`. */
    readonly multiNode?: boolean;
    /** Its value in `vllm serve`'s arguments: text, `true` for the flag alone, undefined to leave it out. */
    readonly value?: (values: ServeValues) => string | true | undefined;
}

const yes = (on: boolean): true | undefined => (on ? true : undefined);

/**
 * The flags of `vllm serve` that vllm-fleet sets itself, in the order it writes them: the one table
 * behind the serve arguments (plan/serveArgs.ts), the refusal of a `vllm.extraArgs` element that
 * carries one of them (below), and the config keys the check of the arguments names when vLLM
 * refuses them (components/serveArgsCheck.ts). `--api-key` is never written (the key travels as
 * VLLM_API_KEY). `-O` is not among them: vLLM rewrites it to --optimization-level (or
 * --compilation-config), which vllm-fleet does not set.
 */
export const MANAGED_FLAGS: readonly ManagedFlag[] = [
    { flag: "--served-model-name", key: "model.servedName", value: (v) => v.servedName },
    { flag: "--host", key: "vllm.host", value: (v) => v.host },
    { flag: "--port", key: "vllm.port", value: (v) => String(v.port) },
    { flag: "--tensor-parallel-size", key: "parallelism.tensor", aliases: ["-tp"], value: (v) => String(v.tensor) },
    { flag: "--pipeline-parallel-size", key: "parallelism.pipeline", aliases: ["-pp"], value: (v) => String(v.pipeline) },
    { flag: "--distributed-executor-backend", key: "executor", value: (v) => v.executor },
    { flag: "--gpu-memory-utilization", key: "vllm.gpuMemoryUtilization", value: (v) => String(v.gpuMemoryUtilization) },
    { flag: "--max-model-len", key: "vllm.maxModelLen", value: (v) => (v.maxModelLen === undefined ? undefined : String(v.maxModelLen)) },
    { flag: "--reasoning-parser", key: "vllm.reasoningParser", words: ["reasoning parser"], value: (v) => v.reasoningParser || undefined },
    { flag: "--tool-call-parser", key: "vllm.toolCallParser", words: ["tool call parser"], value: (v) => v.toolCallParser || undefined },
    { flag: "--enable-auto-tool-choice", key: "vllm.enableAutoToolChoice", negation: "--no-enable-auto-tool-choice", value: (v) => yes(v.enableAutoToolChoice) },
    { flag: "--trust-remote-code", key: "vllm.trustRemoteCode", negation: "--no-trust-remote-code", value: (v) => yes(v.trustRemoteCode) },
    { flag: "--api-key", source: "comes from the secret vllm-fleet:vllmApiKey (as VLLM_API_KEY)" },
    // Always written: vLLM 0.17.1's default is ["*"] (any web page may use the API from a browser).
    { flag: "--allowed-origins", key: "security.allowedOrigins", value: (v) => JSON.stringify(v.allowedOrigins) },
    {
        flag: "--middleware",
        source: "is vllm-fleet's key check of every route (vllm_fleet_key.RequireKey) when the stack has an API key",
        value: (v) => v.keyMiddleware,
    },
    { flag: "--nnodes", multiNode: true, source: "is the number of vllm-fleet:nodes with the mp executor", aliases: ["-n"], value: (v) => (v.mp ? String(v.mp.nnodes) : undefined) },
    { flag: "--node-rank", multiNode: true, source: "is each node's place in vllm-fleet:nodes with the mp executor", aliases: ["-r"], value: (v) => (v.mp ? String(v.mp.nodeRank) : undefined) },
    { flag: "--master-addr", multiNode: true, source: "is the first node's fabric address with the mp executor", value: (v) => v.mp?.masterAddr },
    { flag: "--master-port", multiNode: true, key: "vllm.masterPort", value: (v) => (v.mp ? String(v.mp.masterPort) : undefined) },
    { flag: "--headless", multiNode: true, source: "marks every node but the first with the mp executor", value: (v) => yes(v.mp !== undefined && v.mp.nodeRank > 0) },
];

/** Where a managed flag's value comes from, in words. */
function sourceOf(entry: ManagedFlag): string {
    return entry.source ?? `comes from vllm-fleet:${entry.key}`;
}

/** Each spelling vllm-fleet sets itself (flags and `--no-` twins), with its entry. */
const BY_FLAG: ReadonlyMap<string, ManagedFlag> = new Map(MANAGED_FLAGS.flatMap((entry) => [[entry.flag, entry] as const, ...(entry.negation ? [[entry.negation, entry] as const] : [])]));

/** vLLM's short aliases of managed flags, to the flag. */
const MANAGED_FLAG_ALIASES: ReadonlyMap<string, string> = new Map(MANAGED_FLAGS.flatMap((entry) => (entry.aliases ?? []).map((alias) => [alias, entry.flag] as const)));

/** Flags that vllm-fleet sets itself and that `vllm.extraArgs` therefore may not carry. */
export const MANAGED_VLLM_FLAGS: readonly string[] = [...BY_FLAG.keys(), ...MANAGED_FLAG_ALIASES.keys()];

/**
 * `<text>|<key>` pairs for the check of the arguments (components/scripts/vllm-args-check.sh): each
 * managed flag that comes from a config key, its `--no-` twin and the words vLLM's refusals use for
 * it, with that key.
 */
export function managedFlagKeys(): string[] {
    return MANAGED_FLAGS.flatMap((entry) =>
        entry.key ? [entry.flag, ...(entry.negation ? [entry.negation] : []), ...(entry.words ?? [])].map((text) => `${text}|${entry.key}`) : [],
    );
}

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
export function managedFlagExpectation(use: ManagedFlagUse): string {
    const named = (flag: string) => (MANAGED_FLAG_ALIASES.has(flag) ? `${flag} (${MANAGED_FLAG_ALIASES.get(flag)})` : flag);
    const source = (flag: string) => sourceOf(BY_FLAG.get(MANAGED_FLAG_ALIASES.get(flag) ?? flag)!);
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
