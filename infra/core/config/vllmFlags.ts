/**
 * The vLLM flags vllm-fleet sets itself, and how a `vllm.extraArgs` element that carries one is
 * found and refused. Pure.
 */
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
export function managedFlagExpectation(use: ManagedFlagUse): string {
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
