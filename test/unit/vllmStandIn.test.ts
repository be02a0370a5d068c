/**
 * The proving ground's vLLM stand-in (test/sim/workload/vllm) as the release it models: 0.17.1 (the
 * seeds' image) or 0.33.0/0.34.0, chosen by the version of its installed dist-info (the image's) as
 * here, or by VLLM_SIM_VERSION. Its Python is imported directly, with the system python3 and no site
 * packages, from a directory that holds the package and a dist-info of the version under test.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, describe, expect, it } from "vitest";
import { newestPhase } from "../../infra/core/vllmPhases";
import { ARGS_CHECK } from "../../components/serveArgsCheck";
import { bashCommand, scriptProgram } from "../../components/shell";

const STANDIN = path.join(__dirname, "..", "sim", "workload", "vllm");
const RELEASES = ["0.17.1", "0.33.0", "0.34.0"] as const;
type Release = (typeof RELEASES)[number];

const dirs = new Map<Release, string>();
afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

/** A PYTHONPATH entry with the stand-in installed as `release`. */
function installed(release: Release): string {
    let dir = dirs.get(release);
    if (!dir) {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), `vllm-standin-${release}-`));
        fs.symlinkSync(STANDIN, path.join(dir, "vllm"));
        const distInfo = path.join(dir, `vllm-${release}+vllm.fleet.standin.dist-info`);
        fs.mkdirSync(distInfo);
        fs.writeFileSync(path.join(distInfo, "METADATA"), `Metadata-Version: 2.1\nName: vllm\nVersion: ${release}+vllm-fleet-standin\n`);
        dirs.set(release, dir);
    }
    return dir;
}

/** Runs `code` with the stand-in as `release`; its output is JSON on the last line. */
function python(release: Release, code: string, env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync("python3", ["-S", "-c", code], {
        env: { PATH: process.env.PATH, PYTHONPATH: installed(release), PYTHONDONTWRITEBYTECODE: "1", HOME: os.tmpdir(), ...env },
        encoding: "utf8",
        timeout: 30_000,
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function json(release: Release, code: string, env: Record<string, string> = {}): unknown {
    const outcome = python(release, code, env);
    expect(outcome.stderr).toBe("");
    expect(outcome.status).toBe(0);
    return JSON.parse(outcome.stdout.trim().split("\n").pop() ?? "null");
}

/** `vllm serve ARGS` parsed and validated only (ServeSubcommand.cmd replaced, as a launcher may). */
function serve(release: Release, args: readonly string[]): { status: number | null; out: string } {
    const code = [
        "import sys",
        "from vllm.entrypoints.cli.serve import ServeSubcommand",
        "from vllm.entrypoints.cli import main",
        "ServeSubcommand.cmd = staticmethod(lambda args: print('parsed', args.model_tag))",
        `sys.argv = ["vllm", "serve", ${args.map((arg) => JSON.stringify(arg)).join(", ")}]`,
        "main.main()",
    ].join("\n");
    const outcome = python(release, code);
    return { status: outcome.status, out: outcome.stdout + outcome.stderr };
}

describe("the vLLM stand-in as the release its dist-info names", () => {
    it.each(RELEASES)("%s: version, and the modules that release has where a launcher reaches them", (release) => {
        const modules = [
            "vllm.entrypoints.openai.cli_args",
            "vllm.entrypoints.utils",
            "vllm.entrypoints.common.cli_args",
            "vllm.entrypoints.common.startup",
            "vllm.entrypoints.launchers.api_server.entry",
            "vllm.entrypoints.openai.api_server",
            "vllm.v1.executor.ray_executor",
            "vllm.v1.executor.ray_executor_v2",
            "vllm.v1.executor.ray_env_utils",
        ];
        const found = json(
            release,
            [
                "import importlib, json, warnings",
                "import vllm",
                "from importlib import metadata",
                "found = {}",
                `for name in ${JSON.stringify(modules)}:`,
                "    with warnings.catch_warnings(record=True) as caught:",
                "        warnings.simplefilter('always')",
                "        try:",
                "            importlib.import_module(name)",
                "            found[name] = 'deprecated' if any(w.category is DeprecationWarning for w in caught) else 'yes'",
                "        except ModuleNotFoundError as e:",
                "            found[name] = f'no: {e}'",
                "print(json.dumps({'version': vllm.__version__, 'installed': metadata.version('vllm'), **found}))",
            ].join("\n"),
        ) as Record<string, string>;
        expect(found.version).toBe(`${release}+vllm-fleet-standin`);
        expect(found.installed).toBe(found.version);
        const old = release === "0.17.1";
        expect(found["vllm.entrypoints.openai.cli_args"]).toBe(old ? "yes" : "no: No module named 'vllm.entrypoints.openai.cli_args'");
        expect(found["vllm.entrypoints.utils"]).toBe(old ? "yes" : "no: No module named 'vllm.entrypoints.utils'");
        expect(found["vllm.entrypoints.common.cli_args"]).toBe(old ? "no: No module named 'vllm.entrypoints.common'" : "yes");
        expect(found["vllm.entrypoints.common.startup"]).toBe(old ? "no: No module named 'vllm.entrypoints.common'" : "yes");
        expect(found["vllm.entrypoints.launchers.api_server.entry"]).toBe(old ? "no: No module named 'vllm.entrypoints.launchers'" : "yes");
        expect(found["vllm.entrypoints.openai.api_server"]).toBe(old ? "yes" : "deprecated");
        expect(found["vllm.v1.executor.ray_executor"]).toBe(old ? "yes" : "no: No module named 'vllm.v1.executor.ray_executor'");
        expect(found["vllm.v1.executor.ray_executor_v2"]).toBe(old ? "no: No module named 'vllm.v1.executor.ray_executor_v2'" : "yes");
        expect(found["vllm.v1.executor.ray_env_utils"]).toBe(old ? "no: No module named 'vllm.v1.executor.ray_env_utils'" : "yes");
    });

    it("VLLM_SIM_VERSION chooses the release without an image", () => {
        expect(json("0.17.1", "import json, vllm.version as v; print(json.dumps([v.__version__, v.LAYOUT]))", { VLLM_SIM_VERSION: "0.34.0" })).toEqual(["0.34.0+vllm-fleet-standin", "0.33"]);
        const unknown = python("0.17.1", "import vllm", { VLLM_SIM_VERSION: "0.20.0" });
        expect(unknown.status).toBe(1);
        expect(unknown.stderr).toContain("ImportError: the vLLM stand-in models vLLM 0.17.1, 0.33.0, 0.34.0, not 0.20.0");
    });

    it.each<[Release, string[], boolean, string?]>([
        ["0.17.1", ["--swap-space", "4"], true],
        ["0.33.0", ["--swap-space", "4"], false, "vllm: error: unrecognized arguments: --swap-space 4"],
        ["0.34.0", ["--swap-space", "4"], false, "vllm: error: unrecognized arguments: --swap-space 4"],
        ["0.17.1", ["--disable-log-requests"], false, "vllm: error: unrecognized arguments: --disable-log-requests"],
        ["0.33.0", ["--disable-log-requests"], true],
        ["0.34.0", ["--disable-log-requests", "--disable-sliding-window", "--enable-sliding-window"], true],
        ["0.34.0", ["--shuffle-safetensors-files", "--headless-client-handshake-address", "tcp://127.0.0.1:5"], true],
        ["0.33.0", ["--shuffle-safetensors-files"], false, "vllm: error: unrecognized arguments: --shuffle-safetensors-files"],
        ["0.34.0", ["--reasoning-parser", "None", "--grpc"], true],
        ["0.17.1", ["--grpc"], false, "vllm: error: unrecognized arguments: --grpc"],
    ])("%s: `vllm serve /models/m %j` is parsed as that release's parser does", (release, args, ok, message) => {
        const outcome = serve(release, ["/models/m", ...args]);
        if (ok) {
            expect(outcome.out).toContain("parsed /models/m");
            expect(outcome.status).toBe(0);
        } else {
            expect(outcome.status).toBe(2);
            expect(outcome.out).toContain(message);
        }
    });

    it.each<[Release, string]>([
        ["0.17.1", "Cannot use both external and hybrid data parallel load balancing modes."],
        ["0.34.0", "Cannot use more than one data parallel load balancing mode."],
    ])("%s: `vllm serve`'s command refuses two load balancing modes in that release's words", (release, message) => {
        const code = [
            "import sys",
            "from vllm.entrypoints.cli import main",
            'sys.argv = ["vllm", "serve", "/models/m", "--data-parallel-rank", "0", "--data-parallel-start-rank", "0"]',
            "main.main()",
        ].join("\n");
        const outcome = python(release, code);
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain(`ValueError: ${message}`);
    });

    it("has each release's reasoning and tool-call parsers", () => {
        const code = "import json\nfrom vllm.reasoning import ReasoningParserManager as R\nfrom vllm.tool_parsers import ToolParserManager as T\nprint(json.dumps([R.list_registered(), T.list_registered()]))";
        const [r17, t17] = json("0.17.1", code) as string[][];
        const [r33, t33] = json("0.33.0", code) as string[][];
        const [r34, t34] = json("0.34.0", code) as string[][];
        expect([r17.length, t17.length, r33.length, t33.length, r34.length, t34.length]).toEqual([18, 32, 42, 58, 44, 62]);
        for (const names of [r17, r33, r34]) {
            expect(names).toContain("qwen3");
        }
        for (const names of [t17, t33, t34]) {
            expect(names).toContain("qwen3_coder");
        }
        expect(t17).not.toContain("qwen3_json");
        expect(t33).toContain("qwen3_json");
        expect(r33).toContain("musespark1x");
        expect(r34).not.toContain("musespark1x");
        expect(r34).toContain("zaya");
    });

    it("loads a --tool-parser-plugin before the API server looks up the name (0.34: a module or a file)", () => {
        const plugins = fs.mkdtempSync(path.join(os.tmpdir(), "standin-plugins-"));
        try {
            fs.writeFileSync(path.join(plugins, "my_tools.py"), 'from vllm.tool_parsers import ToolParserManager\n\n\n@ToolParserManager.register_module("my_tools")\nclass MyTools:\n    pass\n');
            const code = (plugin: string) =>
                [
                    "import argparse, json",
                    "from vllm.entrypoints.common.cli_args import init_parser_plugin, validate_api_server_args",
                    "from vllm.engine.arg_utils import StructuredOutputsConfig",
                    `args = argparse.Namespace(tool_parser_plugin=${JSON.stringify(plugin)}, reasoning_parser_plugin="", enable_auto_tool_choice=True, tool_call_parser="my_tools", structured_outputs_config=StructuredOutputsConfig())`,
                    "init_parser_plugin(args)",
                    "validate_api_server_args(args)",
                    "print(json.dumps('accepted'))",
                ].join("\n");
            expect(json("0.34.0", code(path.join(plugins, "my_tools.py")))).toBe("accepted");
            expect(json("0.34.0", code("my_tools"), { PYTHONPATH: `${installed("0.34.0")}:${plugins}` })).toBe("accepted");
            const missing = python("0.34.0", code("/models/m/my_tools.py"));
            expect(missing.status).toBe(1);
            expect(missing.stdout).toContain("Failed to load module 'my_tools' from /models/m/my_tools.py.");
            expect(missing.stderr).toContain("KeyError: 'invalid tool call parser: my_tools (chose from {");
        } finally {
            fs.rmSync(plugins, { recursive: true, force: true });
        }
    });
});

describe("the stand-in's Ray executors: 0.17.1's RayDistributedExecutor, 0.33's and 0.34's RayExecutorV2", () => {
    /** What the executor of `release` sends its workers, and the workers' rank order, without Ray. */
    const probe = [
        "import json, os",
        "from vllm.v1.engine.core import EngineConfig",
        "from vllm.v1.executor._ray_executor import RayDistributedExecutor, RayExecutorV2",
        "from vllm.version import LAYOUT",
        "cls = RayDistributedExecutor if LAYOUT == '0.17.1' else RayExecutorV2",
        "executor = object.__new__(cls)",
        "sent = []",
        "executor._collective = lambda method, *args, **kw: sent.append([method, *args])",
        "executor._send_environment([('node-b', [0]), ('node-a', [0])], {'node-a': [0], 'node-b': [0]})",
        "order = cls._rank_order(['10.0.0.2', '10.0.0.1', '10.0.0.1'], ['node-b', 'node-a', 'node-a'], '10.0.0.1', 'node-a')",
        "method, payload = sent[0]",
        "env = payload[0] if isinstance(payload, list) else payload",
        "keys = ['NCCL_SOCKET_IFNAME', 'NCCL_IB_HCA', 'FLASH_ATTENTION_X', 'VLLM_HOST_IP', 'HOME_OF_DRIVER', 'CUDA_VISIBLE_DEVICES']",
        "print(json.dumps({'method': method, 'env': {k: env[k] for k in keys if k in env}, 'order': order}))",
    ].join("\n");

    function sent(release: Release): { method: string; env: Record<string, string>; order: number[] } {
        const config = fs.mkdtempSync(path.join(os.tmpdir(), "standin-config-"));
        try {
            fs.writeFileSync(path.join(config, "ray_non_carry_over_env_vars.json"), '["NCCL_IB_HCA"]');
            return json(release, probe, {
                VLLM_CONFIG_ROOT: config,
                NCCL_SOCKET_IFNAME: "enp1s0f1np1",
                NCCL_IB_HCA: "rocep1s0f1",
                FLASH_ATTENTION_X: "1",
                VLLM_HOST_IP: "10.0.0.1",
                HOME_OF_DRIVER: "/root",
            }) as { method: string; env: Record<string, string>; order: number[] };
        } finally {
            fs.rmSync(config, { recursive: true, force: true });
        }
    }

    it("0.17.1: overwrites the workers' variables with the driver's VLLM_/NCCL_ ones, and the node's GPUs", () => {
        const found = sent("0.17.1");
        expect(found.method).toBe("update_environment_variables");
        expect(found.env).toEqual({ NCCL_SOCKET_IFNAME: "enp1s0f1np1", CUDA_VISIBLE_DEVICES: "0" });
        // Driver's node first, then nodes with fewer workers, then by address.
        expect(found.order).toEqual([1, 2, 0]);
    });

    it.each(["0.33.0", "0.34.0"] as const)("%s: gives the workers the driver's whole environment to fill in what they lack (FLASH_ATTENTION_ too)", (release) => {
        const found = sent(release);
        expect(found.method).toBe("set_default_environment_variables");
        expect(found.env).toEqual({ NCCL_SOCKET_IFNAME: "enp1s0f1np1", FLASH_ATTENTION_X: "1", HOME_OF_DRIVER: "/root" });
        // The placement group's bundles, the driver's node first, then by node id.
        expect(found.order).toEqual([1, 2, 0]);
    });

    it("0.34.0: ray_env.py also copies FLASH_ATTENTION_* (its data-parallel engines)", () => {
        const code = "import json\nfrom vllm.ray.ray_env import DEFAULT_ENV_VAR_PREFIXES\nprint(json.dumps(sorted(DEFAULT_ENV_VAR_PREFIXES)))";
        expect(json("0.34.0", code)).toContain("FLASH_ATTENTION_");
        expect(json("0.17.1", code)).not.toContain("FLASH_ATTENTION_");
    });

    it("0.34.0: a worker applies what it is sent with setdefault, keeping its own values", () => {
        const code = [
            "import json, os",
            "from vllm.v1.executor.ray_utils import RayWorkerWrapper",
            "worker = RayWorkerWrapper(rpc_rank=0)",
            "worker.set_default_environment_variables({'NCCL_SOCKET_IFNAME': 'head-if', 'NCCL_IB_HCA': 'head-hca'})",
            "print(json.dumps([os.environ['NCCL_SOCKET_IFNAME'], os.environ['NCCL_IB_HCA']]))",
        ].join("\n");
        expect(json("0.34.0", code, { NCCL_SOCKET_IFNAME: "worker-if" })).toEqual(["worker-if", "head-hca"]);
    });
});

describe("vllm-fleet's argument check against the stand-in as each release", () => {
    /** components/scripts/vllm-args-check.sh, its `docker run` starting python3 -S here. */
    function check(release: Release, extra: readonly string[], backend = "mp"): { status: number | null; stdout: string; stderr: string } {
        const bin = fs.mkdtempSync(path.join(os.tmpdir(), "standin-check-"));
        try {
            fs.writeFileSync(
                path.join(bin, "docker"),
                ["#!/bin/bash", 'case "$1" in', "  inspect|image) exit 1 ;;", '  run) while [ "$1" != "--entrypoint" ]; do shift; done; shift 3; exec python3 -S "$@" ;;', "esac", "exit 1"].join("\n") + "\n",
                { mode: 0o755 },
            );
            const args = ["serve", "/models/m", "--tensor-parallel-size", "2", "--distributed-executor-backend", backend, "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder", "--enable-auto-tool-choice", ...extra];
            const program = scriptProgram(ARGS_CHECK, { IMAGE: "img:1", CONTAINER: "", SERVE_ARGS: args, FLAG_KEYS: ["--swap-space|vllm.extraArgs"], TIMEOUT: 60 });
            const result = spawnSync("bash", ["-c", bashCommand(program)], {
                env: { PATH: `${bin}:${process.env.PATH}`, PYTHONPATH: installed(release), PYTHONDONTWRITEBYTECODE: "1", HOME: os.tmpdir() },
                encoding: "utf8",
                timeout: 60_000,
            });
            return { status: result.status, stdout: result.stdout, stderr: result.stderr };
        } finally {
            fs.rmSync(bin, { recursive: true, force: true });
        }
    }

    it.each(RELEASES)("%s: the versions, spark-duo's flags accepted, --swap-space and --disable-log-requests as that release judges them", (release) => {
        const accepted = check(release, []);
        expect(accepted.stderr).toBe("");
        expect(accepted.stdout).toBe(`versions vllm=${release}+vllm-fleet-standin ray=none\naccepted\n`);
        const swapSpace = check(release, ["--swap-space", "4"]);
        const disableLogRequests = check(release, ["--disable-log-requests"]);
        if (release === "0.17.1") {
            expect(swapSpace.status).toBe(0);
            expect(disableLogRequests.stderr).toContain("vllm: error: unrecognized arguments: --disable-log-requests");
        } else {
            expect(swapSpace.stderr.trim()).toBe("the vLLM in img:1 refuses the serve arguments: vllm: error: unrecognized arguments: --swap-space 4 (config: vllm.extraArgs)");
            expect(disableLogRequests.status).toBe(0);
        }
        // No Ray here (the workload image has Ray 2.53.0).
        expect(check(release, [], "ray").stderr).toContain(`the image img:1 has no Ray (vLLM ${release}+vllm-fleet-standin: Failed to import Ray: No module named 'ray'.`);
    });
});

describe("the stand-in's start says its phases in vLLM's words (v1/worker/gpu_model_runner.py), paced", () => {
    /** The start's lines, stdout and stderr as one log (the Ray head's log file takes both), with when each came. */
    function start(env: Record<string, string>): { log: string; seconds: number } {
        const code = [
            "import sys, time",
            "sys.stderr = sys.stdout",
            "from vllm.v1.worker.gpu_model_runner import capture_graphs, load_and_compile, start_seconds",
            "began = time.monotonic()",
            "pace = start_seconds()",
            'load_and_compile("/models/tiny-moe", pace)',
            "capture_graphs(pace, began)",
            'print("took %.2f" % (time.monotonic() - began))',
        ].join("\n");
        const outcome = python("0.17.1", code, env);
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        return { log: outcome.stdout, seconds: Number(/^took ([0-9.]+)$/m.exec(outcome.stdout)?.[1]) };
    }

    it("names each phase of the table in the order of a real start, at once by default", () => {
        const { log, seconds } = start({});
        expect(seconds).toBeLessThan(0.5);
        // The newest phase after each line, as the readiness gate reads it, never goes back.
        const lines = log.split("\n");
        const seen = lines.map((_, index) => newestPhase(lines.slice(0, index + 1).join("\n"))).filter((phase): phase is string => phase !== undefined);
        const distinct = seen.filter((phase, index) => phase !== seen[index - 1]);
        expect(distinct).toEqual([
            "loading the model /models/tiny-moe",
            "loading weights: shard 0/4",
            "loading weights: shard 1/4",
            "loading weights: shard 2/4",
            "loading weights: shard 3/4",
            "loading weights: shard 4/4",
            expect.stringMatching(/^weights loaded in [0-9.]+ s$/),
            "model loaded (0.0123 GiB)",
            "compiling (torch.compile)",
            expect.stringMatching(/^compiling \(Dynamo transform done in [0-9.]+ s\)$/),
            expect.stringMatching(/^compiling \(graph compiled in [0-9.]+ s\)$/),
            expect.stringMatching(/^compiled \(torch\.compile took [0-9.]+ s\)$/),
            "profiling memory: 21.41 GiB for the KV cache",
            "capturing CUDA graphs: 11/11",
            "CUDA graphs captured in 0 s",
            expect.stringMatching(/^engine ready in [0-9.]+ s$/),
        ]);
    });

    it("takes as long as VLLM_SIM_START_SECONDS says, else the file VLLM_SIM_START_FILE", () => {
        expect(start({ VLLM_SIM_START_SECONDS: "1" }).seconds).toBeGreaterThanOrEqual(0.95);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-sim-start-"));
        try {
            fs.writeFileSync(path.join(dir, "pace"), "1\n");
            expect(start({ VLLM_SIM_START_FILE: path.join(dir, "pace") }).seconds).toBeGreaterThanOrEqual(0.95);
            expect(start({ VLLM_SIM_START_FILE: path.join(dir, "none") }).seconds).toBeLessThan(0.5);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("the stand-in's compile step: slow without a warm compile cache", () => {
    it.each(RELEASES)("%s: compiles and writes the entry under VLLM_CACHE_ROOT, then loads it at once", (release) => {
        const root = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-standin-compile-"));
        const model = path.join(root, "model");
        fs.mkdirSync(path.join(model, ".vllm-sim"), { recursive: true });
        fs.writeFileSync(path.join(model, "config.json"), '{"architectures": ["Qwen3MoeForCausalLM"]}');
        fs.writeFileSync(path.join(model, "model.safetensors"), "");
        // The time comes from the model directory's file when the variable is not set.
        fs.writeFileSync(path.join(model, ".vllm-sim", "compile-seconds"), "0.6\n");
        const env = { VLLM_CACHE_ROOT: path.join(root, "cache") };
        const code = `import time\nfrom vllm.v1.worker.gpu_worker import load_model\nstart = time.time()\nload_model(${JSON.stringify(model)}, 1)\nprint(round(time.time() - start, 2))`;
        try {
            const cold = python(release, code, env);
            expect(cold.status).toBe(0);
            expect(cold.stdout).toMatch(/\[backends\.py:643\] Using cache directory: .*\/cache\/torch_compile_cache\/[0-9a-f]{10}\/rank_1_0\/backbone for vLLM's torch\.compile/);
            expect(cold.stdout).toMatch(/\[backends\.py:278\] Compiling a graph for compile range \(1, 2048\) takes 0\.[6-9]\d s/);
            expect(cold.stdout).toMatch(/\[monitor\.py:34\] torch\.compile takes 0\.[6-9]\d s in total/);
            expect(Number(cold.stdout.trim().split("\n").pop())).toBeGreaterThanOrEqual(0.6);

            const warm = python(release, code, env);
            expect(warm.status).toBe(0);
            expect(warm.stdout).toContain("Directly load the compiled graph(s) for compile range (1, 2048) from the cache, took");
            expect(warm.stdout).not.toContain("Compiling a graph");
            expect(Number(warm.stdout.trim().split("\n").pop())).toBeLessThan(0.3);

            // Another rank has an entry of its own; the variable wins over the file.
            const other = python(release, code.replace(", 1)", ", 0)"), { ...env, VLLM_SIM_COMPILE_SECONDS: "0" });
            expect(other.stdout).toMatch(/Compiling a graph for compile range \(1, 2048\) takes 0\.[0-2]\d s/);
            expect(fs.readdirSync(path.join(root, "cache", "torch_compile_cache"))).toHaveLength(1);
        } finally {
            fs.rmSync(root, { recursive: true, force: true });
        }
    });
});

describe("the stand-in's /render endpoints (vLLM 0.17.1: a request rendered into engine prompts, nothing generated)", () => {
    const render = (body: object, chat: boolean) =>
        json(
            "0.17.1",
            [
                "import json",
                "from vllm.entrypoints.openai._server import Server",
                "class Args: api_key = None",
                "engine = type('Engine', (), {'execute': lambda self, rid: (_ for _ in ()).throw(AssertionError('no engine step'))})()",
                "server = Server(Args(), engine, ['tiny'], '/models/tiny', 2048, 10000)",
                `print(json.dumps(server.render(json.loads(${JSON.stringify(JSON.stringify(body))}), ${chat ? "True" : "False"}) + (sum(server.metrics.success.values()),)))`,
            ].join("\n"),
        ) as [number, unknown, number];

    it("renders a completion's prompt into one engine prompt of token ids, without an engine step or a counted request", () => {
        const [status, prompts, requests] = render({ model: "tiny", prompt: "the weather in Paris" }, false);
        expect(status).toBe(200);
        expect(prompts).toEqual([{ type: "token", prompt_token_ids: [0, 1, 2, 3], prompt: "the weather in Paris" }]);
        expect(requests).toBe(0);
    });

    it("renders a chat's messages, and refuses a model it does not serve with 404 as a completion would", () => {
        const [status, prompts] = render({ model: "tiny", messages: [{ role: "user", content: "hi" }] }, true);
        expect(status).toBe(200);
        expect((prompts as { prompt_token_ids: number[] }[])[0].prompt_token_ids.length).toBeGreaterThan(0);
        const [refused, error] = render({ model: "other", prompt: "x" }, false);
        expect(refused).toBe(404);
        expect(JSON.stringify(error)).toContain("The model `other` does not exist.");
    });
});

describe("the stand-in's /metrics: the series the fleet's monitoring reads, in vLLM 0.32's names", () => {
    it("counts the tokens it sent and the requests it finished, and times them in vLLM's buckets", () => {
        const text = python(
            "0.17.1",
            [
                "from vllm.entrypoints.openai._server import Metrics",
                "m = Metrics('tiny', 1000)",
                "m.started(100)",
                "print(m.text())",
                "reply = lambda n, why: {'usage': {'prompt_tokens': 3, 'completion_tokens': n}, 'choices': [{'finish_reason': why}]}",
                "m.finished(100, reply(5, 'length'), 0.5, 0.1)",
                "m.started(50)",
                "m.finished(50, reply(2, 'stop'), 0.2, 0.2)",
                "m.started(10)",
                "m.finished(10, None, 0.1, 0.1)",
                "print(m.text())",
            ].join("\n"),
        ).stdout;
        const [busy, idle] = text.split("# HELP vllm:num_requests_running").slice(1);
        const value = (block: string, series: string) =>
            Number(block.split("\n").find((line) => line.startsWith(`vllm:${series} `))?.split(" ")[1]);
        const labels = 'model_name="tiny",engine="0"';
        expect(value(busy, `num_requests_running{${labels}}`)).toBe(1);
        expect(value(busy, `kv_cache_usage_perc{${labels}}`)).toBe(0.1);
        expect(value(idle, `num_requests_running{${labels}}`)).toBe(0);
        expect(value(idle, `generation_tokens_total{${labels}}`)).toBe(7);
        expect(value(idle, `prompt_tokens_total{${labels}}`)).toBe(6);
        expect(value(idle, `request_success_total{${labels},finished_reason="length"}`)).toBe(1);
        expect(value(idle, `request_success_total{${labels},finished_reason="stop"}`)).toBe(1);
        expect(value(idle, `time_to_first_token_seconds_count{${labels}}`)).toBe(2);
        expect(value(idle, `time_to_first_token_seconds_bucket{${labels},le="0.1"}`)).toBe(1);
        expect(value(idle, `time_to_first_token_seconds_bucket{${labels},le="+Inf"}`)).toBe(2);
        // 5 tokens in 0.5 s after the first at 0.1 s: 4 gaps of 0.1 s; 2 tokens: 1 gap of 0 s.
        expect(value(idle, `inter_token_latency_seconds_count{${labels}}`)).toBe(5);
        expect(value(idle, `e2e_request_latency_seconds_sum{${labels}}`)).toBeCloseTo(0.7);
        expect(idle).toContain("# TYPE vllm:generation_tokens counter");
        expect(idle).toContain("# TYPE vllm:time_to_first_token_seconds histogram");
    });
});
