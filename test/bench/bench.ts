/**
 * The benchmark of issue 6 (`npm run bench -- [--runs K] [--nodes 2,4] [--out DIR]`): where the time
 * of a deployment goes, on simulated Sparks, through the real Pulumi engine (Automation API).
 *
 * For each node count, K rounds of: cold `pulumi up`, `pulumi preview` and `pulumi up` with no
 * change, a vLLM-only change (max-model-len), `pulumi destroy`; and a cold `pulumi up --parallel 1`
 * (the sequential baseline of a launcher script, whose solo step times give the dependency graph's
 * bound; with the CPU-seconds over the cores, the floor a cold up is judged against). Rounds interleave the node
 * counts so that drift of the machine hits all alike; ratios are taken between medians of one run of
 * the benchmark. A time is that of the `pulumi` command (start to its last output); the Automation
 * API's follow-up commands are recorded apart. Every up's engine events become a timeline (critical
 * path, time outside it, SVG Gantt chart). The hosts are checked as well: a no-op up only reads
 * each node, once (sshd's log: one session per node), a vLLM-only change leaves every Ray container as it
 * was (id and start time).
 *
 * Before the rounds, on the smallest cluster while it is alone on the machine, the copies over the fabric between its first two nodes
 * (measureFabric): raw TCP, `docker save` and `docker load` alone, the image copy through this
 * machine (the way before), the image copy and the weight sync with the product's scripts, as
 * ratios to raw TCP, and the image bytes that crossed this machine (`--fabric-only`: only that part).
 *
 * Writes DIR (default bench-report/): report.json, report.md, timeline-<N>nodes{,-parallel1,-noop,
 * -vllm-change}.svg (the median run of each), timeline-<N>nodes{,-parallel1}-run<k>.svg (every cold
 * up), and for each median run events-*.jsonl + export-*.json (input of `npm run timeline`).
 * Simulated clusters are named bench<N> and removed at the end, also on failure or Ctrl-C.
 */
import { execFile, execFileSync, spawn } from "child_process";
import * as crypto from "crypto";
import { promisify } from "util";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { ConfigMap, EngineEvent, Stack, UpResult } from "@pulumi/pulumi/automation";
import { openStack, REPO_ROOT } from "../../infra/automation";
import { RAY_CONTAINER } from "../../infra/plan";
import { Timeline, buildTimeline, longestChain } from "../../tools/timeline/criticalPath";
import { EngineEventLike, resourceGraphFromExport } from "../../tools/timeline/events";
import { formatTimelineSummary } from "../../tools/timeline/summary";
import { renderTimelineSvg } from "../../tools/timeline/svg";
import { SimCluster, onNode, putTinyModel, simDown, simStackConfig, simUp, tempWorkspace } from "../e2e/simCluster";
import { programsOnStdin, readScript, runFromStdin, scriptProgram } from "../../components/shell";
import { IMAGE_COPY_PORT } from "../../components/sparkNode";
import { RSYNC_PORT, WEIGHTS_CLOSE, WEIGHTS_RECEIVE, WEIGHT_FILES_PORT, WEIGHT_STREAMS } from "../../components/weightSync";
import { FabricThroughput, Transfer, fabricTargets, mibPerSecond, renderFabric } from "./report";
import { formatLoadtestTable, writeLoadtestOutputs } from "../../tools/loadtest/report";
import { LoadtestReport, runLoadtest } from "../../tools/loadtest/run";
import { Check, CpuUse, Floor, OPERATION_LABELS, Operation, Sample, TargetResult, UpTimeline, droppedTargets, evaluateTargets, median, mediansByNodes, renderMarkdown } from "./report";

const MODEL_DIR = "/home/spark/models/tiny-moe";
/** The attention heads of the model putTinyModel writes. */
const TINY_MODEL_ATTENTION_HEADS = 6;
const BASE_VLLM = { port: 8000, maxModelLen: 4096 };
const CHANGED_VLLM = { port: 8000, maxModelLen: 2048 };

/** Command-line options. */
export interface BenchOptions {
    readonly runs: number;
    readonly nodeCounts: readonly number[];
    readonly outDir: string;
    /** Only the copies over the fabric (raw TCP, image copy, weight sync) on a 2-node cluster. */
    readonly fabricOnly?: boolean;
}

/** Parses `--runs K`, `--nodes 2,4` and `--out DIR`. */
export function parseBenchArgs(argv: readonly string[]): BenchOptions {
    let runs = 3;
    let nodeCounts = [2, 4];
    let outDir = path.join(REPO_ROOT, "bench-report");
    let fabricOnly = false;
    for (let index = 0; index < argv.length; index++) {
        const flag = argv[index];
        const value = argv[index + 1];
        if (flag === "--runs" && value !== undefined) {
            runs = Number(value);
            index++;
        } else if (flag === "--nodes" && value !== undefined) {
            nodeCounts = value.split(",").map(Number);
            index++;
        } else if (flag === "--fabric-only") {
            fabricOnly = true;
        } else if (flag === "--out" && value !== undefined) {
            // npm runs scripts in the package directory; INIT_CWD is where the command was typed.
            outDir = path.resolve(process.env.INIT_CWD ?? process.cwd(), value);
            index++;
        } else {
            throw new Error(`unknown argument ${flag}; usage: bench [--runs K] [--nodes 2,4] [--out DIR] [--fabric-only]`);
        }
    }
    if (!Number.isInteger(runs) || runs < 1) {
        throw new Error(`--runs must be a positive integer, not ${runs}`);
    }
    if (nodeCounts.length === 0 || nodeCounts.some((count) => !Number.isInteger(count) || count < 1 || count > 8)) {
        throw new Error(`--nodes must list node counts 1..8, not ${nodeCounts.join(",")}`);
    }
    if (fabricOnly) {
        nodeCounts = [2];
    }
    return { runs, nodeCounts: [...new Set(nodeCounts)].sort((a, b) => a - b), outDir, fabricOnly };
}

const log = (message: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);

/** One simulated cluster with its stack in a temporary workspace. */
interface Deployment {
    readonly nodes: number;
    readonly clusterName: string;
    readonly cluster: SimCluster;
    readonly stack: Stack;
    readonly workDir: string;
    readonly config: ConfigMap;
    /** The cgroup directories of the simulated nodes (for their CPU time), empty if not found. */
    readonly nodeCgroups: readonly string[];
}

/**
 * What the hosts show: the SSH sessions each node's sshd opened (a channel of a shared connection
 * too: sshd logs at VERBOSE, test/sim/node/sshd_config.conf) and each node's Ray container (id and
 * start time).
 */
interface HostSnapshot {
    readonly sshSessions: readonly number[];
    readonly rayContainers: readonly string[];
}

function snapshotHosts(cluster: SimCluster): HostSnapshot {
    const sshSessions: number[] = [];
    const rayContainers: string[] = [];
    for (const node of cluster.nodes) {
        const [sessions, container] = onNode(
            node,
            `grep -c 'Starting session: ' /var/log/sshd.log || true; ` +
                `docker inspect --format '{{.Id}} {{.State.StartedAt}}' ${RAY_CONTAINER} 2>/dev/null | grep . || echo none`,
        )
            .trim()
            .split("\n");
        sshSessions.push(Number(sessions));
        rayContainers.push(container);
    }
    return { sshSessions, rayContainers };
}

/** The arguments of this machine's ssh to a simulated node, as the builtin runner logs in. */
function sshArgs(cluster: SimCluster, index: number): string[] {
    const node = cluster.nodes[index];
    return [
        "-i", cluster.sshPrivateKeyPath, "-p", String(node.sshPort),
        "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", `${cluster.sshUser}@${node.sshHost}`,
    ];
}

/** Median seconds of a plain SSH login that runs `true` on node 0 (what every step pays at least once). */
function sshRoundTripSeconds(cluster: SimCluster): number {
    const times: number[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
        const start = process.hrtime.bigint();
        execFileSync("ssh", [...sshArgs(cluster, 0), "true"]);
        times.push(Number(process.hrtime.bigint() - start) / 1e9);
    }
    return median(times);
}

/** The transfer of median throughput (an odd count: the middle one). */
function medianTransfer<T extends Transfer>(transfers: T[]): T {
    return [...transfers].sort((a, b) => mibPerSecond(a) - mibPerSecond(b))[Math.floor(transfers.length / 2)];
}

/** Plain TCP over the fabric: one python3 socket stream of zeros, 1 MiB writes, timed by the receiver. */
const RAW_TCP = `
import socket, sys, time
mode, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
chunk = memoryview(bytearray(1 << 20))
if mode == "receive":
    server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); server.bind((ip, port)); server.listen(1)
    print("listening", flush=True)
    conn, _ = server.accept(); total = 0; start = time.monotonic()
    while True:
        count = conn.recv_into(chunk)
        if not count: break
        total += count
    print(total, time.monotonic() - start)
else:
    total = int(sys.argv[4]); conn = socket.create_connection((ip, port)); sent = 0
    while sent < total:
        conn.sendall(chunk); sent += len(chunk)
    conn.shutdown(socket.SHUT_WR); conn.recv(1)
`;

const execAsync = promisify(execFile);

async function inNode(name: string, command: string): Promise<string> {
    return (await execAsync("docker", ["exec", name, "bash", "-c", command], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024, timeout: 600_000 })).stdout;
}

/** A program run on a node as the builtin runner runs it (ssh, the programs on stdin), counting the bytes through this machine. */
function overSsh(cluster: SimCluster, index: number, program: string): Promise<{ code: number | null; stdout: string; stderr: string; bytes: number }> {
    return new Promise((resolve) => {
        const input = programsOnStdin({ create: program });
        const child = spawn("ssh", [...sshArgs(cluster, index), "--", runFromStdin("create")]);
        let stdout = "";
        let stderr = "";
        let bytes = Buffer.byteLength(input);
        child.stdout.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
            stdout += chunk.toString();
        });
        child.stderr.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
            stderr += chunk.toString();
        });
        child.stdin.end(input);
        child.on("close", (code) => resolve({ code, stdout, stderr, bytes }));
    });
}

/** Seconds a shell command takes, run on this machine; throws when it fails. */
async function timed(command: string): Promise<number> {
    const start = process.hrtime.bigint();
    await execAsync("bash", ["-o", "pipefail", "-c", command], { maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
    return Number(process.hrtime.bigint() - start) / 1e9;
}

function txBytes(node: string, iface: string): number {
    return Number(execFileSync("docker", ["exec", node, "cat", `/sys/class/net/${iface}/statistics/tx_bytes`], { encoding: "utf8" }).trim());
}

/**
 * The copies over the fabric between the first two nodes: raw TCP (the limit), `docker save` and
 * `docker load` alone (the image copy's other limits), the image copy through this machine as it
 * was done before, the image copy and the weight sync with the product's own scripts, started over
 * SSH as the builtin runner starts them; and the bytes of the image copy that crossed this machine.
 */
async function measureFabric(cluster: SimCluster): Promise<FabricThroughput> {
    const [source, target] = cluster.nodes;
    const image = cluster.workloadImage;
    // Raw TCP and the weight sync take turns, 5 times each, so that the machine's drift hits both alike.
    log("fabric: raw TCP and the weight sync, in turns (2 GiB each: 16 files of 128 MiB, new on the target)");
    await inNode(source.name, `cat > /tmp/raw-tcp.py <<'PY'\n${RAW_TCP}\nPY`);
    await inNode(target.name, `cat > /tmp/raw-tcp.py <<'PY'\n${RAW_TCP}\nPY`);
    const dir = "/home/spark/models/bench-weights";
    // Written, then flushed: a model lies on the first node's disk well before a sync starts.
    await inNode(source.name, `mkdir -p ${dir} && for i in $(seq 1 16); do head -c 134217728 /dev/urandom > ${dir}/w-$i.safetensors; done && chown -R spark ${dir} && sync`);
    const secret = crypto.randomBytes(16).toString("hex");
    const fabricStream = readScript("fabric-stream.py");
    const weightsVars = { MODEL_PATH: dir, PORT: RSYNC_PORT, FILES_PORT: WEIGHT_FILES_PORT, SECRET: secret, FABRIC_STREAM: fabricStream };
    const raws: Transfer[] = [];
    const syncs: (Transfer & { streams: number })[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
        const receiving = inNode(target.name, `python3 /tmp/raw-tcp.py receive ${target.fabricIp} 28799`);
        await new Promise((resolve) => setTimeout(resolve, 500));
        await inNode(source.name, `python3 /tmp/raw-tcp.py send ${target.fabricIp} 28799 ${2 * 1024 ** 3}`);
        const [bytes, seconds] = (await receiving).trim().split("\n").pop()!.split(" ").map(Number);
        raws.push({ bytes, seconds });
        log(`fabric: raw TCP ${mibPerSecond({ bytes, seconds }).toFixed(0)} MiB/s`);

        await inNode(target.name, `rm -rf ${dir} && mkdir -p ${dir} && chown spark ${dir} && sync`);
        const receive = await overSsh(cluster, 1, scriptProgram(WEIGHTS_RECEIVE, { ...weightsVars, BIND_IP: target.fabricIp, SENDER_IP: source.fabricIp }));
        const send = await overSsh(cluster, 0, scriptProgram("weights-send", { ...weightsVars, TARGET_IP: target.fabricIp, STREAMS: WEIGHT_STREAMS }));
        await overSsh(cluster, 1, scriptProgram(WEIGHTS_CLOSE, { MODEL_PATH: dir, PORT: RSYNC_PORT }));
        const synced = /weights-synced to \S+ millis=(\d+) streams=(\d+) bytes=(\d+)/.exec(send.stdout);
        if (receive.code !== 0 || send.code !== 0 || !synced) {
            throw new Error(`weight sync failed: ${receive.stderr} ${send.stderr}`);
        }
        log(`fabric: ${synced[0]}`);
        syncs.push({ bytes: Number(synced[3]), seconds: Number(synced[1]) / 1000, streams: Number(synced[2]) });
    }
    await inNode(source.name, `rm -rf ${dir}`);
    await inNode(target.name, `rm -rf ${dir}`);
    const raw = medianTransfer(raws);

    log("fabric: docker save alone");
    const [saveBytes, saveMillis] = (await inNode(source.name, `s=$(date +%s%N); n=$(docker save ${image} | wc -c); echo $n $((($(date +%s%N) - s) / 1000000))`))
        .trim()
        .split(" ")
        .map(Number);

    log("fabric: image copy node to node");
    await inNode(target.name, `docker image rm ${image} >/dev/null`);
    const imageId = (node: string) => execFileSync("docker", ["exec", node, "docker", "image", "inspect", "--format", "{{.Id}}", image], { encoding: "utf8" }).trim();
    const wantId = imageId(source.name);
    const common = { IMAGE: image, WANT_ID: wantId, PORT: IMAGE_COPY_PORT, SECRET: secret, FABRIC_STREAM: fabricStream };
    const mgmtIface = (cluster as unknown as { mgmtIface: string }).mgmtIface;
    const before = { mgmt: txBytes(source.name, mgmtIface), fabric: txBytes(source.name, source.fabricIface) };
    const start = Date.now();
    const [received, sent] = await Promise.all([
        overSsh(cluster, 1, scriptProgram("image-receive", { ...common, BIND_IP: target.fabricIp, SENDER_IP: source.fabricIp })),
        overSsh(cluster, 0, scriptProgram("image-send", { ...common, TARGET_IP: target.fabricIp })),
    ]);
    const imageSeconds = (Date.now() - start) / 1000;
    const after = { mgmt: txBytes(source.name, mgmtIface), fabric: txBytes(source.name, source.fabricIface) };
    if (received.code !== 0 || sent.code !== 0) {
        throw new Error(`image copy failed: receiver ${received.code} ${received.stderr}; sender ${sent.code} ${sent.stderr}`);
    }
    const copied = /image-copied \S+ \S+ bytes=(\d+)/.exec(received.stdout);
    log(`fabric: ${received.stdout.trim().split("\n").pop()}`);

    log("fabric: docker load alone on the second node (from a file saved there, not timed)");
    await inNode(target.name, `docker save ${image} > /tmp/bench-image.tar && docker image rm ${image} >/dev/null`);
    const loadSeconds = Number((await inNode(target.name, `s=$(date +%s%N); docker load < /tmp/bench-image.tar >/dev/null; echo $((($(date +%s%N) - s) / 1000000))`)).trim()) / 1000;
    await inNode(target.name, "rm -f /tmp/bench-image.tar");

    log("fabric: image copy through this machine (docker save | ssh | ssh | docker load, the way before the node-to-node copy)");
    await inNode(target.name, `docker image rm ${image} >/dev/null`);
    const ssh = (index: number) => ["ssh", ...sshArgs(cluster, index)].join(" ");
    const viaOperatorSeconds = await timed(`${ssh(0)} docker save ${image} | ${ssh(1)} docker load >/dev/null`);
    const loadedVia = imageId(target.name);
    if (loadedVia !== wantId) {
        throw new Error(`the copy through this machine loaded ${loadedVia}, not ${wantId}`);
    }

    const fabric: FabricThroughput = {
        raw,
        save: { bytes: saveBytes, seconds: saveMillis / 1000 },
        image: { bytes: Number(copied?.[1] ?? saveBytes), seconds: imageSeconds },
        load: { bytes: saveBytes, seconds: loadSeconds },
        viaOperator: { bytes: saveBytes, seconds: viaOperatorSeconds },
        weights: medianTransfer(syncs),
        operatorBytes: received.bytes + sent.bytes,
        sourceInterfaceBytes: { mgmt: after.mgmt - before.mgmt, fabric: after.fabric - before.fabric },
    };
    for (const result of fabricTargets(fabric)) {
        log(`fabric: ${result.target}: ${result.value?.toFixed(3)} (${result.passed ? "pass" : "FAIL"}; ${result.detail})`);
    }
    return fabric;
}

/** The events of one engine operation, each with the time it arrived (finer than the events' whole seconds). */
class EventRecorder {
    readonly events: EngineEvent[] = [];
    private readonly arrivals = new Map<EngineEventLike, number>();
    readonly onEvent = (event: EngineEvent) => {
        this.events.push(event);
        this.arrivals.set(event, Date.now());
    };
    readonly timeOf = (event: EngineEventLike) => this.arrivals.get(event) ?? event.timestamp * 1000;
}

/** A timed Pulumi operation. */
interface Timed<T> {
    readonly result: T;
    /**
     * Wall seconds of the `pulumi` command itself: from the call to its last output line (it prints
     * its summary, then exits). What a user of `pulumi up` waits for.
     */
    readonly seconds: number;
    /** Wall seconds of the whole Automation API call, which then runs `pulumi stack output` (twice) and `pulumi stack history`. */
    readonly apiSeconds: number;
    readonly startMs: number;
    /** When the `pulumi` command ended (its last output). */
    readonly endMs: number;
    /** Share of the machine's CPU time that was busy during the call (every process, other users' too). */
    readonly cpuBusyShare: number;
    /** CPU seconds the call cost, split by where they ran. */
    readonly cpu: CpuUse;
}

/** A cgroup's CPU time so far in seconds: cgroup v1 cpuacct.usage (ns) or v2 cpu.stat usage_usec. */
function cgroupCpuSeconds(dir: string): number | undefined {
    try {
        return Number(fs.readFileSync(path.join(dir, "cpuacct.usage"), "utf8")) / 1e9;
    } catch {
        try {
            const line = fs.readFileSync(path.join(dir, "cpu.stat"), "utf8").split("\n").find((text) => text.startsWith("usage_usec "));
            return line ? Number(line.split(" ")[1]) / 1e6 : undefined;
        } catch {
            return undefined;
        }
    }
}

/** Where Docker put a container's cgroup (cgroup v1 cpuacct, v2 with the cgroupfs or the systemd driver). */
function containerCgroupDir(id: string): string | undefined {
    return [`/sys/fs/cgroup/cpuacct/docker/${id}`, `/sys/fs/cgroup/docker/${id}`, `/sys/fs/cgroup/system.slice/docker-${id}.scope`].find((dir) =>
        fs.existsSync(dir),
    );
}

/** CPU seconds so far of each simulated node (whole) and of each container its Docker engine runs, by cgroup path. */
function simCpuSnapshot(nodeCgroups: readonly string[]): { nodes: number; workloads: Map<string, number> } | undefined {
    if (nodeCgroups.length === 0) {
        return undefined;
    }
    let nodes = 0;
    const workloads = new Map<string, number>();
    for (const dir of nodeCgroups) {
        const seconds = cgroupCpuSeconds(dir);
        if (seconds === undefined) {
            return undefined;
        }
        nodes += seconds;
        const inner = path.join(dir, "docker");
        for (const entry of fs.existsSync(inner) ? fs.readdirSync(inner, { withFileTypes: true }) : []) {
            const used = entry.isDirectory() ? cgroupCpuSeconds(path.join(inner, entry.name)) : undefined;
            if (used !== undefined) {
                workloads.set(path.join(inner, entry.name), used);
            }
        }
    }
    return { nodes, workloads };
}

/** The cgroup directories of a simulated cluster's node containers (empty where they cannot be found). */
function nodeCgroupDirs(cluster: SimCluster): string[] {
    const dirs = cluster.nodes.map((node) => containerCgroupDir(execFileSync("docker", ["inspect", "--format", "{{.Id}}", node.name], { encoding: "utf8" }).trim()));
    return dirs.every((dir) => dir !== undefined) ? (dirs as string[]) : [];
}

/** The machine's CPU time so far, busy and total, in clock ticks (the `cpu` line of /proc/stat). */
function cpuTicks(): { busy: number; total: number } {
    const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((sum, value) => sum + value, 0);
    const idle = fields[3] + (fields[4] ?? 0); // idle + iowait
    return { busy: total - idle, total };
}

/**
 * Waits (at most 20 s) until the machine's CPU is less than a fifth busy over half a second, so that
 * what the last operation left running (containers and Ray processes ending, files written back)
 * is not timed, nor counted, with the next one.
 */
async function quietMachine(): Promise<void> {
    const start = Date.now();
    for (;;) {
        const before = cpuTicks();
        await new Promise((resolve) => setTimeout(resolve, 500));
        const after = cpuTicks();
        const busy = (after.busy - before.busy) / Math.max(1, after.total - before.total);
        if (busy < 0.2 || Date.now() - start > 20_000) {
            if (Date.now() - start > 1000) {
                log(`waited ${((Date.now() - start) / 1000).toFixed(1)} s for a quiet machine (CPU ${Math.round(busy * 100)}% busy)`);
            }
            return;
        }
    }
}

/**
 * Runs a Pulumi operation of the Automation API on a quiet machine, timing the `pulumi` command and
 * the whole call, and counting the CPU it cost (the machine's, and inside the nodes whose cgroups
 * are given).
 */
async function timedPulumi<T>(action: (onOutput: (text: string) => void) => Promise<T>, nodeCgroups: readonly string[] = []): Promise<Timed<T>> {
    await quietMachine();
    const startMs = Date.now();
    const cpuBefore = cpuTicks();
    const simBefore = simCpuSnapshot(nodeCgroups);
    // Counted up to the command's last output, like its wall time.
    let lastOutputMs = startMs;
    let cpuAfter = cpuBefore;
    let simAfter = simBefore;
    const result = await action(() => {
        lastOutputMs = Date.now();
        cpuAfter = cpuTicks();
        simAfter = simCpuSnapshot(nodeCgroups);
    });
    const apiEndMs = Date.now();
    const cpuBusyShare = (cpuAfter.busy - cpuBefore.busy) / Math.max(1, cpuAfter.total - cpuBefore.total);
    const cores = os.cpus().length;
    let workloadSeconds: number | undefined;
    if (simBefore && simAfter) {
        workloadSeconds = 0;
        for (const [dir, used] of simAfter.workloads) {
            workloadSeconds += used - (simBefore.workloads.get(dir) ?? 0);
        }
    }
    return {
        result,
        seconds: (lastOutputMs - startMs) / 1000,
        apiSeconds: (apiEndMs - startMs) / 1000,
        startMs,
        endMs: lastOutputMs,
        cpuBusyShare,
        cpu: {
            machineSeconds: (cpuBusyShare * cores * (lastOutputMs - startMs)) / 1000,
            cores,
            nodesSeconds: simBefore && simAfter ? simAfter.nodes - simBefore.nodes : undefined,
            workloadSeconds,
        },
    };
}

/** The `pulumi up` operations whose engine events become a timeline. */
type UpOperation = Extract<Operation, "coldUp" | "coldUpParallel1" | "upNoChange" | "vllmChange">;

/** How each up's files are named: timeline-<N>nodes<suffix>.svg. */
const FILE_SUFFIX: Record<UpOperation, string> = { coldUp: "", coldUpParallel1: "-parallel1", upNoChange: "-noop", vllmChange: "-vllm-change" };

/** One `pulumi up`: its wall time, its timeline, and the raw material to draw it again. */
interface RecordedUp {
    readonly nodes: number;
    readonly run: number;
    readonly operation: UpOperation;
    readonly seconds: number;
    readonly timeline: Timeline;
    /** Share of the machine's CPU busy during the up (2 cores shared by every simulated node and other runs). */
    readonly cpuBusyShare: number;
    readonly cpu: CpuUse;
    readonly events: readonly EngineEvent[];
    readonly exported: unknown;
    /** Operations the engine ran per resource (providers excluded), e.g. `{ "vllm-serve": ["update"] }`. */
    readonly opsByResource: Record<string, readonly string[]>;
    /** Operations on providers: a config change "updates" the dynamic provider, which holds the config. */
    readonly providerOps: readonly string[];
}

/** Everything measured so far (kept whole so that a failed round still leaves a report). */
interface Measurements {
    readonly samples: Sample[];
    readonly checks: Check[];
    readonly ups: RecordedUp[];
    readonly sshRoundTripSeconds: Record<number, number>;
    fabric?: FabricThroughput;
    /** `npm run loadtest` against the endpoint after the first cold up, by node count. */
    readonly loadtests: Record<number, LoadtestReport>;
}

function onlySame(changes: Record<string, number> | undefined): boolean {
    return Object.keys(changes ?? {}).every((op) => op === "same");
}

/** Runs `pulumi up` (one step at a time for the baseline), timing it and recording its timeline. */
async function recordedUp(deployment: Deployment, run: number, operation: UpOperation, measurements: Measurements): Promise<{ up: UpResult; record: RecordedUp }> {
    const recorder = new EventRecorder();
    const { result: up, seconds, apiSeconds, startMs, endMs, cpuBusyShare, cpu } = await timedPulumi(
        (onOutput) => deployment.stack.up({ onEvent: recorder.onEvent, onOutput, ...(operation === "coldUpParallel1" ? { parallel: 1 } : {}) }),
        deployment.nodeCgroups,
    );
    if (up.summary.result !== "succeeded") {
        throw new Error(`${operation} on ${deployment.nodes} nodes: ${up.summary.result}`);
    }
    const exported = await deployment.stack.exportStack();
    const timeline = buildTimeline(recorder.events, { graph: resourceGraphFromExport(exported), timeOf: recorder.timeOf, window: { startMs, endMs } });
    const record: RecordedUp = {
        nodes: deployment.nodes,
        run,
        operation,
        seconds,
        timeline,
        cpuBusyShare,
        cpu,
        events: recorder.events,
        exported,
        opsByResource: Object.fromEntries(timeline.spans.filter((span) => span.kind !== "provider").map((span) => [span.name, span.ops])),
        providerOps: [...new Set(timeline.spans.filter((span) => span.kind === "provider").flatMap((span) => span.ops))],
    };
    measurements.samples.push({ nodes: deployment.nodes, run, operation, seconds, apiSeconds });
    measurements.ups.push(record);
    log(
        `${deployment.nodes} nodes run ${run}: ${OPERATION_LABELS[operation]} ${seconds.toFixed(1)} s ` +
            `(critical path ${(timeline.criticalMs / 1000).toFixed(1)} s, outside it ${(100 * timeline.outsideShare).toFixed(0)}%, ` +
            `CPU busy ${(100 * cpuBusyShare).toFixed(0)}%, ${cpu.machineSeconds.toFixed(1)} CPU-s of which ${cpu.workloadSeconds?.toFixed(1) ?? "?"} in Ray/vLLM)`,
    );
    return { up, record };
}

async function coldUp(deployment: Deployment, run: number, operation: "coldUp" | "coldUpParallel1", measurements: Measurements): Promise<void> {
    // As a user does: `pulumi preview`, then `pulumi up` (untimed). Both cold ups then start alike:
    // the SSH connections to the nodes open (they stay 30 s) and the bench's process past what it
    // loads once (a `pulumi` command loads it on every run).
    await deployment.stack.preview();
    const { up } = await recordedUp(deployment, run, operation, measurements);
    if (operation === "coldUp" && measurements.loadtests[deployment.nodes] === undefined) {
        // The serving benchmark users run (tools/loadtest/), at concurrency 1 and 4, with the key the stack made.
        const report = await runLoadtest({
            endpoint: String(up.outputs.endpoint.value),
            apiKey: String(up.outputs.apiKey?.value ?? ""),
            apiKeySource: "the stack output apiKey",
            concurrency: 4,
            requests: 8,
            maxTokens: 16,
        });
        measurements.loadtests[deployment.nodes] = report;
        const failed = report.levels.reduce((sum, level) => sum + level.summary.errors, 0);
        measurements.checks.push({
            nodes: deployment.nodes,
            run,
            name: "the load test's streamed requests all succeed",
            passed: failed === 0,
            detail: `${report.levels.map((level) => `concurrency ${level.summary.concurrency}: ${level.summary.requests - level.summary.errors}/${level.summary.requests}`).join(", ")}`,
        });
        log(`${deployment.nodes} nodes run ${run}: load test (the vLLM stand-in's numbers)\n${formatLoadtestTable(report)}`);
    }
    const completion = String(up.outputs.completion?.value ?? "");
    const missing = deployment.cluster.nodes.filter((node) => !completion.includes(node.fabricIp)).map((node) => node.fabricIp);
    measurements.checks.push({
        nodes: deployment.nodes,
        run,
        name: "cold up serves a completion from every node's fabric address",
        passed: missing.length === 0,
        detail: missing.length === 0 ? "every fabric address answered" : `missing ${missing.join(", ")} in ${completion.slice(0, 200)}`,
    });
}

async function destroy(deployment: Deployment, run: number, measurements: Measurements, timedAs?: Operation): Promise<void> {
    const { result, seconds, apiSeconds } = await timedPulumi((onOutput) => deployment.stack.destroy({ onOutput }));
    if (result.summary.result !== "succeeded") {
        throw new Error(`destroy on ${deployment.nodes} nodes: ${result.summary.result}`);
    }
    const left = snapshotHosts(deployment.cluster).rayContainers.filter((container) => container !== "none");
    measurements.checks.push({
        nodes: deployment.nodes,
        run,
        name: "destroy leaves no Ray container on any node",
        passed: left.length === 0,
        detail: left.length === 0 ? "none left" : `left: ${left.join(", ")}`,
    });
    if (timedAs) {
        measurements.samples.push({ nodes: deployment.nodes, run, operation: timedAs, seconds, apiSeconds });
    }
    log(`${deployment.nodes} nodes run ${run}: destroy ${seconds.toFixed(1)} s`);
}

/** One round on one cluster: cold up, no-op preview, no-op up, vLLM-only change, destroy. */
async function round(deployment: Deployment, run: number, measurements: Measurements): Promise<void> {
    const { nodes, stack, cluster } = deployment;
    const check = (name: string, passed: boolean, detail: string) => measurements.checks.push({ nodes, run, name, passed, detail });
    const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
    await stack.setAllConfig(deployment.config);
    await coldUp(deployment, run, "coldUp", measurements);

    const deployed = snapshotHosts(cluster);
    const preview = await timedPulumi((onOutput) => stack.preview({ onOutput }));
    measurements.samples.push({ nodes, run, operation: "previewNoChange", seconds: preview.seconds, apiSeconds: preview.apiSeconds });
    const afterPreview = snapshotHosts(cluster);
    // Every run reads each node once (one SSH session, read-only: infra/observe.ts) and does nothing else.
    const readOnce = (before: HostSnapshot, after: HostSnapshot) => after.sshSessions.every((sessions, index) => sessions - before.sshSessions[index] === 1);
    check(
        "no-op preview reads each node once and changes nothing",
        onlySame(preview.result.changeSummary) && readOnce(deployed, afterPreview) && same(afterPreview.rayContainers, deployed.rayContainers),
        `changes ${JSON.stringify(preview.result.changeSummary)}, ssh sessions ${deployed.sshSessions.join(",")} -> ${afterPreview.sshSessions.join(",")}`,
    );
    log(`${nodes} nodes run ${run}: ${OPERATION_LABELS.previewNoChange} ${preview.seconds.toFixed(1)} s`);

    const noop = await recordedUp(deployment, run, "upNoChange", measurements);
    const afterNoop = snapshotHosts(cluster);
    const noopOps = [...new Set(Object.values(noop.record.opsByResource).flat())];
    check(
        "no-op up reads each node once and changes nothing",
        onlySame(noop.up.summary.resourceChanges) &&
            noopOps.every((op) => op === "same") &&
            readOnce(afterPreview, afterNoop) &&
            same(afterNoop.rayContainers, deployed.rayContainers),
        `changes ${JSON.stringify(noop.up.summary.resourceChanges)}, engine ops ${noopOps.join(",")}, ` +
            `ssh sessions ${afterPreview.sshSessions.join(",")} -> ${afterNoop.sshSessions.join(",")}, ` +
            `Ray containers ${same(afterNoop.rayContainers, deployed.rayContainers) ? "unchanged" : "CHANGED"}`,
    );

    await stack.setConfig("vllm-fleet:vllm", { value: JSON.stringify(CHANGED_VLLM) });
    const change = await recordedUp(deployment, run, "vllmChange", measurements);
    const afterChange = snapshotHosts(cluster);
    check(
        "vLLM-only change restarts no Ray container",
        same(afterChange.rayContainers, deployed.rayContainers),
        `Ray containers (id, StartedAt) ${same(afterChange.rayContainers, deployed.rayContainers) ? "unchanged" : `${deployed.rayContainers.join(" ")} -> ${afterChange.rayContainers.join(" ")}`}`,
    );
    const changed = Object.entries(change.record.opsByResource).filter(([, ops]) => ops.some((op) => op !== "same"));
    const endpoint = String(change.up.outputs.endpoint?.value ?? "");
    const apiKey = String(change.up.outputs.apiKey?.value ?? "");
    const models = (await (await fetch(`${endpoint}/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).json()) as { data: { max_model_len?: number }[] };
    const servedLength = models.data[0]?.max_model_len;
    // vllm serve restarts in place once the image's vLLM checked the new arguments; the fabric
    // checks run again; the watchdog (it reads the serve arguments from the Ray head) runs on.
    const byName = Object.fromEntries(changed.map(([name, ops]) => [name, ops.join()]));
    const fabricChecks = changed.filter(([name, ops]) => /^vllm-fabric-/.test(name) && ops.some((op) => /replace/.test(op)));
    check(
        "vLLM-only change updates vllm-serve and reruns the checks, nothing else, and takes effect",
        changed.length === 2 + fabricChecks.length &&
            fabricChecks.length === deployment.cluster.nodes.length &&
            byName["vllm-serve"] === "update" &&
            byName["vllm-args-check"] === "update" &&
            servedLength === CHANGED_VLLM.maxModelLen,
        `changed: ${changed.map(([name, ops]) => `${name} ${ops.join(",")}`).join("; ")} (provider: ${change.record.providerOps.join(",")}); ` +
            `served max_model_len ${servedLength}`,
    );

    await destroy(deployment, run, measurements, "destroy");
}

/** The baseline: a cold up with one step at a time, then destroy (untimed). */
async function baselineRound(deployment: Deployment, run: number, measurements: Measurements): Promise<void> {
    await deployment.stack.setAllConfig(deployment.config);
    await coldUp(deployment, run, "coldUpParallel1", measurements);
    await destroy(deployment, run, measurements);
}

/**
 * One GPU per node: TP = the node count where it divides the tiny model's 6 attention heads (as vLLM
 * requires), else TP 2 × PP nodes/2 (4 nodes: TP 2, PP 2). The deployment is the same either way:
 * one Ray container per node, `vllm serve` on the head.
 */
export function parallelismFor(nodes: number): { tensor: number; pipeline: number } {
    const tensor = TINY_MODEL_ATTENTION_HEADS % nodes === 0 ? nodes : 2;
    if (nodes % tensor !== 0) {
        throw new Error(`no TP×PP split of ${nodes} GPUs fits a model with ${TINY_MODEL_ATTENTION_HEADS} attention heads`);
    }
    return { tensor, pipeline: nodes / tensor };
}

async function prepare(nodes: number): Promise<Deployment> {
    const clusterName = `bench${nodes}`;
    log(`bringing up simulated cluster ${clusterName} (${nodes} nodes)`);
    const cluster = await simUp(clusterName, nodes);
    putTinyModel(cluster, MODEL_DIR);
    const workspace = tempWorkspace(`vllm-fleet-${clusterName}-`);
    const config = simStackConfig(cluster, MODEL_DIR, { parallelism: parallelismFor(nodes), vllm: BASE_VLLM });
    const stack = await openStack(clusterName, { workDir: workspace.dir, envVars: workspace.envVars, config });
    return { nodes, clusterName, cluster, stack, workDir: workspace.dir, config, nodeCgroups: nodeCgroupDirs(cluster) };
}

/** The up of `operation` on `nodes` whose wall time is the median (an odd count: the middle one). */
function medianUp(ups: readonly RecordedUp[], nodes: number, operation: UpOperation): RecordedUp | undefined {
    const list = ups.filter((up) => up.nodes === nodes && up.operation === operation).sort((a, b) => a.seconds - b.seconds);
    return list[Math.floor((list.length - 1) / 2)];
}

function writeReport(options: BenchOptions, measurements: Measurements, startedAt: Date, pulumiVersion: string, error?: Error): TargetResult[] {
    fs.mkdirSync(options.outDir, { recursive: true });
    const titleOf = (up: RecordedUp) => `${OPERATION_LABELS[up.operation].replace(/`/g, "")}, ${up.nodes} simulated Sparks (run ${up.run})`;
    for (const up of measurements.ups.filter((up) => up.operation === "coldUp" || up.operation === "coldUpParallel1")) {
        const file = `timeline-${up.nodes}nodes${FILE_SUFFIX[up.operation]}-run${up.run}.svg`;
        fs.writeFileSync(path.join(options.outDir, file), renderTimelineSvg(up.timeline, { title: titleOf(up) }));
    }
    const timelines: UpTimeline[] = [];
    for (const nodes of options.nodeCounts) {
        for (const operation of Object.keys(FILE_SUFFIX) as UpOperation[]) {
            const up = medianUp(measurements.ups, nodes, operation);
            if (!up) {
                continue;
            }
            const base = `${nodes}nodes${FILE_SUFFIX[operation]}`;
            const svg = `timeline-${base}.svg`;
            fs.writeFileSync(path.join(options.outDir, svg), renderTimelineSvg(up.timeline, { title: `${titleOf(up)}, the median of ${options.runs}` }));
            fs.writeFileSync(path.join(options.outDir, `events-${base}.jsonl`), up.events.map((event) => JSON.stringify(event)).join("\n") + "\n");
            fs.writeFileSync(path.join(options.outDir, `export-${base}.json`), JSON.stringify(up.exported, null, 2));
            // One step at a time, no step slowed another: the graph's longest chain of these steps is
            // what full parallelism could reach (plus the same start-up and end).
            const chain = operation === "coldUpParallel1" ? longestChain(up.timeline, resourceGraphFromExport(up.exported)) : undefined;
            timelines.push({
                nodes,
                run: up.run,
                operation,
                graphBound: chain && {
                    seconds: (chain.ms + up.timeline.outside.beforeFirstMs + up.timeline.outside.afterLastMs) / 1000,
                    chainSeconds: chain.ms / 1000,
                    steps: chain.names,
                },
                wallSeconds: up.seconds,
                criticalSeconds: up.timeline.criticalMs / 1000,
                outsideShare: up.timeline.outsideShare,
                cpuBusyShare: up.cpuBusyShare,
                cpu: up.cpu,
                svg,
                summary: formatTimelineSummary(up.timeline),
            });
        }
    }
    // By node count, the median over the runs of one operation of a figure of each run.
    const medianOfUps = (operation: UpOperation, figure: (up: RecordedUp) => number): Record<number, number> => {
        const result: Record<number, number> = {};
        for (const nodes of options.nodeCounts) {
            const values = measurements.ups.filter((up) => up.nodes === nodes && up.operation === operation).map(figure);
            if (values.length > 0) {
                result[nodes] = median(values);
            }
        }
        return result;
    };
    const outsideShares = medianOfUps("coldUp", (up) => up.timeline.outsideShare);
    // What a no-op up spends before its first step (the CLI, the engine, the program, the read of
    // the nodes): no no-op up is shorter.
    const noopStartUps = medianOfUps("upNoChange", (up) => up.timeline.outside.beforeFirstMs / 1000);
    // The floor of a cold up: its median run's CPU-seconds over the cores, and the graph's longest
    // chain of the solo step times of the `--parallel 1` median run.
    const floors: Record<number, Floor> = {};
    for (const nodes of options.nodeCounts) {
        const cold = medianUp(measurements.ups, nodes, "coldUp");
        if (cold) {
            const bound = timelines.find((timeline) => timeline.nodes === nodes && timeline.operation === "coldUpParallel1")?.graphBound;
            floors[nodes] = { cpuSeconds: cold.cpu.machineSeconds, cores: cold.cpu.cores, graphSeconds: bound?.seconds };
        }
    }
    const medians = mediansByNodes(measurements.samples);
    const targetInputs = { medians, floors, outsideShares, noopStartUps, checks: measurements.checks, nodeCounts: options.nodeCounts };
    const targets = evaluateTargets(targetInputs);
    const load = os.loadavg().map((value) => value.toFixed(2)).join(" ");
    const environment =
        `${startedAt.toISOString()} – ${new Date().toISOString()}; ${os.cpus().length} cores, load ${load}; ` +
        `Pulumi ${pulumiVersion}, Node.js ${process.version}; ${options.runs} runs of node counts ${options.nodeCounts.join(", ")} ` +
        `(${options.nodeCounts.map((nodes) => `${nodes}: TP ${parallelismFor(nodes).tensor} × PP ${parallelismFor(nodes).pipeline}`).join(", ")})` +
        (error ? `; ABORTED: ${error.message.split("\n")[0]}` : "");
    const report = {
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        environment,
        runs: options.runs,
        nodeCounts: options.nodeCounts,
        error: error?.message,
        medians,
        floors,
        outsideShares,
        sshRoundTripSeconds: measurements.sshRoundTripSeconds,
        targets,
        fabric: measurements.fabric && { ...measurements.fabric, targets: fabricTargets(measurements.fabric) },
        samples: measurements.samples,
        checks: measurements.checks,
        timelines,
        ups: measurements.ups.map((up) => ({
            nodes: up.nodes,
            run: up.run,
            operation: up.operation,
            seconds: up.seconds,
            criticalSeconds: up.timeline.criticalMs / 1000,
            outsideShare: up.timeline.outsideShare,
            cpuBusyShare: up.cpuBusyShare,
            cpu: up.cpu,
            outside: { ...up.timeline.outside, intervals: undefined },
            criticalPath: up.timeline.criticalPath.map((step) => ({
                name: step.name,
                startSeconds: (step.startMs - up.timeline.startMs) / 1000,
                seconds: (step.endMs - step.startMs) / 1000,
                waitSeconds: step.waitMs / 1000,
            })),
            opsByResource: up.opsByResource,
        })),
    };
    fs.writeFileSync(path.join(options.outDir, "report.json"), JSON.stringify(report, null, 2) + "\n");
    const markdown0 = renderMarkdown({
        runs: options.runs,
        nodeCounts: options.nodeCounts,
        samples: measurements.samples,
        targets,
        checks: measurements.checks,
        timelines,
        sshRoundTripSeconds: measurements.sshRoundTripSeconds,
        environment,
        dropped: droppedTargets(targetInputs),
    });
    const withFabric = measurements.fabric ? `${markdown0.trimEnd()}\n\n${renderFabric(measurements.fabric).join("\n")}` : markdown0;
    const loadtests = Object.entries(measurements.loadtests).map(([nodes, loadtest]) => {
        const files = writeLoadtestOutputs(loadtest, options.outDir, { title: `npm run loadtest after a cold up, ${nodes} nodes (the vLLM stand-in's numbers)` }, `loadtest-${nodes}nodes`);
        const svg = path.basename(files.svg);
        return [
            `### Serving after a cold up, ${nodes} nodes (\`npm run loadtest\`; the vLLM stand-in's numbers, not vLLM's)`,
            "",
            "```",
            formatLoadtestTable(loadtest).trimEnd(),
            "```",
            "",
            `![load test, ${nodes} nodes](${svg})`,
        ].join("\n");
    });
    const markdown = loadtests.length > 0 ? `${withFabric.trimEnd()}\n\n## The endpoint's own speed\n\n${loadtests.join("\n\n")}\n` : withFabric;
    fs.writeFileSync(path.join(options.outDir, "report.md"), markdown);
    return targets;
}

async function main(): Promise<void> {
    const options = parseBenchArgs(process.argv.slice(2));
    const startedAt = new Date();
    const deployments: Deployment[] = [];
    const clusters: string[] = [];
    // One clean-up, whoever asks first (a signal, or the end): the other waits for the same one.
    let cleaning: Promise<void> | undefined;
    const cleanUp = () =>
        (cleaning ??= (async () => {
            for (const name of clusters) {
                try {
                    log(`removing simulated cluster ${name}`);
                    await simDown(name);
                } catch (error) {
                    log(`could not remove ${name}: ${(error as Error).message}`);
                }
            }
            for (const deployment of deployments) {
                fs.rmSync(deployment.workDir, { recursive: true, force: true });
            }
        })());
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
        process.once(signal, () => {
            log(`${signal}: cleaning up`);
            void cleanUp().finally(() => process.exit(130));
        });
    }

    const measurements: Measurements = { samples: [], checks: [], ups: [], sshRoundTripSeconds: {}, loadtests: {} };
    let failure: Error | undefined;
    let pulumiVersion = "?";
    try {
        for (const nodes of options.nodeCounts) {
            clusters.push(`bench${nodes}`);
            const deployment = await prepare(nodes);
            deployments.push(deployment);
            measurements.sshRoundTripSeconds[nodes] = sshRoundTripSeconds(deployment.cluster);
            pulumiVersion = deployment.stack.workspace.pulumiVersion;
            // The copies over the fabric on the smallest cluster while it is alone on the machine.
            if (deployments.length === 1) {
                measurements.fabric = await measureFabric(deployment.cluster);
            }
        }
        for (let run = 1; run <= (options.fabricOnly ? 0 : options.runs); run++) {
            for (const deployment of deployments) {
                await round(deployment, run, measurements);
            }
            // At every node count: its solo step times give that count's floor.
            for (const deployment of deployments) {
                await baselineRound(deployment, run, measurements);
            }
        }
    } catch (error) {
        failure = error as Error;
        log(`FAILED: ${failure.stack ?? failure.message}`);
    } finally {
        await cleanUp();
    }
    const targets = writeReport(options, measurements, startedAt, pulumiVersion, failure);
    console.log(fs.readFileSync(path.join(options.outDir, "report.md"), "utf8"));
    log(`report: ${path.join(options.outDir, "report.md")}`);
    if (failure) {
        process.exit(1);
    }
    // Missed targets are findings, not a failed benchmark: the exit code says whether it ran.
    log(`${targets.filter((result) => result.passed).length} of ${targets.length} targets met`);
}

if (require.main === module) {
    main().catch((error: Error) => {
        console.error(error.stack ?? error.message);
        process.exit(1);
    });
}
