/**
 * The on-node watchdog (components/scripts/watchdog.py), run by python3 against a fake Docker
 * Engine API on a unix socket and a fake vLLM on 127.0.0.1, both in this process, with intervals of
 * a few hundredths of a second. The fake runs what the watchdog execs in the Ray head for real, in a
 * PID and mount namespace of its own (the container's processes, its own /tmp), with a stand-in
 * `vllm` on its PATH: its pgrep and ps, and vLLM's lifecycle script (vllm-lifecycle.sh), which
 * stops and starts the stand-in server there.
 */
import { ChildProcess, spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as os from "os";
import * as path from "path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "./fakeDocker";

const SCRIPT = path.join(__dirname, "../../components/scripts/watchdog.py");
const LIFECYCLE = fs.readFileSync(path.join(__dirname, "../../components/scripts/vllm-lifecycle.sh"), "utf8");
const SERVE_ARGS = ["serve", "/models/tiny-moe", "--served-model-name", "tiny-moe", "--port", "8000", "--tensor-parallel-size", "2"];
const SERVE_LOG = "/tmp/vllm-fleet-serve.log";
const SERVE_ARGS_FILE = "/tmp/vllm-fleet-serve.args";
const API_KEY = "sk-watchdog-test";
const HOUR_MS = 3600_000;

// ---------------------------------------------------------------------------------------------
// The fake Docker Engine API

interface DockerRequest {
    readonly method: string;
    /** Without the API version prefix, with the query. */
    readonly path: string;
    readonly body: any;
    readonly at: number;
}

interface ExecRecord {
    readonly cmd: string[];
    readonly container: string;
    readonly env?: string[];
    detach?: boolean;
    exitCode?: number;
    stdout?: string;
    stderr?: string;
}

/** A container's State.Status, or missing (no such container). */
type ContainerState = "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead" | "missing";

/**
 * One container as the fake plays it back. It answers as the Engine API does in each state (moby
 * v28.5: daemon/exec.go, errors.go, restart.go, start.go): an exec into a container that is not
 * running is refused with 409 (paused and restarting with their own words), into one that is
 * missing with 404; a restart of a dead one, or one being removed, fails (500), of a missing one is
 * 404. The engine itself can stop answering (stopEngine). What an exec runs, it runs for real in the
 * container's namespaces (see {@link FakeDocker.inContainer}).
 */
interface FakeDockerState {
    container: ContainerState;
    /** The state the container takes right after the next inspect, or exec, answered (it changes under a probe). */
    afterNextInspect?: ContainerState;
    afterNextExec?: ContainerState;
    /** Whether the restart finds the container gone (it went after the watchdog's last look). */
    goneAtRestart?: boolean;
    /** Called at each inspect, before it is answered. */
    onLook?: () => void;
    /** The container's State.StartedAt (Docker's form, nanoseconds). */
    startedAt: string;
    /** Whether a server runs in the container when its processes begin (at the first exec). */
    serveRunning: boolean;
    /** Whether SIGTERM stops the stand-in server (read at each start of one); SIGKILL always does. */
    sigtermStops: boolean;
    /** Called when the container is restarted, and when an exec started a server in it. */
    onRestart?: () => void;
    onServeStart?: () => void;
}

const CONTAINER_ID = "c0ffee".padEnd(64, "0");

function dockerTime(ms: number): string {
    return new Date(ms).toISOString().replace(/Z$/, "123456Z"); // 9 fractional digits, as Docker writes
}

/** A frame of Docker's multiplexed stream (1: stdout, 2: stderr). */
function streamFrame(stream: 1 | 2, text: string): Buffer {
    const payload = Buffer.from(text);
    const header = Buffer.alloc(8);
    header[0] = stream;
    header.writeUInt32BE(payload.length, 4);
    return Buffer.concat([header, payload]);
}

/**
 * PID 1 of the container's PID namespace: it reaps what the lifecycle leaves behind (a server it
 * started, in a session of its own, once stopped), as a container's init does.
 */
/**
 * The container's mounts, then its PID 1 ($2): its own /tmp ($1); the project ($3) stays visible
 * should it live under /tmp itself (a clone there), held at /mnt meanwhile.
 */
const CONTAINER_MOUNTS = [
    'case "$3" in /tmp/*) mount --bind /tmp /mnt || exit 70 ;; esac',
    'mount --bind "$1" /tmp || exit 70',
    'case "$3" in /tmp/*) mkdir -p "$3" && mount --bind "/mnt${3#/tmp}" "$3" || exit 70 ;; esac',
    'exec python3 -c "$2"',
].join("\n");
const INIT = "import os, time\nwhile True:\n    try:\n        os.wait()\n    except ChildProcessError:\n        time.sleep(0.05)\n";

/** A server started in the container, as the stand-in `vllm` recorded it. */
interface ServerStart {
    /** Its pid inside the container. */
    readonly pid: string;
    /** The arguments of `vllm`. */
    readonly args: string[];
    /** The API key in its environment ("" without one). */
    readonly key: string;
}

class FakeDocker {
    readonly requests: DockerRequest[] = [];
    readonly execs = new Map<string, ExecRecord>();
    readonly state: FakeDockerState = {
        container: "running",
        startedAt: dockerTime(Date.now() - HOUR_MS),
        serveRunning: true,
        sigtermStops: true,
    };
    private readonly server: http.Server;
    /** Outside /tmp, which the container has a /tmp of its own over: its /tmp, the stand-in `vllm`, the starts. */
    private readonly root: string;
    /** The container's pid namespace and mount namespace, once its processes began: its PID 1 here. */
    private init?: Promise<number>;
    private initPid?: number;
    /** The unshare that made them (--kill-child: its end ends them, should PID 1 not be known yet). */
    private unshare?: ChildProcess;
    private seenStarts = 0;

    constructor(readonly socketPath: string) {
        this.server = http.createServer((req, res) => {
            let raw = "";
            req.on("data", (chunk) => (raw += chunk));
            req.on("end", () => this.answer(req, res, raw));
        });
        this.root = fs.mkdtempSync(path.join(fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(), "watchdog-container-"));
        fs.mkdirSync(path.join(this.root, "tmp"));
        fs.mkdirSync(path.join(this.root, "bin"));
        // The stand-in server: records its start (pid, arguments, key), then stays with the command
        // line of `vllm serve ...`, ignoring SIGTERM when asked to.
        fs.writeFileSync(
            path.join(this.root, "bin", "vllm"),
            [
                "#!/bin/bash",
                `printf '%s\\t%s\\t%s\\n' "$$" "$*" "\${VLLM_API_KEY:-}" >>${JSON.stringify(path.join(this.root, "starts"))}`,
                'echo "stand-in vllm $*"',
                `[ -e ${JSON.stringify(path.join(this.root, "sigterm-ignored"))} ] && trap '' TERM`,
                'exec -a "vllm $*" sleep 300',
            ].join("\n") + "\n",
            { mode: 0o755 },
        );
        this.writeServeArgs(`${JSON.stringify(SERVE_ARGS)}\n`);
    }

    listen(): Promise<void> {
        return new Promise((resolve) => this.server.listen(this.socketPath, resolve));
    }

    close(): Promise<void> {
        this.server.closeAllConnections();
        return new Promise((resolve) => (this.server.listening ? this.server.close(() => resolve()) : resolve()));
    }

    /** The engine stops answering (its socket gone), as while it restarts. */
    async stopEngine(): Promise<void> {
        await this.close();
        fs.rmSync(this.socketPath, { force: true });
    }

    /** The engine answers again. */
    startEngine(): Promise<void> {
        return this.listen();
    }

    /** The container's processes end (all of them, with its PID 1) and its files go. */
    async destroy(): Promise<void> {
        await this.init?.catch(() => undefined);
        if (this.initPid !== undefined) {
            try {
                process.kill(this.initPid, "SIGKILL");
            } catch {
                // gone already
            }
        }
        if (this.unshare && this.unshare.exitCode === null && this.unshare.signalCode === null) {
            const gone = new Promise((resolve) => this.unshare!.once("exit", resolve));
            this.unshare.kill("SIGKILL");
            await gone;
        }
        fs.rmSync(this.root, { recursive: true, force: true });
    }

    /** What the serve arguments file in the container holds (vllm-start.sh writes it); undefined: no file. */
    writeServeArgs(text: string | undefined): void {
        const file = path.join(this.root, "tmp", path.basename(SERVE_ARGS_FILE));
        if (text === undefined) {
            fs.rmSync(file, { force: true });
        } else {
            fs.writeFileSync(file, text);
        }
    }

    /** A file of the container's /tmp, or undefined. */
    readTmp(name: string): string | undefined {
        const file = path.join(this.root, "tmp", name);
        return fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined;
    }

    /** Every server started in the container, in order (the first one may be the one it began with). */
    serverStarts(): ServerStart[] {
        const file = path.join(this.root, "starts");
        const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
        return text
            .split("\n")
            .filter((line) => line !== "")
            .map((line) => {
                const [pid, args, key] = line.split("\t");
                return { pid, args: args.split(" "), key };
            });
    }

    /** The servers running in the container now, by pid inside it (ps: a zombie is none). */
    runningServers(): string[] {
        if (this.initPid === undefined) {
            return [];
        }
        const result = spawnSync("nsenter", ["--target", String(this.initPid), "--pid", "--mount", "--wd=/", "--", "ps", "-eo", "pid=,stat=,args="], { encoding: "utf8" });
        return result.stdout
            .split("\n")
            .map((line) => line.trim().split(/\s+/))
            .filter(([, stat, ...args]) => stat !== undefined && !stat.startsWith("Z") && args.slice(0, 2).join(" ") === "vllm serve")
            .map(([pid]) => pid);
    }

    /** The server dies (SIGKILL), as with the container's engine restarting under it. */
    killServer(): void {
        if (this.initPid !== undefined) {
            spawnSync("nsenter", ["--target", String(this.initPid), "--pid", "--mount", "--wd=/", "--", "pkill", "-9", "-f", "vllm [s]erve"]);
        }
    }

    /** The commands of the execs that were started, in order. */
    startedExecs(): ExecRecord[] {
        return this.requests
            .filter((r) => r.method === "POST" && /^\/exec\/[^/]+\/start$/.test(r.path))
            .map((r) => this.execs.get(r.path.split("/")[2])!);
    }

    /** The execs that ran the lifecycle script (`sh -c <vllm-lifecycle.sh> vllm-lifecycle ...`). */
    lifecycleExecs(): ExecRecord[] {
        return this.startedExecs().filter((e) => e.cmd[0] === "sh");
    }

    restarts(): DockerRequest[] {
        return this.requests.filter((r) => r.method === "POST" && r.path.includes("/restart"));
    }

    private answer(req: http.IncomingMessage, res: http.ServerResponse, raw: string): void {
        const url = (req.url ?? "").replace(/^\/v1\.\d+/, "");
        const body = raw ? JSON.parse(raw) : undefined;
        this.requests.push({ method: req.method ?? "", path: url, body, at: Date.now() });
        const json = (status: number, value: unknown) => {
            res.writeHead(status, { "Content-Type": "application/json" });
            res.end(JSON.stringify(value));
        };
        const st = this.state;
        let m: RegExpMatchArray | null;
        /** Docker's refusal of an exec into the container in its state, or undefined when it runs. */
        const refusal = (name: string): [number, string] | undefined =>
            st.container === "missing"
                ? [404, `No such container: ${name}`]
                : st.container === "paused"
                  ? [409, `Container ${name} is paused, unpause the container before exec`]
                  : st.container === "restarting"
                    ? [409, `Container ${CONTAINER_ID} is restarting, wait until the container is running`]
                    : st.container !== "running"
                      ? [409, `container ${CONTAINER_ID} is not running`]
                      : undefined;
        if (req.method === "GET" && (m = url.match(/^\/containers\/([^/]+)\/json$/))) {
            st.onLook?.();
            const state = st.container;
            if (st.afterNextInspect) {
                st.container = st.afterNextInspect;
                st.afterNextInspect = undefined;
            }
            if (state === "missing") {
                return json(404, { message: `No such container: ${m[1]}` });
            }
            // State.Running is true for a paused or restarting container (moby's container/state.go).
            const running = state === "running" || state === "paused" || state === "restarting";
            return json(200, {
                Id: CONTAINER_ID,
                Name: `/${m[1]}`,
                State: {
                    Status: state,
                    Running: running,
                    Paused: state === "paused",
                    Restarting: state === "restarting",
                    Dead: state === "dead",
                    Pid: state === "running" || state === "paused" ? 1 : 0,
                    StartedAt: st.startedAt,
                },
            });
        }
        if (req.method === "POST" && (m = url.match(/^\/containers\/([^/]+)\/exec$/))) {
            const refused = refusal(m[1]);
            if (refused) {
                return json(refused[0], { message: refused[1] });
            }
            const id = `exec${this.execs.size + 1}`;
            this.execs.set(id, { cmd: body.Cmd, env: body.Env, container: m[1] });
            return json(201, { Id: id });
        }
        if (req.method === "POST" && (m = url.match(/^\/exec\/([^/]+)\/start$/))) {
            const exec = this.execs.get(m[1])!;
            const refused = refusal(exec.container);
            if (refused) {
                return json(refused[0], { message: refused[1] });
            }
            exec.detach = Boolean(body?.Detach);
            // An attached exec's stream ends when its command has.
            void this.run(exec).then(
                () => {
                    if (st.afterNextExec) {
                        st.container = st.afterNextExec;
                        st.afterNextExec = undefined;
                    }
                    res.writeHead(200, { "Content-Type": "application/vnd.docker.raw-stream" });
                    res.end(Buffer.concat([exec.stdout ? streamFrame(1, exec.stdout) : Buffer.alloc(0), exec.stderr ? streamFrame(2, exec.stderr) : Buffer.alloc(0)]));
                },
                (err: Error) => json(500, { message: `the fake Docker could not run ${exec.cmd[0]}: ${err.message}` }),
            );
            return;
        }
        if (req.method === "GET" && (m = url.match(/^\/exec\/([^/]+)\/json$/))) {
            const exec = this.execs.get(m[1])!;
            return json(200, { ID: m[1], Running: exec.exitCode === undefined, ExitCode: exec.exitCode ?? 0, Pid: 0 });
        }
        if (req.method === "POST" && (m = url.match(/^\/containers\/([^/]+)\/restart/))) {
            if (st.container === "missing" || st.goneAtRestart) {
                return json(404, { message: `No such container: ${m[1]}` });
            }
            if (st.container === "dead" || st.container === "removing") {
                return json(500, { message: `Cannot restart container ${m[1]}: container is marked for removal and cannot be started` });
            }
            st.container = "running";
            st.startedAt = dockerTime(Date.now());
            st.onRestart?.();
            res.writeHead(204);
            res.end();
            return;
        }
        json(404, { message: `the fake Docker does not know ${req.method} ${url}` });
    }

    /**
     * The container's namespaces, made at its first exec: a PID namespace (whose PID 1 is
     * {@link INIT}) and a mount namespace with a /tmp of its own and its own /proc, so that pgrep,
     * ps and pkill there see the container's processes only; with a server in it when
     * `serveRunning`. Returns the PID 1's pid here.
     */
    private inContainer(): Promise<number> {
        this.init ??= (async () => {
            fs.writeFileSync(path.join(this.root, "sigterm-ignored"), "");
            if (this.state.sigtermStops) {
                fs.rmSync(path.join(this.root, "sigterm-ignored"));
            }
            const unshare = (this.unshare = spawn("unshare", ["--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c", CONTAINER_MOUNTS, "container", path.join(this.root, "tmp"), INIT, PROJECT_ROOT], {
                stdio: "ignore",
            }));
            const children = `/proc/${unshare.pid}/task/${unshare.pid}/children`;
            const deadline = Date.now() + 10_000;
            let pid: number | undefined;
            const runsInit = (candidate: number) => {
                try {
                    return fs.readFileSync(`/proc/${candidate}/cmdline`, "utf8").includes("os.wait()");
                } catch {
                    return false;
                }
            };
            // Its PID 1, once it runs INIT (after the mount of /tmp).
            while (pid === undefined || !runsInit(pid)) {
                if (Date.now() > deadline) {
                    throw new Error("the container's namespaces did not come up");
                }
                await sleep(10);
                const found = fs.existsSync(children) ? fs.readFileSync(children, "utf8").trim() : "";
                pid = found ? Number(found.split(" ")[0]) : undefined;
            }
            this.initPid = pid;
            if (this.state.serveRunning) {
                await this.exec(pid, ["sh", "-c", 'vllm "$@" </dev/null >/tmp/vllm-fleet-serve.log 2>&1 &', "sh", ...SERVE_ARGS], []);
                while (this.runningServers().length === 0) {
                    if (Date.now() > deadline) {
                        throw new Error("the container's first server did not start");
                    }
                    await sleep(10);
                }
                this.seenStarts = this.serverStarts().length;
            }
            return pid;
        })();
        return this.init;
    }

    /** Runs cmd in the container's namespaces, from /, with the container's PATH and `env`. */
    private exec(initPid: number, cmd: string[], env: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
        const vars: Record<string, string> = { PATH: `${path.join(this.root, "bin")}:${process.env.PATH}` };
        for (const pair of env) {
            vars[pair.slice(0, pair.indexOf("="))] = pair.slice(pair.indexOf("=") + 1);
        }
        const child = spawn("nsenter", ["--target", String(initPid), "--pid", "--mount", "--wd=/", "--", ...cmd], { env: vars, stdio: ["ignore", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        return new Promise((resolve) => child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr })));
    }

    /** Runs the exec's command in the container; sets its output and exit code. */
    private async run(exec: ExecRecord): Promise<void> {
        const result = await this.exec(await this.inContainer(), exec.cmd, exec.env ?? []);
        exec.stdout = result.stdout;
        exec.stderr = result.stderr;
        exec.exitCode = result.code;
        const starts = this.serverStarts().length;
        for (; this.seenStarts < starts; this.seenStarts++) {
            this.state.onServeStart?.();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The fake vLLM

type Answer = "ok" | "503" | "hang";

class FakeVllm {
    completions: Answer = "ok";
    health: Answer = "ok";
    readonly completionBodies: any[] = [];
    readonly authorizations: (string | undefined)[] = [];
    private readonly server: http.Server;

    constructor() {
        this.server = http.createServer((req, res) => {
            let raw = "";
            req.on("data", (chunk) => (raw += chunk));
            req.on("end", () => {
                this.authorizations.push(req.headers.authorization);
                const answer = req.url === "/health" ? this.health : this.completions;
                if (req.url === "/v1/completions") {
                    this.completionBodies.push(JSON.parse(raw));
                }
                if (answer === "hang") {
                    // no answer; close() ends the connection
                } else if (answer === "503") {
                    res.writeHead(503, { "Content-Type": "application/json" });
                    res.end(JSON.stringify({ error: { message: "EngineCore encountered an issue", code: 503 } }));
                } else {
                    res.writeHead(200, { "Content-Type": "application/json" });
                    res.end(req.url === "/health" ? "" : JSON.stringify({ id: "cmpl-1", object: "text_completion", choices: [{ index: 0, text: " Hello!" }] }));
                }
            });
        });
    }

    async listen(): Promise<number> {
        await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
        return (this.server.address() as AddressInfo).port;
    }

    close(): Promise<void> {
        this.server.closeAllConnections();
        return new Promise((resolve) => this.server.close(() => resolve()));
    }
}

// ---------------------------------------------------------------------------------------------
// Running the watchdog

interface Watchdog {
    readonly child: ChildProcess;
    /** Its stdout, line by line. */
    readonly lines: string[];
    readonly stderr: () => string;
    readonly exit: Promise<number | null>;
}

let dir: string;
let docker: FakeDocker;
let vllm: FakeVllm;
let vllmPort: number;
let children: ChildProcess[];

beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "watchdog-test-"));
    children = [];
    docker = new FakeDocker(path.join(dir, "docker.sock"));
    await docker.listen();
    vllm = new FakeVllm();
    vllmPort = await vllm.listen();
});

afterEach(async () => {
    for (const child of children) {
        if (child.exitCode === null && child.signalCode === null) {
            const gone = new Promise((resolve) => child.once("exit", resolve));
            child.kill("SIGKILL");
            await gone;
        }
    }
    await Promise.all([docker.close(), vllm.close(), docker.destroy()]);
    fs.rmSync(dir, { recursive: true, force: true });
});

/** How python3 gets the file: by path, on stdin, or as the text of `-c` (no `__file__` to rely on). */
type Launch = "path" | "stdin" | "-c";

function startWatchdog(executor: "ray" | "mp" | "gateway", env: Record<string, string> = {}, launch: Launch = "path"): Watchdog {
    const fullEnv: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        WATCHDOG_EXECUTOR: executor,
        WATCHDOG_CONTAINER: executor === "ray" ? "vllm-fleet-ray" : executor === "gateway" ? "vllm-fleet-gateway-unit" : "vllm-fleet-vllm",
        WATCHDOG_PORT: String(vllmPort),
        WATCHDOG_MODEL: "tiny-moe",
        VLLM_API_KEY: API_KEY,
        WATCHDOG_DOCKER_SOCKET: docker.socketPath,
        WATCHDOG_STATE_FILE: path.join(dir, "state.json"),
        WATCHDOG_INTERVAL: "0.05",
        WATCHDOG_FAILURES: "3",
        WATCHDOG_STARTUP_GRACE: "600",
        WATCHDOG_BACKOFF: "0.2",
        WATCHDOG_BACKOFF_MAX: "5",
        WATCHDOG_MAX_RESTARTS: "3",
        WATCHDOG_WINDOW: "60",
        WATCHDOG_PROBE_TIMEOUT: "1",
        WATCHDOG_STOP_TIMEOUT: "1",
        ...(executor === "ray" ? { WATCHDOG_SERVE_ARGS_FILE: SERVE_ARGS_FILE, WATCHDOG_SERVE_LOG: SERVE_LOG, WATCHDOG_LIFECYCLE: LIFECYCLE } : {}),
        ...env,
    };
    const text = fs.readFileSync(SCRIPT, "utf8");
    const args = launch === "path" ? [SCRIPT] : launch === "stdin" ? ["-"] : ["-c", text];
    const child = spawn("python3", args, { env: fullEnv, cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
    children.push(child);
    if (launch === "stdin") {
        child.stdin!.end(text);
    } else {
        child.stdin!.end();
    }
    const lines: string[] = [];
    let partial = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => {
        const parts = (partial + chunk.toString()).split("\n");
        partial = parts.pop()!;
        lines.push(...parts);
    });
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, lines, stderr: () => stderr, exit };
}

async function until(what: string, watchdog: Watchdog, condition: () => boolean, timeoutMs = 4000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for ${what}; the watchdog said:\n${watchdog.lines.join("\n")}\n${watchdog.stderr()}`);
        }
        await sleep(20);
    }
}

function untilLine(watchdog: Watchdog, pattern: RegExp, timeoutMs?: number): Promise<void> {
    return until(`a line matching ${pattern}`, watchdog, () => watchdog.lines.some((line) => pattern.test(line)), timeoutMs);
}

function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function linesMatching(watchdog: Watchdog, pattern: RegExp): string[] {
    return watchdog.lines.filter((line) => pattern.test(line));
}

const ACTION = /\(action \d+ of /;

// ---------------------------------------------------------------------------------------------

describe("watchdog.py: a healthy server is left alone", () => {
    it("mp: probes with the model and the key, logs that it serves, touches nothing (run as python3 -c)", async () => {
        const watchdog = startWatchdog("mp", {}, "-c");
        await untilLine(watchdog, /serving tiny-moe/);
        await until("a few more probes", watchdog, () => vllm.completionBodies.length >= 5);
        expect(watchdog.lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ watchdog mp: watching vllm-fleet-vllm /);
        expect(watchdog.lines).toHaveLength(2); // started, serving: healthy probes are not logged
        expect(vllm.completionBodies[0]).toEqual({ model: "tiny-moe", prompt: "Say hello.", max_tokens: 4, temperature: 0 });
        expect(new Set(vllm.authorizations)).toEqual(new Set([`Bearer ${API_KEY}`]));
        expect(new Set(docker.requests.map((r) => `${r.method} ${r.path}`))).toEqual(new Set(["GET /containers/vllm-fleet-vllm/json"]));
    });

    it("ray: only looks for the process (run as python3 - < file)", async () => {
        const watchdog = startWatchdog("ray", {}, "stdin");
        await untilLine(watchdog, /serving tiny-moe/);
        await until("a few more probes", watchdog, () => vllm.completionBodies.length >= 5);
        const [server] = docker.serverStarts();
        expect(linesMatching(watchdog, new RegExp(`vllm serve runs in vllm-fleet-ray \\(pid ${server.pid}, up \\d+s\\)`))).toHaveLength(1);
        const programs = new Set(docker.startedExecs().map((e) => e.cmd.join(" ")));
        expect(programs).toEqual(new Set(["pgrep -o -f vllm serve", `ps -o etimes= -p ${server.pid}`]));
        expect(docker.startedExecs().every((e) => e.detach === false)).toBe(true);
        expect(linesMatching(watchdog, ACTION)).toEqual([]);
        expect(docker.serverStarts()).toHaveLength(1);
    });
});

describe("watchdog.py: mp executor", () => {
    it("restarts rank 0's container once after N failed completions, then sees it serving again", async () => {
        vllm.completions = "503";
        docker.state.onRestart = () => (vllm.completions = "ok");
        const watchdog = startWatchdog("mp");
        await untilLine(watchdog, /serving again after/);
        await sleep(300);
        expect(docker.restarts().map((r) => r.path)).toEqual(["/containers/vllm-fleet-vllm/restart?t=10"]);
        const action = linesMatching(watchdog, ACTION);
        expect(action).toHaveLength(1);
        expect(action[0]).toMatch(
            /Z watchdog mp: 3 completions failed \(HTTP 503 .*EngineCore encountered an issue.*\); restarting container vllm-fleet-vllm \(action 1 of 3 in 1m; next probe in 0\.2s\)$/,
        );
        expect(linesMatching(watchdog, /not serving: HTTP 503/)).toHaveLength(1); // the change, not every probe
    });

    it("gives a freshly started container its startup grace, but not a dead engine", async () => {
        docker.state.startedAt = dockerTime(Date.now());
        vllm.completions = "hang";
        const watchdog = startWatchdog("mp", { WATCHDOG_PROBE_TIMEOUT: "0.05" });
        await untilLine(watchdog, /not serving yet \(no answer within 0\.05s\); in its startup grace until \d{4}-/);
        await sleep(300);
        expect(docker.restarts()).toHaveLength(0);
        vllm.health = "503";
        await untilLine(watchdog, /engine dead \(\/health answered 503\); restarting container vllm-fleet-vllm \(action 1 of 3/);
        await until("the restart", watchdog, () => docker.restarts().length > 0);
        await sleep(100);
        expect(docker.restarts()).toHaveLength(1);
    });

    it("backs off: the second action waits the backoff, which then doubles", async () => {
        vllm.completions = "503";
        const watchdog = startWatchdog("mp", { WATCHDOG_STARTUP_GRACE: "0", WATCHDOG_FAILURES: "2", WATCHDOG_BACKOFF: "0.5", WATCHDOG_MAX_RESTARTS: "5" });
        await until("two restarts", watchdog, () => docker.restarts().length >= 2);
        const [first, second] = docker.restarts();
        expect(second.at - first.at).toBeGreaterThanOrEqual(500);
        const actions = linesMatching(watchdog, ACTION);
        expect(actions[0]).toMatch(/2 completions failed .*\(action 1 of 5 in 1m; next probe in 0\.5s\)$/);
        expect(actions[1]).toMatch(/\(action 2 of 5 in 1m; next probe in 1s\)$/);
    });

    it("gives up at the cap, says until when, keeps the events in the state file", async () => {
        vllm.completions = "503";
        const watchdog = startWatchdog("mp", { WATCHDOG_STARTUP_GRACE: "0", WATCHDOG_FAILURES: "2", WATCHDOG_BACKOFF: "0.05", WATCHDOG_MAX_RESTARTS: "2" });
        await untilLine(watchdog, /gave up: 2 actions within 1m; not acting until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/);
        await sleep(300);
        expect(docker.restarts()).toHaveLength(2);
        expect(linesMatching(watchdog, /gave up/)).toHaveLength(1);
        const events = JSON.parse(fs.readFileSync(path.join(dir, "state.json"), "utf8"));
        expect(Array.isArray(events)).toBe(true);
        for (const event of events) {
            expect(Object.keys(event).sort()).toEqual(["actions_in_window", "detail", "event", "time"]);
        }
        expect(events.map((e: any) => e.event)).toEqual(["started", "failing", "action", "action", "gave-up"]);
        expect(events[events.length - 1].actions_in_window).toBe(2);
        expect(watchdog.lines[watchdog.lines.length - 1]).toContain(events[events.length - 1].detail);
        expect(fs.readdirSync(dir).filter((name) => name.endsWith(".tmp"))).toEqual([]);
    });

    it("acts again once the window has room", async () => {
        vllm.completions = "503";
        const watchdog = startWatchdog("mp", {
            WATCHDOG_STARTUP_GRACE: "0",
            WATCHDOG_FAILURES: "2",
            WATCHDOG_BACKOFF: "0.05",
            WATCHDOG_MAX_RESTARTS: "1",
            WATCHDOG_WINDOW: "0.6",
        });
        await untilLine(watchdog, /gave up: 1 action within 0\.6s/);
        await until("a second restart", watchdog, () => docker.restarts().length >= 2);
        const [first, second] = docker.restarts();
        expect(second.at - first.at).toBeGreaterThanOrEqual(600);
        expect(linesMatching(watchdog, ACTION)[1]).toMatch(/\(action 1 of 1 in 0\.6s;/);
    });

    it("leaves a container that is not running to Docker's restart policy", async () => {
        docker.state.container = "exited";
        vllm.completions = "503";
        const watchdog = startWatchdog("mp");
        await untilLine(watchdog, /container vllm-fleet-vllm is not running \(exited\); Docker's restart policy owns it, not acting/);
        await sleep(300);
        expect(docker.restarts()).toHaveLength(0);
        expect(linesMatching(watchdog, /container vllm-fleet-vllm is not running/)).toHaveLength(1);
        docker.state.container = "running";
        vllm.completions = "ok";
        await untilLine(watchdog, /serving again after/);
        expect(linesMatching(watchdog, /container vllm-fleet-vllm is running again/)).toHaveLength(1);
        expect(docker.restarts()).toHaveLength(0);
    });
});

describe("watchdog.py: the gateway", () => {
    const ROUTES = [
        { model: "big", url: "http://192.168.200.12:8000" },
        { model: "coder", url: "http://192.168.200.14:8001" },
    ];

    /** A stand-in for vllm-router's admin API: GET /workers lists `registered` (null: it hangs). */
    async function fakeRouter(registered: () => { url: string; model_id: string }[] | null): Promise<FakeServer> {
        return fakeServer((_, res) => {
            const workers = registered();
            if (workers === null) {
                return false; // no answer: a router that hangs
            }
            res.setHeader("Content-Type", "application/json");
            res.end(JSON.stringify({ workers, total: workers.length }));
            return true;
        });
    }

    /** A stand-in for the gateway's proxy: GET /health answers `status()`. */
    async function fakeProxy(status: () => number): Promise<FakeServer> {
        return fakeServer((_, res) => {
            res.statusCode = status();
            res.end();
            return true;
        });
    }

    interface FakeServer {
        readonly port: number;
        readonly paths: string[];
        readonly close: () => Promise<void>;
    }

    async function fakeServer(answer: (req: http.IncomingMessage, res: http.ServerResponse) => boolean): Promise<FakeServer> {
        const paths: string[] = [];
        const server = http.createServer((req, res) => {
            paths.push(`${req.method} ${req.url}`);
            answer(req, res);
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        return {
            port: (server.address() as AddressInfo).port,
            paths,
            close: () => {
                server.closeAllConnections();
                return new Promise((resolve) => server.close(() => resolve()));
            },
        };
    }

    const all = ROUTES.map((route) => ({ url: route.url, model_id: route.model }));
    const gatewayEnv = (router: FakeServer, proxy: FakeServer) => ({ WATCHDOG_PORT: String(router.port), WATCHDOG_PROXY_PORT: String(proxy.port), WATCHDOG_ROUTES: JSON.stringify(ROUTES) });

    it("leaves a router with every route alone: it asks the router's /workers and the proxy's /health only, no service", async () => {
        const router = await fakeRouter(() => all);
        const proxy = await fakeProxy(() => 200);
        try {
            const watchdog = startWatchdog("gateway", { ...gatewayEnv(router, proxy), WATCHDOG_MODEL: "" });
            await untilLine(watchdog, /serving every route on port/);
            await until("a few more probes", watchdog, () => router.paths.length >= 5);
            expect(watchdog.lines[0]).toMatch(/watchdog gateway: watching vllm-fleet-gateway-unit \(the gateway on port \d+, its router on \d+, 2 routes\)/);
            expect(new Set(router.paths)).toEqual(new Set(["GET /workers"]));
            expect(new Set(proxy.paths)).toEqual(new Set(["GET /health"]));
            expect(vllm.completionBodies).toEqual([]);
            expect(docker.restarts()).toEqual([]);
        } finally {
            await router.close();
            await proxy.close();
        }
    });

    it("restarts the gateway's container after N probes that find a route missing, then sees it serving again", async () => {
        let registered = all.slice(1);
        docker.state.onRestart = () => (registered = all);
        const router = await fakeRouter(() => registered);
        const proxy = await fakeProxy(() => 200);
        try {
            const watchdog = startWatchdog("gateway", { ...gatewayEnv(router, proxy), WATCHDOG_STARTUP_GRACE: "0" });
            await untilLine(watchdog, /serving again after/);
            expect(docker.restarts().map((r) => r.path)).toEqual(["/containers/vllm-fleet-gateway-unit/restart?t=10"]);
            expect(linesMatching(watchdog, ACTION)[0]).toMatch(/3 probes failed \(routes missing in the router: big\); restarting container vllm-fleet-gateway-unit/);
        } finally {
            await router.close();
            await proxy.close();
        }
    });

    it("restarts the gateway's container when its proxy stops answering /health, though the router has every route", async () => {
        let health = 503;
        docker.state.onRestart = () => (health = 200);
        const router = await fakeRouter(() => all);
        const proxy = await fakeProxy(() => health);
        try {
            const watchdog = startWatchdog("gateway", { ...gatewayEnv(router, proxy), WATCHDOG_STARTUP_GRACE: "0" });
            await untilLine(watchdog, /serving again after/);
            expect(docker.restarts().map((r) => r.path)).toEqual(["/containers/vllm-fleet-gateway-unit/restart?t=10"]);
            expect(linesMatching(watchdog, ACTION)[0]).toMatch(/3 probes failed \(the gateway's proxy answered \/health with HTTP 503\); restarting/);
        } finally {
            await router.close();
            await proxy.close();
        }
    });

    it("refuses a gateway without its routes or its proxy's port, naming the variable", async () => {
        const noRoutes = startWatchdog("gateway", { WATCHDOG_PROXY_PORT: "4000", WATCHDOG_ROUTES: "not json" });
        expect(await noRoutes.exit).toBe(2);
        expect(noRoutes.stderr()).toMatch(/WATCHDOG_ROUTES: expected a JSON list/);
        const noProxy = startWatchdog("gateway", { WATCHDOG_ROUTES: JSON.stringify(ROUTES) });
        expect(await noProxy.exit).toBe(2);
        expect(noProxy.stderr()).toMatch(/WATCHDOG_PROXY_PORT is required/);
    });
});

describe("watchdog.py: ray executor", () => {
    it("starts vllm serve when it is gone on two probes, the key in Env and never in Cmd", async () => {
        docker.state.serveRunning = false;
        vllm.completions = "503";
        docker.state.onServeStart = () => (vllm.completions = "ok");
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /serving again after/);
        await sleep(300);
        const execs = docker.startedExecs();
        const starts = docker.lifecycleExecs();
        expect(starts).toHaveLength(1);
        // The lifecycle's restart, with the arguments file the stack's start left and the stop timeout.
        expect(starts[0].cmd).toEqual(["sh", "-c", LIFECYCLE, "vllm-lifecycle", "restart", SERVE_LOG, SERVE_ARGS_FILE, "1"]);
        expect(starts[0].env).toEqual([`VLLM_API_KEY=${API_KEY}`]);
        // Attached: the exec returned once the lifecycle had, with the server running.
        expect(starts[0].detach).toBe(false);
        expect(starts[0].exitCode).toBe(0);
        expect(execs.some((e) => e.cmd.some((word) => word.includes(API_KEY)))).toBe(false);
        // Two probes saw it absent before the start.
        const before = execs.slice(0, execs.indexOf(starts[0]));
        expect(before.filter((e) => e.cmd[0] === "pgrep" && e.exitCode === 1)).toHaveLength(2);
        expect(linesMatching(watchdog, ACTION)).toEqual([
            expect.stringMatching(/vllm serve is not running in vllm-fleet-ray \(2 probes\); starting it \(action 1 of 3 in 1m; next probe in 0\.2s\)$/),
        ]);
        // Nothing was there to stop; the server runs with the arguments of the file, the key in its environment.
        expect(starts[0].stdout).toBe("the server was not running\n");
        expect(docker.serverStarts()).toEqual([{ pid: expect.stringMatching(/^\d+$/), args: SERVE_ARGS, key: API_KEY }]);
        expect(docker.runningServers()).toEqual([docker.serverStarts()[0].pid]);
        expect(docker.readTmp("vllm-fleet-serve.log")).toBe(`stand-in vllm ${SERVE_ARGS.join(" ")}\n`);
    });

    it("kills and starts again a server whose engine died (/health 503)", async () => {
        vllm.health = "503";
        docker.state.onServeStart = () => (vllm.health = "ok");
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /serving again after/);
        const execs = docker.startedExecs();
        const restart = execs.findIndex((e) => e.cmd[0] === "sh");
        expect(restart).toBeGreaterThan(0);
        // One exec of the lifecycle's restart, which stopped the old server (SIGTERM sufficed) and
        // started the new one; then the probes find the new one.
        const [old, fresh] = docker.serverStarts();
        expect(execs[restart].cmd.slice(3)).toEqual(["vllm-lifecycle", "restart", SERVE_LOG, SERVE_ARGS_FILE, "1"]);
        expect(execs[restart].stdout).toBe("the server stopped\n");
        expect(execs.slice(restart + 1, restart + 3).map((e) => e.cmd.join(" "))).toEqual(["pgrep -o -f vllm serve", `ps -o etimes= -p ${fresh.pid}`]);
        expect(docker.lifecycleExecs()).toHaveLength(1);
        expect(fresh.pid).not.toBe(old.pid);
        expect(fresh.args).toEqual(SERVE_ARGS);
        expect(docker.runningServers()).toEqual([fresh.pid]);
        expect(linesMatching(watchdog, ACTION)).toEqual([
            expect.stringMatching(/engine dead \(\/health answered 503\); restarting vllm serve \(action 1 of 3 in 1m; next probe in 0\.2s\)$/),
        ]);
        expect(linesMatching(watchdog, /killed/)).toEqual([]);
    });

    it("counts hanging completions after the grace, and SIGKILLs a server that ignores SIGTERM", async () => {
        vllm.completions = "hang";
        docker.state.sigtermStops = false;
        docker.state.onServeStart = () => (vllm.completions = "ok");
        // The server in the container has just started (its real age): its grace is over at once.
        const watchdog = startWatchdog("ray", { WATCHDOG_PROBE_TIMEOUT: "0.1", WATCHDOG_STOP_TIMEOUT: "0.2", WATCHDOG_STARTUP_GRACE: "0" });
        await untilLine(watchdog, /serving again after/);
        // The lifecycle's stop, given the stop timeout, SIGKILLed the server SIGTERM did not stop, then started the new one.
        const [restart, ...more] = docker.lifecycleExecs();
        expect(more).toEqual([]);
        expect(restart.cmd.slice(3)).toEqual(["vllm-lifecycle", "restart", SERVE_LOG, SERVE_ARGS_FILE, "0.2"]);
        expect(restart.stdout).toBe("the server was killed (0.2 s after SIGTERM)\n");
        const [old, fresh] = docker.serverStarts();
        expect(docker.runningServers()).toEqual([fresh.pid]);
        expect(fresh.pid).not.toBe(old.pid);
        expect(linesMatching(watchdog, ACTION)).toEqual([
            expect.stringMatching(/3 completions failed \(no answer within 0\.1s\); restarting vllm serve \(action 1 of 3/),
        ]);
        expect(linesMatching(watchdog, /restarting vllm serve: the server was killed \(0\.2 s after SIGTERM\)$/)).toHaveLength(1);
        const events = JSON.parse(fs.readFileSync(path.join(dir, "state.json"), "utf8"));
        expect(events.filter((e: any) => e.event === "kill")).toHaveLength(1);
    });

    it("leaves a dying server running when the serve arguments cannot be read, saying which file", async () => {
        vllm.health = "503";
        docker.writeServeArgs("serve /models/x");
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /restarting vllm serve failed/);
        expect(linesMatching(watchdog, /restarting vllm serve failed: \/tmp\/vllm-fleet-serve\.args \(the serve arguments vllm-start\.sh writes\) is not a JSON list of strings$/)).toHaveLength(1);
        docker.writeServeArgs(undefined);
        await untilLine(watchdog, /restarting vllm serve failed: \/tmp\/vllm-fleet-serve\.args \(the serve arguments vllm-start\.sh writes\) is missing$/);
        // Each time the lifecycle's restart read the file first, and stopped and started nothing.
        const restarts = docker.lifecycleExecs();
        expect(restarts).toHaveLength(2);
        for (const restart of restarts) {
            expect(restart.cmd[4]).toBe("restart");
            expect(restart.exitCode).toBe(1);
            expect(restart.stdout).toBe("");
        }
        const [server, ...more] = docker.serverStarts();
        expect(more).toEqual([]);
        expect(docker.runningServers()).toEqual([server.pid]);
    });

    it("leaves a missing Ray head container to Docker", async () => {
        docker.state.container = "missing";
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /container vllm-fleet-ray does not exist; Docker's restart policy owns it, not acting/);
        await sleep(300);
        expect(docker.requests.every((r) => r.method === "GET" && r.path === "/containers/vllm-fleet-ray/json")).toBe(true);
        expect(linesMatching(watchdog, ACTION)).toEqual([]);
    });
});

/** How long the tests below wait for a line: python3's start alone can take seconds on a busy machine. */
const SLOW_MS = 15_000;

describe.each(["mp", "ray"] as const)("watchdog.py (%s): each state of the serving container", (executor) => {
    const name = executor === "ray" ? "vllm-fleet-ray" : "vllm-fleet-vllm";
    /** The serving container's state, what the watchdog says of it, and that it acts only on a running one. */
    it.each([
        ["running", `^.*(restarting container ${name}|vllm serve is not running in ${name} \\(2 probes\\); starting it) \\(action 1 of 3`],
        ["paused", `container ${name} is paused; not acting until it is unpaused$`],
        ["restarting", `container ${name} is not running \\(restarting\\); Docker's restart policy owns it, not acting$`],
        ["exited", `container ${name} is not running \\(exited\\); Docker's restart policy owns it, not acting$`],
        ["dead", `container ${name} is not running \\(dead\\); Docker's restart policy owns it, not acting$`],
        ["removing", `container ${name} is not running \\(removing\\); Docker's restart policy owns it, not acting$`],
        ["created", `container ${name} is not running \\(created\\); Docker's restart policy owns it, not acting$`],
        ["missing", `container ${name} does not exist; Docker's restart policy owns it, not acting$`],
    ] as const)("%s", async (state, says) => {
        docker.state.container = state;
        // It needs acting on: mp's completions fail, ray's `vllm serve` is gone.
        vllm.completions = "503";
        docker.state.serveRunning = false;
        // A backoff longer than the look below: the one action is not followed by a second meanwhile
        // (at 0.2 s the next one came within the 300 ms on an idle machine).
        const watchdog = startWatchdog(executor, { WATCHDOG_STARTUP_GRACE: "0", WATCHDOG_BACKOFF: "5" });
        await untilLine(watchdog, new RegExp(says), SLOW_MS);
        await sleep(300);
        if (state === "running") {
            expect(executor === "mp" ? docker.restarts().length : docker.lifecycleExecs().length).toBe(1);
        } else {
            // Only looked: no exec, no restart, and Docker's refusals never reached the log.
            expect(docker.requests.every((r) => r.method === "GET" && r.path === `/containers/${name}/json`)).toBe(true);
            expect(linesMatching(watchdog, /Docker Engine API|HTTP|Docker:/)).toEqual([]);
            expect(linesMatching(watchdog, ACTION)).toEqual([]);
            expect(linesMatching(watchdog, /container-down|not acting/)).toHaveLength(1);
        }
    });
});

describe("watchdog.py: a container that changes between the look and the call", () => {
    it("ray: one paused under the probe is down, not an error of Docker's, and nothing is started", async () => {
        docker.state.afterNextInspect = "paused";
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /container vllm-fleet-ray is paused \(Docker: Container vllm-fleet-ray is paused, unpause the container before exec\); not acting$/, SLOW_MS);
        await sleep(300);
        // Said once: the looks that follow find it paused, as the exec did.
        expect(linesMatching(watchdog, /is paused/)).toHaveLength(1);
        expect(linesMatching(watchdog, /Docker Engine API|HTTP/)).toEqual([]);
        expect(docker.startedExecs()).toEqual([]);
        // Unpaused: watched again, and found serving.
        docker.state.container = "running";
        await untilLine(watchdog, /container vllm-fleet-ray is running again/, SLOW_MS);
        await untilLine(watchdog, /serving again after/, SLOW_MS);
    });

    it("ray: one that stops under the start of vllm serve fails that action in one line naming its state", async () => {
        docker.state.serveRunning = false;
        vllm.completions = "503";
        // The second absent probe finds it running and no server in it; the start's first exec finds it stopped.
        let looks = 0;
        docker.state.onLook = () => (++looks === 2 ? (docker.state.afterNextExec = "exited") : undefined);
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /starting it failed: container vllm-fleet-ray is not running \(Docker: container c0ffee0+ is not running\)$/, SLOW_MS);
        expect(docker.lifecycleExecs()).toEqual([]);
    });

    it("mp: a container gone before its restart, or being removed, fails the action in one line", async () => {
        vllm.completions = "503";
        docker.state.goneAtRestart = true;
        const watchdog = startWatchdog("mp", { WATCHDOG_STARTUP_GRACE: "0", WATCHDOG_FAILURES: "1", WATCHDOG_BACKOFF: "0.05" });
        await untilLine(watchdog, /restarting container vllm-fleet-vllm failed: container vllm-fleet-vllm is gone \(Docker: No such container: vllm-fleet-vllm\)$/, SLOW_MS);
        docker.state.goneAtRestart = false;
        docker.state.onLook = () => (docker.state.afterNextInspect = "removing");
        await untilLine(watchdog, /container vllm-fleet-vllm is not running \(removing\)/, SLOW_MS);
    });

    it("mp: one stopped by hand after the probe is not started again by its restart", async () => {
        vllm.completions = "503";
        let looks = 0;
        // The looks of the probes find it running; the look before the restart finds it exited.
        docker.state.onLook = () => (++looks === 2 ? (docker.state.container = "exited") : undefined);
        const watchdog = startWatchdog("mp", { WATCHDOG_STARTUP_GRACE: "0", WATCHDOG_FAILURES: "1" });
        await untilLine(watchdog, /restarting container vllm-fleet-vllm failed: container vllm-fleet-vllm is exited$/, SLOW_MS);
        expect(docker.restarts()).toEqual([]);
    });

    it("ray: an engine restart (socket gone, then back with vllm serve gone) is one error, then a start", async () => {
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /serving tiny-moe/, SLOW_MS);
        await docker.stopEngine();
        await untilLine(watchdog, /Docker Engine API at .*: no such socket; not acting$/, SLOW_MS);
        await sleep(200);
        // Execs started before the restart do not survive it.
        docker.killServer();
        vllm.completions = "503";
        docker.state.onServeStart = () => (vllm.completions = "ok");
        await docker.startEngine();
        await untilLine(watchdog, /serving again after/, SLOW_MS);
        expect(linesMatching(watchdog, /not acting$/)).toHaveLength(1);
        expect(linesMatching(watchdog, /vllm serve is not running in vllm-fleet-ray \(2 probes\); starting it/)).toHaveLength(1);
    });
});

describe("watchdog.py: the process", () => {
    it("exits 0 at once on SIGTERM, even in the middle of a probe that hangs", async () => {
        vllm.completions = "hang";
        const watchdog = startWatchdog("mp", { WATCHDOG_PROBE_TIMEOUT: "60" });
        await until("a hanging probe", watchdog, () => vllm.completionBodies.length > 0);
        const sent = Date.now();
        watchdog.child.kill("SIGTERM");
        expect(await watchdog.exit).toBe(0);
        expect(Date.now() - sent).toBeLessThan(2000);
        expect(watchdog.lines[watchdog.lines.length - 1]).toMatch(/watchdog mp: stopped by a signal$/);
    });

    it("refuses a bad configuration, naming the variable", async () => {
        const watchdog = startWatchdog("ray", { WATCHDOG_SERVE_ARGS_FILE: "serve.args" });
        expect(await watchdog.exit).toBe(2);
        expect(watchdog.stderr()).toContain("WATCHDOG_SERVE_ARGS_FILE='serve.args': expected an absolute path");
        // ray needs the lifecycle it restarts vLLM with; mp does not.
        const without = startWatchdog("ray", { WATCHDOG_LIFECYCLE: "" });
        expect(await without.exit).toBe(2);
        expect(without.stderr()).toContain("WATCHDOG_LIFECYCLE is required");
    });
});
