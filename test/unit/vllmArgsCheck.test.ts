/**
 * components/scripts/vllm-args-check.sh against fake vLLMs of each supported module layout
 * (fakeVllm.ts): the verdict and the config key for the arguments vllm-fleet writes, as the real
 * vLLM 0.17.1, 0.33.0 and 0.34.0 gave them. The check runs as the program sends it, with a `docker`
 * whose `run` starts the system python3 without its site packages (`-S`), so only the fake (and,
 * when asked, a fake Ray) can be imported.
 *
 * What the real wheels from PyPI answered (Python 3.11, CPU platform forced: VLLM_TARGET_DEVICE=cpu
 * on 0.33/0.34, an out-of-tree platform plugin on 0.17.1; the real `vllm serve` run on a tiny model
 * with dummy weights where a start shows it), for spark-duo's arguments (vllmServeArgs, mpServeProgram)
 * and variants ("core": the engine core's start; "config": the engine's configuration; "setup": the API
 * server's), "before" the check of c6ec12e, "now" this one:
 *
 *   case                          | real 0.17.1               | real 0.33.0 and 0.34.0        | before   | now
 *   ray executor                  | accepted (Ray 2.60)       | refused: Failed to import Ray | accepted | as real, naming vllm-fleet:executor
 *   mp rank 0, headless rank 1    | accepted                  | accepted                      | accepted | accepted
 *   --reasoning-parser qwen4      | refused (KeyError, core)  | refused (KeyError, config)    | refused  | refused (vllm.reasoningParser)
 *   --tool-call-parser hermess    | refused (KeyError, setup) | refused (KeyError, setup)     | refused  | refused (vllm.toolCallParser)
 *   --swap-space 4                | accepted                  | refused: unrecognized         | as real  | as real (vllm.extraArgs)
 *   --disable-log-requests        | refused: unrecognized     | accepted (--enable-x pairs)   | as real  | as real (vllm.extraArgs)
 *   --headless -asc 2             | refused (ValueError)      | refused (ValueError)          | ACCEPTED | refused
 *   -dpn 0 -dpr 0                 | refused (ValueError)      | refused (own words)           | ACCEPTED | refused, in each one's words
 *   a parser from its plugin      | accepted                  | accepted                      | REFUSED  | accepted
 *     plugin not in the container | -                         | -                             | REFUSED  | unchecked
 *   no GPU, platform not forced   | no parser: Failed to      | no parser: Failed to          | REFUSED  | unchecked
 *                                 | infer device type         | infer device type             |          |
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, describe, expect, it } from "vitest";
import { bashCommand, scriptProgram } from "../../components/shell";
import { ARGS_CHECK } from "../../components/serveArgsCheck";
import { parseFleetConfig } from "../../infra/core/config";
import { PlannedNode, argsCheckKeys, mpServeProgram, vllmServeArgs } from "../../infra/core/plan";
import { FakeLayout, FakeVllmOptions, writeFakeVllm } from "./fakeVllm";
import { sparkDuo } from "./stacks";

/** stacks/Pulumi.spark-duo.yaml. */
const duo = {
    ...sparkDuo,
    model: { ...sparkDuo.model, servedName: "Qwen3.5-122B-A10B-FP8" },
    parallelism: { tensor: 2 },
    vllm: { port: 30000, gpuMemoryUtilization: 0.9, maxModelLen: 32768, reasoningParser: "qwen3", toolCallParser: "qwen3_coder", enableAutoToolChoice: true, trustRemoteCode: true },
};
const rayConfig = parseFleetConfig(duo);
const mpConfig = parseFleetConfig({ ...duo, executor: "mp" });
const nodes: PlannedNode[] = [
    { name: "spark1", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.12", hcas: [], rdmaDevices: [] }, gpus: 1 },
    { name: "spark2", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.13", hcas: [], rdmaDevices: [] }, gpus: 1 },
];
/** spark-duo's arguments of `vllm`: the ray executor, and the mp executor's rank 0 and headless rank 1. */
const RAY = vllmServeArgs(rayConfig, "0.0.0.0");
const MP0 = mpServeProgram(mpConfig, nodes, 0).slice(1);
const MP1 = mpServeProgram(mpConfig, nodes, 1).slice(1);
const KEYS = argsCheckKeys(rayConfig);

/** `args` with the value after `flag` replaced. */
function swap(args: readonly string[], flag: string, value: string): string[] {
    const out = [...args];
    out[out.indexOf(flag) + 1] = value;
    return out;
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

function tempDir(prefix: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    dirs.push(dir);
    return dir;
}

/** A fake vLLM of `layout`, written once per layout and options. */
const fakes = new Map<string, string>();
function fake(layout: FakeLayout, options: FakeVllmOptions = {}): string {
    const key = JSON.stringify([layout, options]);
    let dir = fakes.get(key);
    if (!dir) {
        dir = tempDir("fake-vllm-");
        writeFakeVllm(dir, layout, options);
        fakes.set(key, dir);
    }
    return dir;
}

interface Outcome {
    readonly status: number | null;
    readonly stdout: string;
    readonly stderr: string;
}

/** Runs the check of `serveArgs` with `python` (a PYTHONPATH entry) as the image's Python. */
function check(python: string, serveArgs: readonly string[], env: Record<string, string> = {}, keys: readonly string[] = KEYS): Outcome {
    const bin = tempDir("args-check-");
    fs.writeFileSync(
        path.join(bin, "docker"),
        ["#!/bin/bash", 'case "$1" in', "  inspect|image) exit 1 ;;", '  run) while [ "$1" != "--entrypoint" ]; do shift; done; shift 3; exec python3 -S "$@" ;;', "esac", "exit 1"].join("\n") + "\n",
        { mode: 0o755 },
    );
    const program = scriptProgram(ARGS_CHECK, { IMAGE: "img:1", CONTAINER: "", SERVE_ARGS: serveArgs, FLAG_KEYS: keys, TIMEOUT: 60 });
    const result = spawnSync("bash", ["-c", bashCommand(program)], {
        env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, PYTHONPATH: python, PYTHONDONTWRITEBYTECODE: "1", ...env },
        encoding: "utf8",
        timeout: 60_000,
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function expectAccepted(outcome: Outcome): void {
    expect(outcome.stderr).toBe("");
    expect(outcome.status).toBe(0);
    expect(outcome.stdout).toMatch(/^accepted$/m);
}

/** A refusal: exit 1, one line on stderr with the image, each text, and the config keys given. */
function expectRefused(outcome: Outcome, texts: readonly string[], config?: string): void {
    expect(outcome.status).toBe(1);
    expect(outcome.stderr.trim().split("\n")).toHaveLength(1);
    expect(outcome.stderr).toContain("the vLLM in img:1 refuses the serve arguments: ");
    for (const text of texts) {
        expect(outcome.stderr).toContain(text);
    }
    if (config) {
        expect(outcome.stderr.trim()).toMatch(new RegExp(`\\(config: ${config.replace(/[.]/g, "\\.")}\\)$`));
    } else {
        expect(outcome.stderr).not.toContain("(config:");
    }
}

describe.each([
    ["0.17.1", "0.17.1", "2.53.0"],
    ["0.33", "0.33.0", "none"],
    ["0.33", "0.34.0", "none"],
] as const)("vllm-args-check.sh with vLLM %s's module layout (vLLM %s, Ray %s)", (layout, version, ray) => {
    const vllm = () => fake(layout, { version });

    it("reports the image's vLLM and Ray versions on a line of their own", () => {
        const outcome = check(vllm(), MP0);
        expect(outcome.stdout).toMatch(new RegExp(`^versions vllm=${version} ray=${ray}$`, "m"));
    });

    it("accepts spark-duo's arguments with the mp executor: rank 0, and the headless form of the other ranks", () => {
        expectAccepted(check(vllm(), MP0));
        expectAccepted(check(vllm(), MP1));
        expectAccepted(check(vllm(), [...MP0.map((arg) => arg.replace(/^--tensor-parallel-size$/, "--tensor_parallel_size"))]));
    });

    it("judges spark-duo's arguments with the ray executor by whether the image has Ray", () => {
        const outcome = check(vllm(), RAY);
        if (ray !== "none") {
            expectAccepted(outcome);
            return;
        }
        expect(outcome.status).toBe(1);
        expect(outcome.stderr.trim()).toBe(
            `the image img:1 has no Ray (vLLM ${version}: Failed to import Ray: No module named 'ray'.Please install Ray with \`pip install ray\`.): ` +
                "executor ray needs it; set vllm-fleet:executor to mp (vLLM's native multi-node) or use an image with Ray",
        );
        // The same vLLM with Ray beside it accepts them.
        expectAccepted(check(fake(layout, { version, ray: "2.53.0" }), RAY));
    });

    it("refuses a reasoning parser this vLLM does not have, with its message and the config key", () => {
        expectRefused(check(vllm(), swap(MP0, "--reasoning-parser", "qwen4")), ["KeyError: \"Reasoning parser 'qwen4' not found. Available parsers: deepseek_r1, glm45, qwen3\""], "vllm.reasoningParser");
    });

    it("refuses a tool-call parser this vLLM does not have, with its message and the config key", () => {
        expectRefused(check(vllm(), swap(MP0, "--tool-call-parser", "hermess")), ["KeyError: 'invalid tool call parser: hermess (chose from { hermes,qwen3_coder,qwen3_xml })'"], "vllm.toolCallParser");
    });

    it("judges --swap-space (gone in 0.33) and --disable-log-requests (0.33 pairs --enable-x with --disable-x) as this vLLM does", () => {
        const keys = [...KEYS, "--swap-space|vllm.extraArgs", "--disable-log-requests|vllm.extraArgs"];
        const swapSpace = check(vllm(), [...MP0, "--swap-space", "4"], {}, keys);
        const disableLogRequests = check(vllm(), [...MP0, "--disable-log-requests"], {}, keys);
        if (layout === "0.17.1") {
            expectAccepted(swapSpace);
            expectRefused(disableLogRequests, ["vllm: error: unrecognized arguments: --disable-log-requests"], "vllm.extraArgs");
        } else {
            expectRefused(swapSpace, ["vllm: error: unrecognized arguments: --swap-space 4"], "vllm.extraArgs");
            expectAccepted(disableLogRequests);
        }
    });

    it("makes the checks `vllm serve` makes before it starts: API servers with --headless", () => {
        expectRefused(check(vllm(), [...MP1, "--api-server-count", "2"]), ["ValueError: --api-server-count=2 cannot be used with --headless (no API servers are started in headless mode)."]);
    });

    it("makes the checks `vllm serve` makes before it starts: one data-parallel load balancing mode, in this vLLM's words", () => {
        const outcome = check(vllm(), [...MP0, "--data-parallel-rank", "0", "--data-parallel-start-rank", "0"]);
        expectRefused(outcome, [layout === "0.17.1" ? "ValueError: Cannot use both external and hybrid data parallel load balancing modes." : "ValueError: Cannot use more than one data parallel load balancing mode."]);
    });

    it("loads the parser plugins before it looks up the names, as vLLM does", () => {
        const plugins = tempDir("parser-plugins-");
        const toolPlugin = path.join(plugins, "my_tools.py");
        const reasoningPlugin = path.join(plugins, "my_reasoning.py");
        fs.writeFileSync(toolPlugin, 'from vllm.tool_parsers import ToolParserManager\n\n\n@ToolParserManager.register_module("my_tools")\nclass MyTools:\n    pass\n');
        fs.writeFileSync(reasoningPlugin, 'from vllm.reasoning import ReasoningParserManager\n\n\n@ReasoningParserManager.register_module("my_reasoning")\nclass MyReasoning:\n    pass\n');
        const args = [...swap(swap(MP0, "--tool-call-parser", "my_tools"), "--reasoning-parser", "my_reasoning")];
        expectAccepted(check(vllm(), [...args, "--tool-parser-plugin", toolPlugin, "--reasoning-parser-plugin", reasoningPlugin]));
        expectRefused(check(vllm(), [...args, "--reasoning-parser-plugin", reasoningPlugin]), ["invalid tool call parser: my_tools"], "vllm.toolCallParser");
        // A plugin file that is not in the container of the check (the model directory is not there):
        // the names cannot be judged, which is no refusal.
        const missing = check(vllm(), [...args, "--tool-parser-plugin", "/models/m/my_tools.py", "--reasoning-parser-plugin", reasoningPlugin]);
        expect(missing.status).toBe(0);
        expect(missing.stdout).toMatch(/^unchecked: --tool-parser-plugin \/models\/m\/my_tools\.py is not in the container of the check; the parser names were not checked$/m);
    });

    it("says it could not check, and refuses nothing, when this vLLM cannot build its parser here (no device)", () => {
        const outcome = check(vllm(), MP0, { FAKE_VLLM_DEVICE: "" });
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^unchecked: this vLLM cannot build its parser here \(RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG`/m);
        expect(outcome.stdout).toMatch(new RegExp(`^versions vllm=${version} `, "m"));
    });
});

describe("vllm-args-check.sh where vLLM moves what it checks with", () => {
    it("finds validate_api_server_args in vllm.entrypoints.common.cli_args once the deprecated shim is gone (0.33 layout)", () => {
        const vllm = fake("0.33", { shim: false });
        expectAccepted(check(vllm, MP0));
        expectRefused(check(vllm, swap(MP0, "--tool-call-parser", "hermess")), ["invalid tool call parser: hermess"], "vllm.toolCallParser");
    });

    it("lets a vLLM without the module it checks with through as unchecked, never as a refusal", () => {
        const vllm = tempDir("fake-vllm-broken-");
        writeFakeVllm(vllm, "0.33");
        fs.rmSync(path.join(vllm, "vllm", "tool_parsers"), { recursive: true });
        const outcome = check(vllm, MP0);
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^unchecked: cannot load the CLI of this vLLM \(ModuleNotFoundError: No module named 'vllm\.tool_parsers'\)$/m);
        expect(outcome.stdout).toMatch(/^versions vllm=0\.33\.0 ray=none$/m);
    });

    it("asks the proving ground's vLLM stand-in, as vLLM, whether Ray can be imported for the ray executor", () => {
        // test/sim/workload/vllm, which the workload image installs beside Ray; here without Ray.
        const outcome = check(path.join(__dirname, "..", "sim", "workload"), RAY);
        expect(outcome.status).toBe(1);
        expect(outcome.stdout).toMatch(/^versions vllm=0\.17\.1\+vllm-fleet-standin ray=none$/m);
        expect(outcome.stderr).toContain("the image img:1 has no Ray (vLLM 0.17.1+vllm-fleet-standin: Failed to import Ray: No module named 'ray'.");
        expectAccepted(check(path.join(__dirname, "..", "sim", "workload"), MP0));
    });
});
