import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it, vi } from "vitest";
import { bashCommand, readScript, shQuote } from "../../components/shell";
import { VLLM_LIFECYCLE } from "../../components/vllmService";
import { RAY_CONTAINER, RAY_SERVE_ARGS_FILE, VLLM_CONTAINER, WATCHDOG_CONTAINER } from "../../infra/core/names";
import { CACHE_ENV } from "../../infra/core/plan";
import { FAKE_IMAGE_IDENTITY, runWithFakeDocker, standInIdentity } from "./fakeDocker";
import { MockRun, RecordedResource, runProgram, sparkProbeOutput, unsecret } from "./mocks";
import { sparkDuo } from "./stacks";

const fabricIps: Record<string, string> = { spark1: "192.168.200.12", spark2: "192.168.200.13", spark3: "192.168.200.14" };
const mgmtIps: Record<string, string> = { spark1: "10.1.230.180", spark2: "10.1.230.181", spark3: "10.1.230.182" };
const probe = (node: string) => sparkProbeOutput(fabricIps[node], mgmtIps[node]);

const duo = {
    ...sparkDuo,
    containerDriver: "ssh",
    commandRunner: "builtin",
    vllm: { port: 30000, maxModelLen: 32768, reasoningParser: "qwen3", toolCallParser: "qwen3_coder", enableAutoToolChoice: true, trustRemoteCode: true },
};

const COMMAND = "pulumi-nodejs:dynamic/remote:SshCommand";

/**
 * The docker calls of a resource's create program, run against the stand-in docker with every
 * container of the fleet there and running (a program run in one answers nothing); it must succeed.
 */
function dockerCalls(program: string): string[][] {
    const running = { exec: "" };
    const outcome = runWithFakeDocker(bashCommand(program), { containers: { [RAY_CONTAINER]: running, [VLLM_CONTAINER]: running, [WATCHDOG_CONTAINER]: running } });
    if (outcome.status !== 0) {
        throw new Error(`the command failed (${outcome.status}): ${outcome.stderr}`);
    }
    return outcome.calls;
}

/** The `docker run` arguments of a container's step (a container with files is created, then started: the same arguments). */
function dockerRunArgs(run: MockRun, name: string): string[] {
    const calls = dockerCalls(unsecret(run.byName(name).inputs.create));
    const call = calls.find((args) => args[0] === "run" || args[0] === "create");
    if (!call) {
        throw new Error(`no docker run in ${name}`);
    }
    return call[0] === "create" ? ["run", "--detach", ...call.slice(1)] : call;
}

/**
 * The arguments of `vllm` that vllm-serve's start writes into the Ray head (the exec that starts
 * the server takes them as a JSON list, just before the file it keeps them in) and starts from.
 */
function serveArgs(program: string): string[] {
    const exec = dockerCalls(program).find((args) => args[0] === "exec" && args.includes(RAY_SERVE_ARGS_FILE));
    if (!exec) {
        throw new Error("no docker exec that starts vllm serve");
    }
    return JSON.parse(exec[exec.indexOf(RAY_SERVE_ARGS_FILE) - 1]);
}

/** A command's program: the builtin runner keeps it as it is (remote.Command on standard input). */
function programOf(program: string): string {
    expect(program.startsWith("set -euo pipefail\n")).toBe(true);
    return program;
}

/** What {@link envOf} gives a variable whose value `docker run` takes from its own environment. */
const FROM_ENVIRONMENT = "(from the environment)";

function envOf(args: string[]): Record<string, string> {
    const env: Record<string, string> = {};
    args.forEach((arg, index) => {
        if (arg === "--env") {
            const pair = args[index + 1];
            // `--env NAME` alone: docker run takes the value from its environment (a secret).
            env[pair.includes("=") ? pair.slice(0, pair.indexOf("=")) : pair] = pair.includes("=") ? pair.slice(pair.indexOf("=") + 1) : FROM_ENVIRONMENT;
        }
    });
    return env;
}

function parentName(run: MockRun, resource: RecordedResource): string | undefined {
    return run.resources.find((candidate) => candidate.urn === resource.parent)?.name;
}

describe("the program's graph (mocks)", async () => {
    const run = await runProgram(duo, probe);

    it("has one SparkNode per host with its CompileCache, the serve-argument check on the first, a RayCluster and a VllmService", () => {
        const components = run.resources.filter((resource) => resource.type.startsWith("vllm-fleet:")).map((r) => `${r.type} ${r.name}`);
        expect(components.sort()).toEqual([
            "vllm-fleet:node:CompileCache spark1-compile-cache",
            "vllm-fleet:node:CompileCache spark2-compile-cache",
            "vllm-fleet:node:SparkNode spark1",
            "vllm-fleet:node:SparkNode spark2",
            "vllm-fleet:ray:RayCluster ray",
            "vllm-fleet:vllm:ServeArgsCheck vllm-args-check",
            "vllm-fleet:vllm:VllmService vllm",
        ]);
        const check = run.resources.find((r) => r.type === "vllm-fleet:vllm:ServeArgsCheck");
        expect(check && parentName(run, check)).toBe("spark1");
    });

    it("parents every command to the component it belongs to", () => {
        const parents = Object.fromEntries(run.resources.filter((r) => r.type === COMMAND).map((r) => [r.name, parentName(run, r)]));
        expect(parents).toEqual({
            "ray-spark1-ray-head": "ray",
            "ray-spark1-ray-joined": "ray",
            "ray-spark2-ray-worker": "ray",
            "ray-spark2-ray-joined": "ray",
            "ray-ready": "ray",
            "vllm-serve": "vllm",
            "vllm-watchdog": "vllm",
            "vllm-fabric-spark1": "vllm",
            "vllm-fabric-spark2": "vllm",
            "vllm-args-check": "vllm-args-check",
            "vllm-args-check-pythonpath": "vllm-args-check",
            "spark1-compile-cache": "spark1-compile-cache",
            "spark2-compile-cache": "spark2-compile-cache",
        });
        // The check was the first node's own child before it had a component: the same resource.
        expect(run.byName("vllm-args-check").aliases.join(" ")).toContain("SparkNode");
    });

    it("starts the watchdog once vLLM serves, on the first node, so destroy removes it before stopping vLLM", () => {
        const watchdog = run.byName("vllm-watchdog");
        expect(watchdog.dependencies).toContain(run.byName("vllm-serve").urn);
        expect(unsecret(watchdog.inputs).node).toBe("spark1");
        const args = dockerRunArgs(run, "vllm-watchdog");
        expect(args).toEqual(expect.arrayContaining(["--entrypoint=python3", "--restart", "unless-stopped", "--volume", "/var/run/docker.sock:/var/run/docker.sock"]));
        expect(args).not.toContain("--ipc");
        const env = envOf(args);
        expect(env).toMatchObject({ WATCHDOG_EXECUTOR: "ray", WATCHDOG_CONTAINER: "vllm-fleet-ray", WATCHDOG_PORT: "30000", WATCHDOG_FAILURES: "3", WATCHDOG_MAX_RESTARTS: "3" });
        // It starts vllm serve again with the arguments the last start left in the Ray head.
        expect(env.WATCHDOG_SERVE_ARGS_FILE).toBe("/tmp/vllm-fleet-serve.args");
        const start = unsecret(run.byName("vllm-serve").inputs.create) as string;
        expect(start).toContain("ARGS_FILE='/tmp/vllm-fleet-serve.args'");
        const json = /^SERVE_ARGS_JSON='(.*)'$/m.exec(start)?.[1] ?? "";
        expect(JSON.parse(json)).toEqual(expect.arrayContaining(["serve", "--distributed-executor-backend", "ray"]));
        // It restarts vllm serve with the lifecycle vllm-serve's start and stop run in the Ray head: one text.
        const lifecycle = readScript(VLLM_LIFECYCLE);
        expect(env.WATCHDOG_LIFECYCLE).toBe(lifecycle);
        const stop = unsecret(run.byName("vllm-serve").inputs.delete) as string;
        for (const program of [start, stop]) {
            expect(program).toContain(`LIFECYCLE=${shQuote(lifecycle)}\n`);
        }
    });

    it("restarts vllm serve, and leaves the watchdog as it is, when only a serve argument changes", async () => {
        const changed = await runProgram({ ...duo, vllm: { ...duo.vllm, maxModelLen: 16384 } }, probe);
        // Each run here makes new revisions (no container was observed); an up keeps those it finds alive.
        const program = (r: MockRun, name: string) => (unsecret(r.byName(name).inputs.create) as string).replace(/vllm-fleet\.revision=\w+/g, "vllm-fleet.revision=R");
        expect(program(changed, "vllm-serve")).not.toEqual(program(run, "vllm-serve"));
        expect(program(changed, "vllm-serve")).toContain("16384");
        expect(program(changed, "vllm-watchdog")).toEqual(program(run, "vllm-watchdog"));
        expect(program(changed, "ray-spark1-ray-head")).toEqual(program(run, "ray-spark1-ray-head"));
    });

    it("checks the serve arguments with the image's vLLM, on the first node, before the Ray head starts", () => {
        const check = run.byName("vllm-args-check");
        expect(unsecret(check.inputs).node).toBe("spark1");
        const program = unsecret(check.inputs.create);
        expect(program).toContain("vllm.entrypoints.cli.serve import ServeSubcommand");
        expect(program).toMatch(/SERVE_ARGS=\('serve' '\/models\/[^)]*'--reasoning-parser' 'qwen3' '--tool-call-parser' 'qwen3_coder'/);
        expect(program).toContain("'tool call parser|vllm.toolCallParser'");
        expect(run.byName("ray-spark1-ray-head").dependencies).toContain(check.urn);
    });

    it("reads each node's NCCL transport once vLLM serves, and outputs it per node", () => {
        for (const node of ["spark1", "spark2"]) {
            const fabric = run.byName(`vllm-fabric-${node}`);
            expect(unsecret(fabric.inputs).node).toBe(node);
            expect(fabric.dependencies).toContain(run.byName("vllm-serve").urn);
            expect(unsecret(fabric.inputs.create)).toContain("POLICY='refuse'");
        }
        expect(run.outputs.fabricTransport).toEqual({ spark1: "IB", spark2: "IB" });
    });

    it("has Docker restart the Ray containers on failure, a bounded number of times", () => {
        expect(dockerRunArgs(run, "ray-spark1-ray-head")).toEqual(expect.arrayContaining(["--restart", "on-failure:10"]));
        expect(dockerRunArgs(run, "ray-spark2-ray-worker")).toEqual(expect.arrayContaining(["--restart", "on-failure:10"]));
    });

    it("starts each worker after its head's container, not after its join, and vLLM only after the cluster is ready", () => {
        const urn = (name: string) => run.byName(name).urn;
        // The worker's spec holds the head container's id: created after it, replaced with it.
        expect(run.byName("ray-spark2-ray-worker").dependencies).toContain(urn("ray-spark1-ray-head"));
        expect(run.byName("ray-spark2-ray-worker").dependencies).not.toContain(urn("ray-spark1-ray-joined"));
        expect(dockerRunArgs(run, "ray-spark2-ray-worker")).toEqual(expect.arrayContaining(["--label", "vllm-fleet.ray-head=ray-spark1-ray-head"]));
        expect(run.byName("ray-spark2-ray-joined").dependencies).toEqual(expect.arrayContaining([urn("ray-spark2-ray-worker")]));
        expect(run.byName("ray-ready").dependencies).toEqual(expect.arrayContaining([urn("ray-spark1-ray-joined"), urn("ray-spark2-ray-joined")]));
        expect(run.byName("vllm-serve").dependencies).toContain(urn("ray-ready"));
    });

    it("watches a Ray container in its join wait, not in its start", () => {
        const watchOf = (name: string) => /WATCH_SECONDS='?(\d+)'?/.exec(programOf(unsecret(run.byName(name).inputs.create)))?.[1];
        expect(watchOf("ray-spark1-ray-head")).toBe("0");
        expect(watchOf("ray-spark2-ray-worker")).toBe("0");
    });

    it("pins every node to its own fabric address and interface", () => {
        for (const [name, node] of [
            ["ray-spark1-ray-head", "spark1"],
            ["ray-spark2-ray-worker", "spark2"],
        ]) {
            const args = dockerRunArgs(run, name);
            const {
                RAY_prestart_worker_first_driver: _prestart,
                RAY_gcs_rpc_server_reconnect_timeout_s: _reconnect,
                VLLM_CONFIG_ROOT: _root,
                RAY_AUTH_MODE: _mode,
                RAY_AUTH_TOKEN: _token,
                VLLM_ENGINE_READY_TIMEOUT_S: _engineWait,
                PYTHONPATH: _keyCheck,
                ...rest
            } = envOf(args);
            // The compile caches' variables are no pins (compileCache.test.ts).
            const pins = Object.fromEntries(Object.entries(rest).filter(([key]) => !(key in CACHE_ENV)));
            expect(pins).toEqual({
                VLLM_HOST_IP: fabricIps[node],
                NCCL_SOCKET_IFNAME: "enp1s0f1np1",
                GLOO_SOCKET_IFNAME: "enp1s0f1np1",
                NCCL_IB_HCA: "roceP2p1s0f1,rocep1s0f1",
                NCCL_DEBUG: "INFO",
                NCCL_DEBUG_SUBSYS: "INIT,NET",
                RAY_memory_monitor_refresh_ms: "0",
                RAY_USAGE_STATS_ENABLED: "0",
                VLLM_NO_USAGE_STATS: "1",
            });
            expect(args.join(" ")).not.toContain(mgmtIps[node]);
            expect(args).toEqual(expect.arrayContaining(["--node-ip-address", fabricIps[node], "--num-gpus", "1", "--disable-usage-stats"]));
        }
    });

    it("turns on Ray token authentication on every node, with the stack's token, never on a command line", () => {
        const token = "generated-ray-token";
        for (const name of ["ray-spark1-ray-head", "ray-spark2-ray-worker"]) {
            const args = dockerRunArgs(run, name);
            expect(envOf(args)).toMatchObject({ RAY_AUTH_MODE: "token", RAY_AUTH_TOKEN: FROM_ENVIRONMENT });
            expect(args.join(" ")).not.toContain(token);
            expect(unsecret(run.byName(name).inputs.create)).toContain(`RAY_AUTH_TOKEN=${token}`);
        }
        expect(run.byName("ray-token").inputs).toMatchObject({ purpose: "ray-token", rotation: "" });
    });

    it("makes an API key when none is set, given to vLLM and the watchdog and put out as a secret", () => {
        const key = "generated-vllm-api-key";
        expect(run.outputs.apiKey).toBe(key);
        expect(unsecret(run.byName("vllm-serve").inputs.create)).toContain(key);
        expect(unsecret(run.byName("vllm-watchdog").inputs.create)).toContain(`VLLM_API_KEY=${key}`);
    });

    it("spares the head the idle workers Ray would prestart for the readiness gate's driver", () => {
        expect(envOf(dockerRunArgs(run, "ray-spark1-ray-head")).RAY_prestart_worker_first_driver).toBe("0");
        expect(envOf(dockerRunArgs(run, "ray-spark2-ray-worker")).RAY_prestart_worker_first_driver).toBeUndefined();
    });

    it("runs the head and joins workers to the head's fabric address", () => {
        const head = dockerRunArgs(run, "ray-spark1-ray-head");
        const worker = dockerRunArgs(run, "ray-spark2-ray-worker");
        // The image's entrypoint is replaced by `ray` itself (a cleared one would not survive the Docker provider).
        expect(head.slice(head.indexOf("--entrypoint=ray"))).toEqual([
            "--entrypoint=ray", "hellohal2064/vllm-qwen3.5-gb10:latest", "start", "--block", "--head", "--port", "6379", "--include-dashboard=false",
            "--node-ip-address", "192.168.200.12", "--num-gpus", "1", "--disable-usage-stats",
        ]);
        expect(worker).toEqual(expect.arrayContaining(["--address", "192.168.200.12:6379"]));
        for (const args of [head, worker]) {
            expect(args).toEqual(expect.arrayContaining(["--entrypoint=ray", "--network", "host", "--ipc", "host", "--gpus", "all"]));
            expect(args).toEqual(expect.arrayContaining(["--ulimit", "memlock=-1:-1", "--ulimit", "stack=67108864:67108864"]));
            expect(args).toEqual(expect.arrayContaining(["--volume", "/home/aurora/models/Qwen3.5-122B-A10B-FP8:/models/Qwen3.5-122B-A10B-FP8:ro"]));
        }
    });

    it("serves with the Ray backend and the configured flags", () => {
        expect(serveArgs(run.byName("vllm-serve").inputs.create)).toEqual([
            "serve", "/models/Qwen3.5-122B-A10B-FP8",
            "--served-model-name", "Qwen3.5-122B-A10B-FP8",
            "--host", "0.0.0.0", "--port", "30000",
            "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1",
            "--distributed-executor-backend", "ray",
            "--gpu-memory-utilization", "0.9",
            "--max-model-len", "32768",
            "--reasoning-parser", "qwen3",
            "--tool-call-parser", "qwen3_coder",
            "--enable-auto-tool-choice",
            "--trust-remote-code",
            "--allowed-origins", "[]",
            "--middleware", "vllm_fleet_key.RequireKey",
        ]);
    });

    it("carries the key check of every route in the Ray head, where vllm serve runs: its file, first on PYTHONPATH", () => {
        const head = dockerCalls(unsecret(run.byName("ray-spark1-ray-head").inputs.create));
        expect(head.map((args) => args[0]).filter((verb) => ["run", "create", "cp", "start"].includes(verb))).toEqual(["create", "cp", "start"]);
        expect(envOf(dockerRunArgs(run, "ray-spark1-ray-head")).PYTHONPATH).toBe("/opt/vllm-fleet/python");
        // The workers run no API server: they carry nothing of it.
        const worker = dockerRunArgs(run, "ray-spark2-ray-worker");
        expect(worker[0]).toBe("run");
        expect(envOf(worker).PYTHONPATH).toBeUndefined();
    });

    it("exports the endpoint, the model and each node's fabric address", () => {
        expect(run.outputs.endpoint).toBe("http://10.1.230.180:30000/v1");
        expect(run.outputs.model).toBe("Qwen3.5-122B-A10B-FP8");
        expect(run.outputs.fabricIps).toEqual({ spark1: "192.168.200.12", spark2: "192.168.200.13" });
        expect(run.outputs.rayHead).toBe("192.168.200.12:6379");
    });

    it("exports the image with the vLLM and Ray versions its argument check found in it", () => {
        expect(run.outputs.image).toEqual({ name: expect.any(String), vllm: "0.17.1", ray: "2.53.0" });
    });

    it("keeps the SSH key secret and out of every command line", () => {
        for (const resource of run.resources.filter((r) => r.type === COMMAND)) {
            expect(resource.inputs.create).not.toContain("PRIVATE KEY");
        }
    });
});

describe("the pulumi-command runner", async () => {
    const run = await runProgram({ ...duo, commandRunner: "pulumi-command" }, probe);

    it("uses remote.Command with a short dial limit and no previous output in the environment", () => {
        const commands = run.resources.filter((r) => r.type === "command:remote:Command");
        expect(commands).toHaveLength(13);
        for (const resource of commands) {
            expect(resource.inputs.addPreviousOutputInEnv).toBe(false);
            expect(unsecret(resource.inputs.connection)).toMatchObject({ user: "aurora", port: 22, dialErrorLimit: 3, perDialTimeout: 20 });
        }
        expect(unsecret(run.byName("vllm-serve").inputs.connection).host).toBe("10.1.230.180");
    });
});

describe("values reach the remote shell as data", async () => {
    const hostile = "x'; touch /tmp/pwned; '";
    const run = await runProgram({ ...duo, model: { path: "/models/q", servedName: hostile } }, probe);

    it("passes a hostile model name through as one argument and runs nothing", () => {
        const args = serveArgs(run.byName("vllm-serve").inputs.create);
        expect(args[args.indexOf("--served-model-name") + 1]).toBe(hostile);
        expect(fs.existsSync("/tmp/pwned")).toBe(false);
    });
});

describe("preflight stops the deployment before any container", () => {
    it("names the node whose image differs", async () => {
        const differing = (node: string) =>
            sparkProbeOutput(fabricIps[node], mgmtIps[node], { imageIdentity: node === "spark2" ? `sha256:${"b".repeat(64)}` : undefined });
        await expect(runProgram(duo, differing)).rejects.toThrow(
            new RegExp(
                `image hellohal2064/vllm-qwen3\\.5-gb10:latest differs across nodes by content \\(its layers or its config, not Docker's image id\\): ` +
                    `spark1 \\(classic store\\) have ${FAKE_IMAGE_IDENTITY.slice(7, 19)}; spark2 \\(classic store\\) have bbbbbbbbbbbb`,
            ),
        );
    });

    it("refuses a model that does not fit, with the numbers", async () => {
        // A dense 80-layer model of 300 GB: 139.7 GiB of weights per rank at TP=2, on 120 GB Sparks.
        const dense = { num_hidden_layers: 80, num_attention_heads: 64, num_key_value_heads: 8, hidden_size: 8192, head_dim: 128, max_position_embeddings: 131072, torch_dtype: "bfloat16" };
        const big = (node: string) => sparkProbeOutput(fabricIps[node], mgmtIps[node], { modelConfig: dense, weightBytes: 300e9 });
        await expect(runProgram(duo, big)).rejects.toThrow(/needs 14\d\.\d GiB per rank.*spark1 has \d+\.\d GiB usable/s);
    });

    it("counts GPUs against TP×PP, naming the keys to change", async () => {
        await expect(runProgram({ ...duo, parallelism: { tensor: 3 } }, probe)).rejects.toThrow(
            /TP×PP needs 3 GPUs but the nodes have 2 \(spark1: 1, spark2: 1\); expected at most 2 \(the GPUs of the nodes\): set vllm-fleet:parallelism\.tensor × vllm-fleet:parallelism\.pipeline to 2 or less, or add nodes to vllm-fleet:nodes/,
        );
    });

    it("names a node with no address in the fabric subnet, and the key to change", async () => {
        await expect(runProgram({ ...duo, fabric: { subnet: "192.168.100.0/24" } }, probe)).rejects.toThrow(
            /node spark1: no interface has an address in the fabric subnet 192\.168\.100\.0\/24; it has: eth0 10\.1\.230\.180\/24; enp1s0f1np1 192\.168\.200\.12\/24; expected one address in it on every node: set vllm-fleet:fabric\.subnet/,
        );
    });
});

describe("config errors", () => {
    it("fail before any resource is registered", async () => {
        const attempt = runProgram({ ...duo, vllm: { gpuMemoryUtilization: 2 } }, probe);
        await expect(attempt).rejects.toThrow(/vllm-fleet:vllm\.gpuMemoryUtilization: got 2/);
    });

    it("ask for an SSH key when none is configured", async () => {
        await expect(runProgram(duo, probe, {})).rejects.toThrow(/vllm-fleet:sshPrivateKey: missing; expected the SSH private key as a secret/);
    });
});

describe("the mp executor (vLLM's native multi-node)", async () => {
    const run = await runProgram({ ...duo, executor: "mp" }, probe, {
        sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----",
        vllmApiKey: "sk-test-key",
    });

    it("has no Ray cluster: a vLLM container per node and a readiness gate on node 0", () => {
        expect(run.resources.some((resource) => resource.type === "vllm-fleet:ray:RayCluster")).toBe(false);
        const serving = run.resources.filter((r) => r.type === COMMAND && parentName(run, r) === "vllm").map((r) => r.name);
        expect(serving.sort()).toEqual(["vllm-fabric-spark1", "vllm-fabric-spark2", "vllm-ready", "vllm-spark1-rank0", "vllm-spark2-rank1", "vllm-watchdog"]);
        expect(run.byName("vllm-ready").dependencies).toEqual(
            expect.arrayContaining([run.byName("vllm-spark1-rank0").urn, run.byName("vllm-spark2-rank1").urn]),
        );
        expect(run.outputs.rayHead).toBe("");
        // Both ranks start after the image's vLLM accepted rank 0's arguments.
        for (const rank of ["vllm-spark1-rank0", "vllm-spark2-rank1"]) {
            expect(run.byName(rank).dependencies).toContain(run.byName("vllm-args-check").urn);
        }
        expect(unsecret(run.byName("vllm-args-check").inputs.create)).toMatch(/SERVE_ARGS=\('serve' .*'--nnodes' '2' '--node-rank' '0' '--master-addr' '192\.168\.200\.12'/);
        expect(run.outputs.fabricIps).toEqual({ spark1: "192.168.200.12", spark2: "192.168.200.13" });
    });

    it("runs rank 0 and headless ranks that rendezvous on node 0's fabric address", () => {
        const rank0 = dockerRunArgs(run, "vllm-spark1-rank0");
        const rank1 = dockerRunArgs(run, "vllm-spark2-rank1");
        // After the keeper (components/scripts/vllm-rank.py), which runs vLLM as its child.
        const tail = (args: string[]) => args.slice(args.indexOf("--entrypoint=python3"));
        expect(tail(rank0).slice(2, 5)).toEqual(["/opt/vllm-fleet/vllm-rank.py", "vllm", "serve"]);
        expect(tail(rank0)).toEqual(expect.arrayContaining(["--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", "0", "--master-addr", "192.168.200.12", "--master-port", "29501"]));
        expect(tail(rank0)).not.toContain("--headless");
        expect(tail(rank1)).toEqual(expect.arrayContaining(["--node-rank", "1", "--master-addr", "192.168.200.12", "--headless"]));
        expect(envOf(rank1)).toMatchObject({ VLLM_HOST_IP: "192.168.200.13", NCCL_SOCKET_IFNAME: "enp1s0f1np1", GLOO_SOCKET_IFNAME: "enp1s0f1np1" });
        // The headless rank's spec holds rank 0's container id: created after it, replaced with it
        // (and, delete before replace, removed before it).
        expect(run.byName("vllm-spark2-rank1").dependencies).toContain(run.byName("vllm-spark1-rank0").urn);
        expect(rank1).toEqual(expect.arrayContaining(["--label", "vllm-fleet.rank0=vllm-spark1-rank0"]));
        expect(rank0.join(" ")).not.toContain("vllm-fleet.rank0=");
        // The API key reaches the server in its environment, never in a command line: docker run
        // names it and takes the value from the environment the program (on stdin) sets.
        expect(rank0).toEqual(expect.arrayContaining(["--env", "VLLM_API_KEY"]));
        expect(rank0.join(" ")).not.toContain("sk-test-key");
        expect(unsecret(run.byName("vllm-spark1-rank0").inputs.create)).toContain("SECRET_ENV=('VLLM_API_KEY=sk-test-key')");
        // Its watchdog restarts rank 0's container: it runs nothing inside it.
        expect(envOf(dockerRunArgs(run, "vllm-watchdog"))).not.toHaveProperty("WATCHDOG_LIFECYCLE");
    });

    it("removes the other executor's container first, which would hold the GPU", () => {
        const calls = dockerCalls(unsecret(run.byName("vllm-spark2-rank1").inputs.create));
        const removals = calls.filter((args) => args[0] === "rm").map((args) => args[args.length - 1]);
        expect(removals).toEqual(["vllm-fleet-vllm", "vllm-fleet-ray"]);
    });

    it("watches a headless rank for two seconds after its start (nothing else on its node does)", () => {
        const calls = dockerCalls(unsecret(run.byName("vllm-spark2-rank1").inputs.create));
        // The rank carries its keeper as a file: created, the file copied in, then started.
        const run0 = calls.findIndex((args) => args[0] === "start");
        const checks = calls.slice(run0 + 1).filter((args) => args[0] === "inspect" && args.includes("{{.State.Status}}"));
        // Right after `docker run`, then every half second for 2 s.
        expect(checks).toHaveLength(5);
    });
});

describe("the API's address and key (vllm.host, vllm.apiKey)", async () => {
    const fabric = await runProgram({ ...duo, vllm: { ...duo.vllm, host: "fabric" } }, probe);
    const open = await runProgram({ ...duo, executor: "mp", vllm: { ...duo.vllm, apiKey: "none" } }, probe);

    it("with vllm.host fabric, binds the API to the first node's fabric address, and every probe and the endpoint go there", () => {
        const serve = unsecret(fabric.byName("vllm-serve").inputs.create);
        expect(serve).toMatch(/SERVE_ARGS=\('serve' .*'--host' '192\.168\.200\.12'/);
        expect(serve).toContain("HOST='192.168.200.12'");
        expect(unsecret(fabric.byName("vllm-args-check").inputs.create)).toContain("'--host' '192.168.200.12'");
        expect(envOf(dockerRunArgs(fabric, "vllm-watchdog"))).toMatchObject({ WATCHDOG_HOST: "192.168.200.12" });
        expect(fabric.outputs.endpoint).toBe("http://192.168.200.12:30000/v1");
    });

    it("by default listens on every address and probes 127.0.0.1", async () => {
        const run = await runProgram(duo, probe);
        expect(unsecret(run.byName("vllm-serve").inputs.create)).toMatch(/'--host' '0\.0\.0\.0'.*\n(.*\n)*HOST='127\.0\.0\.1'/);
        expect(run.outputs.endpoint).toBe("http://10.1.230.180:30000/v1");
    });

    it("with vllm.apiKey none, makes no key and gives vLLM none", () => {
        expect(open.resources.some((r) => r.name === "vllm-api-key")).toBe(false);
        expect(open.outputs.apiKey).toBe("");
        expect(envOf(dockerRunArgs(open, "vllm-spark1-rank0")).VLLM_API_KEY).toBeUndefined();
    });

    it("refuses vllm.apiKey none beside the secret vllmApiKey, naming both", async () => {
        await expect(
            runProgram({ ...duo, vllm: { ...duo.vllm, apiKey: "none" } }, probe, { sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----", vllmApiKey: "sk-test-key" }),
        ).rejects.toThrow(/vllm-fleet:vllm\.apiKey.*not none while the secret vllm-fleet:vllmApiKey is set/);
    });
});

describe("image delivery", () => {
    it("copies from the first node to the others over the fabric, node to node, before any container starts", async () => {
        const run = await runProgram({ ...duo, image: { name: "vllm:test", source: "copy" } }, probe);
        expect(run.resources.some((r) => r.name === "spark1-image")).toBe(false);
        const copy = run.byName("spark2-image");
        expect(run.byName("ray-spark2-ray-worker").dependencies).toContain(copy.urn);
        // The receiver on the target's fabric address, for the first node's only; the first node
        // streams `docker save` to it: nothing is piped through this machine.
        const receive = programOf(unsecret(copy.inputs.create));
        expect(receive).toContain("BIND_IP='192.168.200.13'");
        expect(receive).toContain("SENDER_IP='192.168.200.12'");
        expect(receive).toContain("docker load");
        const peer = unsecret(copy.inputs.peer);
        expect(peer).toMatchObject({ node: "spark1", host: "10.1.230.180" });
        expect(peer.program).toContain("TARGET_IP='192.168.200.13'");
        expect(peer.program).toContain("docker save");
        expect(copy.inputs).not.toHaveProperty("source");
        // A secret for this copy, the same on both sides, not the weights' one.
        const secretOf = (program: string) => /SECRET='([0-9a-f]{32})'/.exec(program)?.[1];
        expect(secretOf(receive)).toBeDefined();
        expect(secretOf(peer.program)).toBe(secretOf(receive));
    });

    it("tells the sender, without loading anything, when the target already has the id", async () => {
        const run = await runProgram({ ...duo, image: { name: "vllm:test", source: "copy" } }, probe);
        const receive = unsecret(run.byName("spark2-image").inputs.create) as string;
        const calls = dockerCalls(receive.replace(/python3 -c "\$FABRIC_STREAM"/g, "true"));
        expect(calls.map((args) => args[0])).toEqual(["image"]);
    });

    it("has the sender refuse, naming both identities, when the first node's image changed since the read", async () => {
        const run = await runProgram({ ...duo, image: { name: "vllm:test", source: "copy" } }, probe);
        const sender = unsecret(run.byName("spark2-image").inputs.peer).program as string;
        expect(sender).toContain(`WANT_IDENTITY='${FAKE_IMAGE_IDENTITY}'`);
        const other = `sha256:${"f".repeat(64)}`;
        const outcome = runWithFakeDocker(bashCommand(sender), { images: { "vllm:test": other } });
        expect(outcome.status).not.toBe(0);
        expect(outcome.stderr).toContain(`vllm:test here is ${standInIdentity(other)}, not ${FAKE_IMAGE_IDENTITY} as read at the start of this run (content identities)`);
        expect(outcome.calls.map((args) => args[0])).toEqual(["image"]);
    });

    it("runs a copy from the builtin runner's provider as Pulumi serializes it, in a Node process of its own elsewhere", async () => {
        const run = await runProgram({ ...duo, image: { name: "vllm:test", source: "copy" } }, probe);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "serialized-provider-"));
        try {
            fs.writeFileSync(path.join(dir, "provider.js"), unsecret(run.byName("spark2-image").inputs.__provider));
            // An ssh that runs its last argument (the remote command line) with sh, as sshd does.
            fs.mkdirSync(path.join(dir, "bin"));
            fs.writeFileSync(path.join(dir, "bin", "ssh"), '#!/bin/sh\nfor arg; do remote=$arg; done\nexec sh -c "$remote"\n', { mode: 0o755 });
            const props = { name: "spark2-image", node: "spark2", host: "10.1.230.181", port: 22, user: "aurora", privateKey: "key", connectTimeoutSeconds: 20, create: "echo received", peer: { node: "spark1", host: "10.1.230.180", port: 22, user: "aurora", program: "echo sent" } };
            const script = `require("./provider.js").handler().create(${JSON.stringify(props)}).then((result) => process.stdout.write(result.outs.stdout))`;
            const stdout = execFileSync(process.execPath, ["-e", script], { cwd: dir, encoding: "utf8", env: { ...process.env, PATH: `${path.join(dir, "bin")}:${process.env.PATH}` } });
            expect(stdout).toBe("received\nspark1: sent\n");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("pulls on every node with source pull, and reports the image's content identity", async () => {
        const run = await runProgram({ ...duo, image: { name: "vllm:test", source: "pull" } }, probe);
        for (const node of ["spark1", "spark2"]) {
            const outcome = runWithFakeDocker(bashCommand(run.byName(`${node}-image`).inputs.create), {});
            expect(outcome.status).toBe(0);
            expect(outcome.calls[0]).toEqual(["pull", "--quiet", "vllm:test"]);
            expect(outcome.stdout.trim()).toBe(`image-pulled vllm:test ${FAKE_IMAGE_IDENTITY}`);
        }
    });

    it("pulls a name pinned by digest and checks that the node knows what it got by that digest", async () => {
        const digest = `sha256:${"d".repeat(64)}`;
        const name = `registry.local:5000/vllm:26.01@${digest}`;
        const run = await runProgram({ ...duo, image: { name, source: "pull" } }, probe);
        const program = run.byName("spark2-image").inputs.create;
        expect(program).toContain(`DIGEST='${digest}'`);
        const pinned = runWithFakeDocker(bashCommand(program), { repoDigests: { [name]: [`registry.local:5000/vllm@${digest}`] } });
        expect(pinned.status).toBe(0);
        expect(pinned.calls[0]).toEqual(["pull", "--quiet", name]);
        expect(pinned.stdout.trim()).toBe(`image-pulled ${name} ${FAKE_IMAGE_IDENTITY}`);
        // A registry (or a proxy) that answered with another manifest: the step fails, naming what came.
        const other = `sha256:${"e".repeat(64)}`;
        const wrong = runWithFakeDocker(bashCommand(program), { repoDigests: { [name]: [`registry.local:5000/vllm@${other}`] } });
        expect(wrong.status).not.toBe(0);
        expect(wrong.stderr).toContain(`docker pull ${name} gave an image this node does not know by ${digest} (its registry digests: registry.local:5000/vllm@${other}); expected the pinned build`);
        expect(wrong.stdout).not.toContain("image-pulled");
    });

    // The daemon's words as a real registry (Debian's docker-registry, distribution 2.8) and Docker
    // 20.10 made them on the proving ground; each failure says why and what to do, with the key.
    const registry = "10.230.3.250:5000";
    const pinned = `${registry}/vllm-fleet/workload@sha256:${"d".repeat(64)}`;
    it.each([
        {
            cause: "a digest the registry does not have",
            name: pinned,
            error: `manifest for ${pinned} not found: manifest unknown: manifest unknown`,
            remedy: `${registry} has no manifest for that digest: push the image there, or correct vllm-fleet:image.name (pinned: name@sha256:<the digest the registry reports after the push>)`,
        },
        {
            cause: "a tag the registry does not have",
            name: `${registry}/vllm-fleet/workload:nosuchtag`,
            error: `manifest for ${registry}/vllm-fleet/workload:nosuchtag not found: manifest unknown: manifest unknown`,
            remedy: `${registry} has no manifest for that tag: push the image there`,
        },
        {
            cause: "a plain-HTTP registry the node's Docker does not trust",
            name: "registry.lan:5000/vllm-fleet/workload:e2e",
            error: 'Get "https://registry.lan:5000/v2/": http: server gave HTTP response to HTTPS client',
            remedy: 'registry.lan:5000 serves plain HTTP, which this node\'s Docker does not trust; the fix is on the node: add "insecure-registries": ["registry.lan:5000"] to /etc/docker/daemon.json and restart Docker',
        },
        {
            cause: "a registry that does not answer",
            name: `${registry.replace(":5000", ":5001")}/vllm-fleet/workload:e2e`,
            error: `Get "https://10.230.3.250:5001/v2/": dial tcp 10.230.3.250:5001: connect: connection refused`,
            remedy: "this node cannot reach 10.230.3.250:5001; the fix is on the node or the registry",
        },
        {
            cause: "a registry name the node cannot resolve",
            name: "nohost.invalid:5000/x/y:1",
            error: 'Get "https://nohost.invalid:5000/v2/": dial tcp: lookup nohost.invalid on 127.0.0.11:53: read udp 127.0.0.1:34186->127.0.0.11:53: i/o timeout',
            remedy: "this node cannot reach nohost.invalid:5000",
        },
        {
            cause: "Docker Hub refusing a repository",
            name: "vllm/private:1",
            error: "pull access denied for vllm/private, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
            remedy: "docker.io refused this node's credentials; the fix is on the node: docker login docker.io as the SSH user, or correct vllm-fleet:image.name",
        },
    ])("a failed pull ($cause) says why in the daemon's words and what to do", async ({ name, error, remedy }) => {
        const run = await runProgram({ ...duo, image: { name, source: "pull" } }, probe);
        const program = run.byName("spark1-image").inputs.create;
        expect(program).toContain("IMAGE_KEY='vllm-fleet:image.name'");
        const outcome = runWithFakeDocker(bashCommand(program), { pullError: error });
        expect(outcome.status).not.toBe(0);
        expect(outcome.stderr).toContain(`docker pull ${name} failed: ${error}; ${remedy}`);
        // Whole after the step's clip (500 characters): the failure's line is this one.
        expect([...outcome.stderr.trim()].length).toBeLessThanOrEqual(500);
        expect(outcome.stdout).not.toContain("image-pulled");
    });
});

describe("weight sync", () => {
    it("pushes from the first node to each other node over the fabric, before preflight", async () => {
        const run = await runProgram({ ...duo, model: { path: "/models/q", sync: "rsync" } }, probe);
        const receiveScript = programOf(unsecret(run.byName("spark2-weights-receive").inputs.create));
        expect(receiveScript).toContain("BIND_IP='192.168.200.13'");
        expect(receiveScript).toContain("SENDER_IP='192.168.200.12'");
        expect(receiveScript).toContain("FILES_PORT='28732'");
        expect(receiveScript).toContain("stop_weight_receivers");
        const send = run.byName("spark2-weights-send");
        expect(programOf(unsecret(send.inputs.create))).toContain("TARGET_IP='192.168.200.13'");
        expect(unsecret(send.inputs.connection ?? {}).host ?? send.inputs.host).toBe("10.1.230.180");
        expect(send.dependencies).toContain(run.byName("spark2-weights-receive").urn);
        expect(run.byName("spark2-weights-close").dependencies).toContain(send.urn);
        expect(run.resources.some((r) => r.name === "spark1-weights-receive")).toBe(false);
    });
});

describe("image stores and pins, said at preview", () => {
    it("warns when the nodes keep images in different stores, and serves them (one image, by content)", async () => {
        const pulumi = await import("@pulumi/pulumi");
        const warn = vi.spyOn(pulumi.log, "warn");
        try {
            const digest = `sha256:${"5".repeat(64)}`;
            const mixed = (node: string) =>
                sparkProbeOutput(fabricIps[node], mgmtIps[node], {
                    imageStore: node === "spark2" ? "containerd" : "classic",
                    repoDigests: [`hellohal2064/vllm-qwen3.5-gb10@${digest}`],
                });
            const run = await runProgram(duo, mixed);
            expect(run.resources.some((resource) => resource.name === "vllm-serve")).toBe(true);
            const said = warn.mock.calls.map((call) => String(call[0]));
            expect(said).toContainEqual(expect.stringMatching(/^the nodes keep images in different Docker image stores: spark1 classic \(overlay2\), spark2 containerd \(overlayfs\); served all the same/));
            expect(said).toContain(
                `vllm-fleet:image.name hellohal2064/vllm-qwen3.5-gb10:latest is a tag, which can move to another build (nightly images do); spark1 has it as hellohal2064/vllm-qwen3.5-gb10:latest@${digest}: set vllm-fleet:image.name to that to pin this build`,
            );
        } finally {
            warn.mockRestore();
        }
    });
});
