/**
 * The on-node watchdog (components/scripts/watchdog.py), run by python3 against a fake Docker
 * Engine API on a unix socket and a fake vLLM on 127.0.0.1, both in this process, with intervals of
 * a few hundredths of a second.
 */
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as os from "os";
import * as path from "path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const SCRIPT = path.join(__dirname, "../../components/scripts/watchdog.py");
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
}

/** A container's State.Status, or missing (no such container). */
type ContainerState = "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead" | "missing";

/**
 * One container and the `vllm serve` process inside it, as the fake plays them back. It answers as
 * the Engine API does in each state (moby v28.5: daemon/exec.go, errors.go, restart.go, start.go):
 * an exec into a container that is not running is refused with 409 (paused and restarting with
 * their own words), into one that is missing with 404; a restart of a dead one, or one being
 * removed, fails (500), of a missing one is 404. The engine itself can stop answering (stopEngine).
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
    /** Whether `pgrep -f "vllm serve"` finds the process. */
    serveRunning: boolean;
    servePid: number;
    serveStartedMs: number;
    /** Whether `pkill -f` (SIGTERM) stops it; `pkill -9` always does. */
    sigtermStops: boolean;
    /** What the serve arguments file holds (vllm-start.sh writes it); undefined: no file. */
    serveArgsFile?: string;
    /** Called when the container is restarted, and when `vllm serve` is started by an exec. */
    onRestart?: () => void;
    onServeStart?: () => void;
}

const CONTAINER_ID = "c0ffee".padEnd(64, "0");

function dockerTime(ms: number): string {
    return new Date(ms).toISOString().replace(/Z$/, "123456Z"); // 9 fractional digits, as Docker writes
}

/** A frame of Docker's multiplexed stream (stdout). */
function stdoutFrame(text: string): Buffer {
    const payload = Buffer.from(text);
    const header = Buffer.alloc(8);
    header[0] = 1;
    header.writeUInt32BE(payload.length, 4);
    return Buffer.concat([header, payload]);
}

class FakeDocker {
    readonly requests: DockerRequest[] = [];
    readonly execs = new Map<string, ExecRecord>();
    readonly state: FakeDockerState = {
        container: "running",
        startedAt: dockerTime(Date.now() - HOUR_MS),
        serveRunning: true,
        servePid: 4242,
        serveStartedMs: Date.now() - HOUR_MS,
        sigtermStops: true,
        serveArgsFile: `${JSON.stringify(SERVE_ARGS)}\n`,
    };
    private readonly server: http.Server;

    constructor(readonly socketPath: string) {
        this.server = http.createServer((req, res) => {
            let raw = "";
            req.on("data", (chunk) => (raw += chunk));
            req.on("end", () => this.answer(req, res, raw));
        });
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

    /** The commands of the execs that were started, in order. */
    startedExecs(): ExecRecord[] {
        return this.requests
            .filter((r) => r.method === "POST" && /^\/exec\/[^/]+\/start$/.test(r.path))
            .map((r) => this.execs.get(r.path.split("/")[2])!);
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
            const stdout = this.run(exec);
            if (st.afterNextExec) {
                st.container = st.afterNextExec;
                st.afterNextExec = undefined;
            }
            if (exec.detach) {
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end();
                return;
            }
            res.writeHead(200, { "Content-Type": "application/vnd.docker.raw-stream" });
            res.end(stdout ? stdoutFrame(stdout) : undefined);
            return;
        }
        if (req.method === "GET" && (m = url.match(/^\/exec\/([^/]+)\/json$/))) {
            const exec = this.execs.get(m[1])!;
            return json(200, { ID: m[1], Running: false, ExitCode: exec.exitCode ?? 0, Pid: 0 });
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

    /** What the command does in the container; returns its stdout and sets its exit code. */
    private run(exec: ExecRecord): string {
        const st = this.state;
        const [program, ...args] = exec.cmd;
        switch (program) {
            case "pgrep":
                exec.exitCode = st.serveRunning ? 0 : 1;
                return st.serveRunning ? `${st.servePid}\n` : "";
            case "ps":
                exec.exitCode = st.serveRunning ? 0 : 1;
                return st.serveRunning ? `${String(Math.floor((Date.now() - st.serveStartedMs) / 1000)).padStart(7)}\n` : "";
            case "pkill":
                exec.exitCode = st.serveRunning ? 0 : 1;
                if (args.includes("-9") || st.sigtermStops) {
                    st.serveRunning = false;
                }
                return "";
            case "cat":
                exec.exitCode = args[0] === SERVE_ARGS_FILE && st.serveArgsFile !== undefined ? 0 : 1;
                return exec.exitCode === 0 ? st.serveArgsFile! : "";
            case "sh":
                exec.exitCode = 0;
                st.serveRunning = true;
                st.servePid += 1;
                st.serveStartedMs = Date.now();
                st.onServeStart?.();
                return "";
            default:
                exec.exitCode = 127;
                return "";
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
    await Promise.all([docker.close(), vllm.close()]);
    fs.rmSync(dir, { recursive: true, force: true });
});

/** How python3 gets the file: by path, on stdin, or as the text of `-c` (no `__file__` to rely on). */
type Launch = "path" | "stdin" | "-c";

function startWatchdog(executor: "ray" | "mp", env: Record<string, string> = {}, launch: Launch = "path"): Watchdog {
    const fullEnv: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        WATCHDOG_EXECUTOR: executor,
        WATCHDOG_CONTAINER: executor === "ray" ? "vllm-fleet-ray" : "vllm-fleet-vllm",
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
        ...(executor === "ray" ? { WATCHDOG_SERVE_ARGS_FILE: SERVE_ARGS_FILE, WATCHDOG_SERVE_LOG: SERVE_LOG } : {}),
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
        expect(linesMatching(watchdog, /vllm serve runs in vllm-fleet-ray \(pid 4242, up (1h|360\ds)\)/)).toHaveLength(1);
        const programs = new Set(docker.startedExecs().map((e) => e.cmd.join(" ")));
        expect(programs).toEqual(new Set(["pgrep -o -f vllm serve", "ps -o etimes= -p 4242"]));
        expect(docker.startedExecs().every((e) => e.detach === false)).toBe(true);
        expect(linesMatching(watchdog, ACTION)).toEqual([]);
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

describe("watchdog.py: ray executor", () => {
    it("starts vllm serve when it is gone on two probes, the key in Env and never in Cmd", async () => {
        docker.state.serveRunning = false;
        vllm.completions = "503";
        docker.state.onServeStart = () => (vllm.completions = "ok");
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /serving again after/);
        await sleep(300);
        const execs = docker.startedExecs();
        const starts = execs.filter((e) => e.cmd[0] === "sh");
        expect(starts).toHaveLength(1);
        expect(starts[0].cmd).toEqual(["sh", "-c", 'exec "$@" >"$0" 2>&1', SERVE_LOG, "vllm", ...SERVE_ARGS]);
        expect(starts[0].env).toEqual([`VLLM_API_KEY=${API_KEY}`]);
        expect(starts[0].detach).toBe(true);
        expect(execs.some((e) => e.cmd.some((word) => word.includes(API_KEY)))).toBe(false);
        // Two probes saw it absent before the start.
        const before = execs.slice(0, execs.indexOf(starts[0]));
        expect(before.filter((e) => e.cmd[0] === "pgrep" && e.exitCode === 1)).toHaveLength(2);
        expect(linesMatching(watchdog, ACTION)).toEqual([
            expect.stringMatching(/vllm serve is not running in vllm-fleet-ray \(2 probes\); starting it \(action 1 of 3 in 1m; next probe in 0\.2s\)$/),
        ]);
        expect(execs.some((e) => e.cmd[0] === "pkill")).toBe(false);
    });

    it("kills and starts again a server whose engine died (/health 503)", async () => {
        vllm.health = "503";
        docker.state.onServeStart = () => (vllm.health = "ok");
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /serving again after/);
        const execs = docker.startedExecs().map((e) => e.cmd.join(" "));
        const kill = execs.indexOf("pkill -f vllm serve");
        expect(kill).toBeGreaterThan(0);
        expect(execs.slice(kill, kill + 5)).toEqual([
            "pkill -f vllm serve",
            "pgrep -o -f vllm serve", // gone
            `sh -c exec "$@" >"$0" 2>&1 ${SERVE_LOG} vllm ${SERVE_ARGS.join(" ")}`,
            "pgrep -o -f vllm serve", // the new one
            "ps -o etimes= -p 4243",
        ]);
        expect(linesMatching(watchdog, ACTION)).toEqual([
            expect.stringMatching(/engine dead \(\/health answered 503\); restarting vllm serve \(action 1 of 3 in 1m; next probe in 0\.2s\)$/),
        ]);
    });

    it("counts hanging completions after the grace, and SIGKILLs a server that ignores SIGTERM", async () => {
        vllm.completions = "hang";
        docker.state.sigtermStops = false;
        docker.state.onServeStart = () => (vllm.completions = "ok");
        const watchdog = startWatchdog("ray", { WATCHDOG_PROBE_TIMEOUT: "0.1", WATCHDOG_STOP_TIMEOUT: "0.2" });
        await untilLine(watchdog, /serving again after/);
        const execs = docker.startedExecs().map((e) => e.cmd[0] + (e.cmd.includes("-9") ? " -9" : ""));
        const kill = execs.indexOf("pkill");
        expect(execs.slice(kill).filter((program) => program !== "pgrep")).toEqual(["pkill", "pkill -9", "sh", "ps"]);
        expect(linesMatching(watchdog, ACTION)).toEqual([
            expect.stringMatching(/3 completions failed \(no answer within 0\.1s\); restarting vllm serve \(action 1 of 3/),
        ]);
        expect(linesMatching(watchdog, /vllm serve still runs 0\.2s after SIGTERM; killing it/)).toHaveLength(1);
    });

    it("leaves a dying server running when the serve arguments cannot be read, saying which file", async () => {
        vllm.health = "503";
        docker.state.serveArgsFile = "serve /models/x";
        const watchdog = startWatchdog("ray");
        await untilLine(watchdog, /restarting vllm serve failed/);
        expect(linesMatching(watchdog, /restarting vllm serve failed: \/tmp\/vllm-fleet-serve\.args in vllm-fleet-ray \(the serve arguments vllm-start\.sh writes\) is not a JSON list of strings/)).toHaveLength(1);
        docker.state.serveArgsFile = undefined;
        await untilLine(watchdog, /restarting vllm serve failed: .* is missing/);
        const programs = docker.startedExecs().map((e) => e.cmd[0]);
        expect(programs).toContain("cat");
        expect(programs).not.toContain("pkill");
        expect(programs).not.toContain("sh");
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
        const watchdog = startWatchdog(executor, { WATCHDOG_STARTUP_GRACE: "0" });
        await untilLine(watchdog, new RegExp(says), SLOW_MS);
        await sleep(300);
        if (state === "running") {
            expect(executor === "mp" ? docker.restarts().length : docker.startedExecs().filter((e) => e.cmd[0] === "sh").length).toBe(1);
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
        expect(docker.startedExecs().filter((e) => e.cmd[0] === "sh")).toEqual([]);
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
        docker.state.serveRunning = false;
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
    });
});
