/**
 * The e2e tests' handle on the proving ground (test/sim): bring up simulated Sparks, read their
 * cluster.json, run commands inside them, and tear everything down.
 */
import { execFile, execFileSync } from "child_process";
import { promisify } from "util";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ConfigMap, Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { findProjectRoot } from "../../infra/core/project";

// From the project root, so that compiled code (bin/, e.g. the benchmark) finds the same files.
const REPO_ROOT = findProjectRoot(__dirname);
export const SIM = path.join(REPO_ROOT, "test/sim/sim.sh");

export interface SimNode {
    readonly name: string;
    readonly index: number;
    readonly mgmtIp: string;
    readonly fabricIp: string;
    readonly fabricIface: string;
    readonly sshHost: string;
    readonly sshPort: number;
    readonly sshUser: string;
    readonly sshHostKey: string;
    /** Whether the node has the stand-in RDMA device nodes (/dev/infiniband/*). */
    readonly rdma?: boolean;
    /** The node's Docker image store: `classic` (overlay2) or `containerd` (the containerd-snapshotter feature). */
    readonly imageStore?: ImageStore;
}

/** A simulated node's Docker image store (sim.sh up --stores). */
export type ImageStore = "classic" | "containerd";

export interface SimCluster {
    readonly cluster: string;
    readonly sshUser: string;
    readonly sshPrivateKeyPath: string;
    readonly workloadImage: string;
    readonly workloadImageId: string;
    /** The workload image's content identity (image-identity.sh): the same on every node, whatever its store. */
    readonly workloadImageIdentity: string;
    readonly mgmtSubnet: string;
    /** The management interface's name, the same on every node. */
    readonly mgmtIface: string;
    readonly fabricSubnet: string;
    /** The cluster's registry (`sim.sh up --registry`), `10.230.K.250:5000`; null without one. */
    readonly registry?: string | null;
    readonly nodes: readonly SimNode[];
}

/**
 * Runs sim.sh without blocking the event loop: bringing a cluster up takes tens of seconds, and a
 * test worker that blocks that long loses its line to the test runner.
 */
async function sim(args: string[], timeoutMs = 20 * 60_000): Promise<string> {
    try {
        const { stdout } = await promisify(execFile)("bash", [SIM, ...args], { encoding: "utf8", timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
        return stdout;
    } catch (error) {
        const failure = error as Error & { stderr?: string };
        throw new Error(`sim.sh ${args.join(" ")} failed: ${failure.message}\n${failure.stderr ?? ""}`);
    }
}

/** How simulated nodes differ from a default Spark. */
export interface SimOptions {
    /** Indexes of nodes left without the stand-in RDMA device nodes. */
    readonly noRdma?: readonly number[];
    /** The fabric interface name of each node, by index. */
    readonly fabricIfaces?: readonly string[];
    /** A registry (Debian's docker-registry) on the management network, trusted by every node. */
    readonly registry?: boolean;
    /** The Docker image store of each node, by index (default: classic on every node). */
    readonly stores?: readonly ImageStore[];
    /** The real-vLLM workload image (sim.sh real-image), on the first node only. */
    readonly real?: boolean;
    /** The monitoring image (sim.sh monitoring-image: Prometheus and the node exporter) on every node. */
    readonly monitoring?: boolean;
}

/** Brings up `nodes` simulated Sparks as cluster `name` and returns its description. */
export async function simUp(name: string, nodes: number, options: SimOptions = {}): Promise<SimCluster> {
    const extra = [
        ...(options.noRdma?.length ? ["--no-rdma", options.noRdma.join(",")] : []),
        ...(options.fabricIfaces?.length ? ["--fabric-ifaces", options.fabricIfaces.join(",")] : []),
        ...(options.registry ? ["--registry"] : []),
        ...(options.stores?.length ? ["--stores", options.stores.join(",")] : []),
        ...(options.real ? ["--real"] : []),
        ...(options.monitoring ? ["--monitoring"] : []),
    ];
    // The real-vLLM image's first build downloads and installs 3 GB of wheels.
    await sim(["up", "-n", String(nodes), "-c", name, ...extra], options.real ? 30 * 60_000 : undefined);
    const file = path.join(REPO_ROOT, `test/sim/.state/${name}/cluster.json`);
    return JSON.parse(fs.readFileSync(file, "utf8")) as SimCluster;
}

/**
 * Pushes `image` (this machine's, else node 0's) into the cluster's registry as `repository` (`repo:tag`)
 * through node 0, which keeps no reference to it; returns the name pinned by the digest the registry
 * reports (`<registry>/<repo>@sha256:...`).
 */
export async function simPush(name: string, image: string, repository: string): Promise<string> {
    return (await sim(["push", "-c", name, image, repository], 5 * 60_000)).trim();
}

/** Removes the cluster and everything it made (containers, networks, volumes). */
export async function simDown(name: string): Promise<void> {
    await sim(["down", "-c", name], 5 * 60_000);
}

/** Runs a command in a simulated node (as root), returning stdout. */
export function onNode(node: SimNode, command: string): string {
    return execFileSync("docker", ["exec", node.name, "bash", "-c", command], { encoding: "utf8", timeout: 120_000 });
}

/** A completion as the vLLM stand-in answers it: the text and, per rank, the address it ran on. */
export interface CompletionBody {
    choices: { text: string }[];
    vllm_fleet_ranks: { rank: number; ip: string }[];
}

/** Asks the served model for a short completion; anything but 200 fails with the answer. */
export async function complete(endpoint: string, model: string, apiKey = ""): Promise<CompletionBody> {
    const response = await fetch(`${endpoint}/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model, prompt: "Hello from the test", max_tokens: 8 }),
    });
    if (response.status !== 200) {
        throw new Error(`completion from ${endpoint}: HTTP ${response.status}: ${await response.text()}`);
    }
    return (await response.json()) as CompletionBody;
}

/** Bytes an interface received and sent. */
export interface Bytes {
    readonly rx: number;
    readonly tx: number;
}

/** Per node, by index: what its fabric interface and its management interface moved. */
export interface Traffic {
    readonly fabric: readonly Bytes[];
    readonly mgmt: readonly Bytes[];
}

/** What an interface of a node has received and sent so far (the containers run in the node's network namespace). */
export function interfaceBytes(node: SimNode, iface: string): Bytes {
    const [rx, tx] = onNode(node, `cat /sys/class/net/${iface}/statistics/rx_bytes /sys/class/net/${iface}/statistics/tx_bytes`).trim().split("\n").map(Number);
    return { rx, tx };
}

/** Each node's fabric and management counters now. */
function trafficCounters(cluster: SimCluster): Traffic {
    return { fabric: cluster.nodes.map((node) => interfaceBytes(node, node.fabricIface)), mgmt: cluster.nodes.map((node) => interfaceBytes(node, cluster.mgmtIface)) };
}

function trafficBetween(before: Traffic, after: Traffic): Traffic {
    const minus = (now: readonly Bytes[], then: readonly Bytes[]) => now.map((bytes, index) => ({ rx: bytes.rx - then[index].rx, tx: bytes.tx - then[index].tx }));
    return { fabric: minus(after.fabric, before.fabric), mgmt: minus(after.mgmt, before.mgmt) };
}

/**
 * What every node's interfaces moved while `work` ran (`busy`), and over as long again right after it,
 * with nothing asked of the cluster (`idle`: the rank keepers' probes, Ray's heartbeats, the bridge's
 * chatter), so that the ranks' own bytes can be told from what flows anyway.
 */
export async function trafficOf(cluster: SimCluster, work: () => Promise<void>): Promise<{ busy: Traffic; idle: Traffic }> {
    const start = trafficCounters(cluster);
    const startedAt = Date.now();
    await work();
    const done = trafficCounters(cluster);
    await new Promise((resolve) => setTimeout(resolve, Date.now() - startedAt));
    return { busy: trafficBetween(start, done), idle: trafficBetween(done, trafficCounters(cluster)) };
}

/** At most this many bytes each way on a headless node's management interface: the bridge's IPv6 and ARP chatter, not vLLM. */
const MGMT_CHATTER_BYTES = 8192;

/**
 * Where the ranks' traffic of `trafficOf` was not on the fabric: each node's fabric interface must
 * have moved more than `minBytes` more busy than idle, and no headless node's management interface
 * more than a little chatter either way (the first node's carries the clients' requests). With
 * `ways: "handed out"` the fabric is read only in the direction rank 0 hands the work out (the
 * first node's sends, every other node's receives): on the Ray lanes the answers coming back are
 * lost in Ray's own reports, bursts of tens of kB. Empty when every rank talked over the fabric.
 */
export function offFabric(traffic: { busy: Traffic; idle: Traffic }, minBytes: number, ways: "both" | "handed out" = "both"): string[] {
    const problems: string[] = [];
    traffic.busy.fabric.forEach((busy, index) => {
        const checked: (keyof Bytes)[] = ways === "both" ? ["rx", "tx"] : [index === 0 ? "tx" : "rx"];
        for (const way of checked) {
            const idle = traffic.idle.fabric[index][way];
            if (busy[way] - idle <= minBytes) {
                problems.push(`spark${index + 1}'s fabric ${way}: ${busy[way]} bytes busy, ${idle} idle; expected more than ${minBytes} more busy`);
            }
        }
    });
    traffic.busy.mgmt.forEach((busy, index) => {
        for (const way of ["rx", "tx"] as const) {
            if (index > 0 && busy[way] >= MGMT_CHATTER_BYTES) {
                problems.push(`spark${index + 1}'s management ${way}: ${busy[way]} bytes busy; expected under ${MGMT_CHATTER_BYTES}`);
            }
        }
    });
    return problems;
}

/** The config.json of the tiny model: an MoE of the Qwen shape, small enough for any node. */
export const TINY_MODEL_CONFIG = JSON.stringify({
    architectures: ["Qwen3MoeForCausalLM"],
    model_type: "qwen3_moe",
    hidden_size: 256,
    num_attention_heads: 6,
    num_key_value_heads: 6,
    num_hidden_layers: 2,
    head_dim: 64,
    max_position_embeddings: 8192,
    torch_dtype: "bfloat16",
});

/**
 * A tiny model directory on every node, as a download would leave it: config.json (an MoE of the
 * Qwen shape) and one safetensors file. The vLLM stand-in reads it; nothing is executed.
 */
export function putTinyModel(cluster: SimCluster, dir: string): void {
    const config = TINY_MODEL_CONFIG;
    for (const node of cluster.nodes) {
        onNode(
            node,
            `set -e; mkdir -p ${dir}; printf '%s' '${config}' > ${dir}/config.json; ` +
                `head -c 1048576 /dev/zero > ${dir}/model-00001-of-00001.safetensors; chown -R ${cluster.sshUser} ${dir}`,
        );
    }
}

/**
 * A model the workload image carries (/models/<model>: the real-vLLM image's tiny random-weight
 * ones) put at `dir` on every node, as a download would leave it: copied out of the image on the
 * first node, and from there to the others.
 */
export function putImageModel(cluster: SimCluster, model: string, dir: string): void {
    const [first, ...others] = cluster.nodes;
    onNode(
        first,
        `set -e; mkdir -p ${dir}; docker run --rm --network none --entrypoint sh -v ${dir}:/out ${cluster.workloadImage} -c 'cp -r /models/${model}/. /out/'; ` +
            `chown -R ${cluster.sshUser} $(dirname ${dir})`,
    );
    for (const node of others) {
        onNode(node, `mkdir -p ${dir}`);
        execFileSync("bash", ["-c", `set -o pipefail; docker exec ${first.name} tar -C ${dir} -c . | docker exec -i ${node.name} tar -C ${dir} -x`]);
        onNode(node, `chown -R ${cluster.sshUser} $(dirname ${dir})`);
    }
}

/** The real-vLLM image's tiny Llama, where the real lane and its bench put it on every node. */
export const REAL_MODEL = { name: "tiny-llama", dir: "/home/spark/models/tiny-llama", maxModelLen: 256 };

/**
 * The settings of the real lane's stack (test/e2e/real.test.ts, and its bench: test/bench/realVllm.ts)
 * beside {@link simStackValues}': real vLLM's CPU build, tensor parallel 2 over the mp executor, the
 * image on the first node copied to the others by the product.
 */
export function realStackExtra(cluster: SimCluster): Record<string, unknown> {
    return {
        executor: "mp",
        parallelism: { tensor: 2 },
        image: { name: cluster.workloadImage, source: "copy" },
        model: { path: REAL_MODEL.dir, servedName: REAL_MODEL.name },
        // The nodes share this machine's memory. The plan keeps 3 GiB per rank for vLLM's runtime
        // beside the weights, of MemTotal less the OS's reserve: 0.2 of it, as its refusal of 0.1
        // says; vLLM's CPU build then asks 0.2 of MemTotal per rank and keeps for its KV cache
        // what its process does not hold of that.
        vllm: { port: 8000, maxModelLen: REAL_MODEL.maxModelLen, gpuMemoryUtilization: 0.2 },
        timeouts: { sshConnectSeconds: 10, vllmReadySeconds: 900 },
    };
}

/**
 * `vllm-fleet:vllm` of the proving ground's stacks. Every simulated Spark reports the host's memory
 * as its own (MemTotal), and they share it: at vLLM's default 0.9 the memory host check (vLLM's own
 * test at its start: that fraction of MemTotal free) refuses the stack, as real vLLM would.
 */
export const SIM_VLLM = { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.3 };

/** The settings of a stack for a simulated cluster (the keys without the `vllm-fleet:` prefix). */
export function simStackValues(cluster: SimCluster, modelDir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
        nodes: cluster.nodes.map((node) => ({
            name: `spark${node.index + 1}`,
            host: node.sshHost,
            port: node.sshPort,
            hostKey: node.sshHostKey,
        })),
        ssh: { user: cluster.sshUser, privateKeyPath: cluster.sshPrivateKeyPath },
        fabric: { subnet: cluster.fabricSubnet },
        image: { name: cluster.workloadImage },
        containerDriver: "ssh",
        commandRunner: "builtin",
        model: { path: modelDir, servedName: "tiny-moe" },
        vllm: SIM_VLLM,
        // A host whose hard memlock limit is 8 MiB cannot raise it without CAP_SYS_RESOURCE.
        container: { memlockBytes: 8 * 1024 * 1024 },
        timeouts: { sshConnectSeconds: 10, rayReadySeconds: 180, vllmReadySeconds: 300 },
        ...extra,
    };
}

/** Stack config for a simulated cluster (keys with the `vllm-fleet:` prefix). */
export function simStackConfig(cluster: SimCluster, modelDir: string, extra: Record<string, unknown> = {}): ConfigMap {
    const config: ConfigMap = {};
    for (const [key, value] of Object.entries(simStackValues(cluster, modelDir, extra))) {
        config[`vllm-fleet:${key}`] = { value: typeof value === "string" ? value : JSON.stringify(value) };
    }
    return config;
}

/** `timed(label, action)`: runs `action` and records its seconds in `timings` under `label`. */
export function timer(timings: Record<string, number>): <T>(label: string, action: () => Promise<T>) => Promise<T> {
    return async (label, action) => {
        const start = Date.now();
        try {
            return await action();
        } finally {
            timings[label] = (Date.now() - start) / 1000;
        }
    };
}

/** The tiny model's directory on every simulated node (putTinyModel). */
export const TINY_MODEL_DIR = "/home/spark/models/tiny-moe";

/** A simulated cluster with the tiny model on every node, and a stack of the program for it. */
export interface SimDeployment {
    readonly cluster: SimCluster;
    readonly stack: Stack;
    readonly workDir: string;
    readonly envVars: Record<string, string>;
}

/**
 * Brings up `nodes` simulated Sparks as cluster `name`, puts the tiny model on each and opens stack
 * `name` in a temporary workspace with simStackConfig plus `extra`. Tear down with tearDown.
 */
export async function simDeployment(name: string, nodes: number, extra: Record<string, unknown> = {}, options: SimOptions = {}): Promise<SimDeployment> {
    const cluster = await simUp(name, nodes, options);
    putTinyModel(cluster, TINY_MODEL_DIR);
    const { dir, envVars } = tempWorkspace(`vllm-fleet-${name}-`);
    const stack = await openStack(name, { workDir: dir, envVars, config: simStackConfig(cluster, TINY_MODEL_DIR, extra) });
    return { cluster, stack, workDir: dir, envVars };
}

/** A temporary Pulumi workspace whose dynamic resources can load @pulumi/pulumi. */
export function tempWorkspace(prefix: string): { dir: string; envVars: Record<string, string> } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(dir, "node_modules"));
    fs.mkdirSync(path.join(dir, "state"));
    return {
        dir,
        envVars: { PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`, PULUMI_CONFIG_PASSPHRASE: "e2e" },
    };
}

/**
 * Ends an e2e test whatever happened: destroys and removes its stacks, then removes its simulated
 * cluster (everything sim.sh made) and its temporary workspace.
 */
export async function tearDown(parts: { stacks: readonly (Stack | undefined)[]; cluster?: string; workDir?: string }): Promise<void> {
    try {
        for (const stack of parts.stacks) {
            if (stack) {
                await stack.destroy().catch(() => undefined);
                await stack.workspace.removeStack(stack.name, { force: true }).catch(() => undefined);
            }
        }
    } finally {
        if (parts.cluster) {
            await simDown(parts.cluster);
        }
        if (parts.workDir) {
            fs.rmSync(parts.workDir, { recursive: true, force: true });
        }
    }
}

/** The message of a stack operation that is expected to fail (a success fails the test). */
export async function failureOf(action: Promise<unknown>): Promise<string> {
    return action.then(
        () => {
            throw new Error("expected the deployment to fail");
        },
        (error: Error) => error.message,
    );
}
