/**
 * Every node-side program that stops, removes or restarts something in a container, or reads one
 * on the way (issue 21), against the stand-in `docker` (fakeDocker.ts) with the container in each
 * state Docker can leave it in: program × state -> what it does. A delete or a stop never fails
 * over a container that is not running or not there; a program that needs the container running
 * fails with one line saying why, never with Docker's own answer.
 */
import { ChildProcess, spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { CONTAINER_REMOVE, CONTAINER_RUN } from "../../components/container";
import { ARGS_CHECK } from "../../components/serveArgsCheck";
import { bashCommand, readScript, scriptProgram, ScriptValue } from "../../components/shell";
import { NCCL_TRANSPORT, VLLM_LIFECYCLE, VLLM_START, VLLM_STOP } from "../../components/vllmService";
import { FAKE_IMAGE_ID, FakeDockerOutcome, runWithFakeDocker, StandInContainer, StandInDocker } from "./fakeDocker";

const HEAD = "vllm-fleet-ray";
const WATCHDOG = "vllm-fleet-watchdog";

/** The states of one container, by what left it so. */
const STATES = {
    "running, vllm serve running": { state: "running", serve: "running" },
    "running, vllm serve hung (ignores SIGTERM)": { state: "running", serve: "hung" },
    "running, no vllm serve": { state: "running", serve: "absent" },
    "running again after an engine restart (vllm serve, started by exec, gone)": { state: "running", serve: "absent" },
    "exited after an engine restart (not restarted)": { state: "exited", exitCode: 143 },
    "stopped by hand (docker kill)": { state: "exited", exitCode: 137 },
    "exited by itself": { state: "exited", exitCode: 1 },
    "restarting (its restart policy)": { state: "restarting", exitCode: 1 },
    "paused, vllm serve in it": { state: "paused", serve: "running" },
    "being removed (removal already in progress, done a moment later)": { state: ["removing", "removing", "gone"] },
    dead: { state: "dead" },
    "created, never started": { state: "created" },
    gone: { state: "gone" },
    "stopping under the program (running, then exited)": { state: ["running", "exited"], serve: "running" },
} as const satisfies Record<string, StandInContainer>;
type StateName = keyof typeof STATES;
const STATE_NAMES = Object.keys(STATES) as StateName[];
/** The daemon does not answer (the engine stopped, or restarting right now). */
const ENGINE_DOWN = "Docker engine not answering";

/** What a program's run should come to. */
type Outcome =
    | { readonly ok: true; readonly says: RegExp }
    | { readonly ok: false; /** the whole of stderr: one line */ readonly fails: RegExp };

/** The state the program sees first (the one its first look finds). */
function firstState(name: StateName): string {
    const state = STATES[name].state;
    return typeof state === "string" ? state : state[0];
}

function run(names: readonly string[], vars: Readonly<Record<string, ScriptValue>>, docker: StandInDocker, tail = ""): FakeDockerOutcome {
    return runWithFakeDocker(bashCommand(`${scriptProgram(names, vars)}${tail}`), docker);
}

/** The states each program is run in: each container state, and the engine not answering. */
const ROWS: readonly (StateName | typeof ENGINE_DOWN)[] = [...STATE_NAMES, ENGINE_DOWN];

function docker(row: StateName | typeof ENGINE_DOWN, name: string, others: Readonly<Record<string, StandInContainer>> = {}): StandInDocker {
    return row === ENGINE_DOWN ? { engineDown: true } : { containers: { ...others, [name]: STATES[row] } };
}

/** `says` is matched line-wise against stdout; `fails` against the one line of stderr. */
function expectOutcome(outcome: FakeDockerOutcome, expected: Outcome): void {
    if (expected.ok) {
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(new RegExp(expected.says.source, `${expected.says.flags.replace("m", "")}m`));
    } else {
        expect(outcome.status).not.toBe(0);
        expect(outcome.stderr).toMatch(/^[^\n]+\n$/);
        expect(outcome.stderr.trimEnd()).toMatch(expected.fails);
        expect(outcome.stderr).not.toMatch(/^Error response from daemon/);
    }
}

const NO_DAEMON = /^Docker on this node does not answer, so nobody can tell the state of container \S+: Cannot connect to the Docker daemon at unix:\/\/\/var\/run\/docker\.sock\. Is the docker daemon running\?$/;

describe("vllm-stop.sh (vllm-serve's delete, and the stop before each start): nothing to stop is success", () => {
    const expected = (row: StateName | typeof ENGINE_DOWN): Outcome => {
        if (row === ENGINE_DOWN) {
            return { ok: false, fails: NO_DAEMON };
        }
        const state = firstState(row);
        if (state === "gone") {
            return { ok: true, says: /^no container vllm-fleet-ray$/m };
        }
        if (row === "stopping under the program (running, then exited)") {
            return { ok: true, says: /^the server was not running \(container vllm-fleet-ray is exited\)$/m };
        }
        if (state === "paused") {
            return { ok: true, says: /^unpaused container vllm-fleet-ray to stop the server in it\nthe server stopped$/m };
        }
        if (state !== "running") {
            return { ok: true, says: new RegExp(`^the server was not running \\(container vllm-fleet-ray is ${state}\\)$`, "m") };
        }
        const serve = (STATES[row] as StandInContainer).serve;
        if (serve === "hung") {
            return { ok: true, says: /^the server was killed \(30 s after SIGTERM\)$/m };
        }
        return { ok: true, says: serve === "running" ? /^the server stopped$/m : /^the server was not running$/m };
    };

    it.each(ROWS)("Ray head %s", (row) => {
        const outcome = run(VLLM_STOP, { CONTAINER: HEAD, LIFECYCLE: readScript(VLLM_LIFECYCLE) }, docker(row, HEAD), '\nstop_vllm_serve "$CONTAINER"');
        expectOutcome(outcome, expected(row));
        // Whatever runs in the head afterwards, it is no server.
        expect(outcome.containers[HEAD]?.serve ?? "absent").toBe("absent");
        if (row !== ENGINE_DOWN && !["running", "paused"].includes(firstState(row))) {
            expect(outcome.calls.map((args) => args[0])).not.toContain("exec");
        }
    });
});

describe("vllm-start.sh: needs the Ray head running; says in one line when it is not", () => {
    const serveArgs = ["serve", "/models/m", "--max-model-len", "4096"];
    const vars = {
        CONTAINER: HEAD,
        SERVE_ARGS: serveArgs,
        SERVE_ARGS_JSON: JSON.stringify(serveArgs),
        ARGS_FILE: "/tmp/serve.args",
        API_KEY: "sk-1",
        LOG_FILE: "/tmp/serve.log",
        TOKEN: "t1",
        CONFIG_ROOT: "/tmp/config",
        NON_CARRY_OVER: "[]",
        LIFECYCLE: readScript(VLLM_LIFECYCLE),
    };
    const expected = (row: StateName | typeof ENGINE_DOWN): Outcome => {
        if (row === ENGINE_DOWN) {
            return { ok: false, fails: NO_DAEMON };
        }
        const state = firstState(row);
        if (row === "stopping under the program (running, then exited)") {
            return { ok: false, fails: /^the Ray head container vllm-fleet-ray is exited; up replaces it$/ };
        }
        if (state === "running") {
            return { ok: true, says: /^started: vllm serve \/models\/m --max-model-len 4096$/m };
        }
        if (state === "paused") {
            return { ok: true, says: /^unpaused the Ray head container vllm-fleet-ray \(it was paused\)\n[^]*started: vllm serve/m };
        }
        return { ok: false, fails: new RegExp(`^the Ray head container vllm-fleet-ray is ${state === "gone" ? "missing" : state}; up replaces it$`) };
    };

    it.each(ROWS)("Ray head %s (the watchdog running)", (row) => {
        const outcome = run(VLLM_START, vars, docker(row, HEAD, { [WATCHDOG]: { state: "running" } }));
        const want = expected(row);
        expectOutcome(outcome, want);
        const calls = outcome.calls.map((args) => `${args[0]} ${args[args.length - 1]}`);
        if (want.ok) {
            expect(outcome.containers[HEAD]).toEqual({ state: "running", serve: "running" });
            // The watchdog held still meanwhile, and runs again.
            expect(calls).toContain(`pause ${WATCHDOG}`);
            expect(outcome.containers[WATCHDOG].state).toBe("running");
        } else if (row !== "stopping under the program (running, then exited)") {
            // Failed before touching anything.
            expect(calls.filter((call) => !call.startsWith("inspect "))).toEqual([]);
        } else {
            expect(outcome.containers[WATCHDOG].state).toBe("running");
        }
    });

    it.each(STATE_NAMES)("the watchdog %s (the Ray head running)", (row) => {
        const outcome = run(VLLM_START, vars, { containers: { [HEAD]: { state: "running", serve: "running" }, [WATCHDOG]: STATES[row] } });
        expectOutcome(outcome, { ok: true, says: /^started: vllm serve/m });
        const state = firstState(row);
        const watchdogCalls = outcome.calls.filter((args) => args[args.length - 1] === WATCHDOG && args[0] !== "inspect").map((args) => args[0]);
        // Held only while it runs; one left paused (a start cut short) is let go at the end.
        expect(watchdogCalls).toEqual(state === "running" ? ["pause", "unpause"] : state === "paused" ? ["unpause"] : []);
        if (typeof STATES[row].state === "string" && (state === "running" || state === "paused")) {
            expect(outcome.containers[WATCHDOG].state).toBe("running");
        }
    });
});

describe("container-remove.sh (every container's delete with the ssh driver): removed in any state", () => {
    it.each(ROWS)("%s", (row) => {
        const outcome = run(CONTAINER_REMOVE, { NAME: HEAD }, docker(row, HEAD));
        if (row === ENGINE_DOWN) {
            expectOutcome(outcome, { ok: false, fails: NO_DAEMON });
            return;
        }
        expectOutcome(outcome, { ok: true, says: firstState(row) === "gone" ? /^no container vllm-fleet-ray$/ : /^removed vllm-fleet-ray$/ });
        expect(outcome.containers[HEAD]).toBeUndefined();
    });

    it("fails, in one line naming the container and its state, when Docker will not remove it", () => {
        // A dead container whose filesystem Docker cannot remove (e.g. still mounted elsewhere).
        const outcome = runWithFakeDocker(
            bashCommand(`docker() { if [ "$1" = rm ]; then echo "Error response from daemon: cannot remove container \\"$3\\": unable to remove filesystem: device or resource busy" >&2; return 1; fi; command docker "$@"; }\n${scriptProgram(CONTAINER_REMOVE, { NAME: HEAD })}`),
            { containers: { [HEAD]: { state: "dead" } } },
        );
        expectOutcome(outcome, { ok: false, fails: /^cannot remove container vllm-fleet-ray \(it is dead\): Error response from daemon: .*device or resource busy$/ });
        expect(outcome.calls.filter((args) => args[0] === "rm")).toHaveLength(0); // the function above answered
    });
});

describe("container-run.sh: the stale container of the same name and the REMOVE_FIRST one go first, in any state", () => {
    const vars = {
        NAME: HEAD,
        RUN_ARGS: ["run", "--detach", "--name", HEAD, "--restart", "on-failure:10", "image:1"],
        FILE_PATHS: [],
        FILE_CONTENTS: [],
        REMOVE_FIRST: ["vllm-fleet-vllm"],
        WATCH_SECONDS: 1,
    };

    it.each(ROWS)("both %s", (row) => {
        const docker: StandInDocker = row === ENGINE_DOWN ? { engineDown: true } : { containers: { [HEAD]: STATES[row], "vllm-fleet-vllm": STATES[row] } };
        const outcome = run(CONTAINER_RUN, vars, docker);
        if (row === ENGINE_DOWN) {
            expectOutcome(outcome, { ok: false, fails: NO_DAEMON });
            return;
        }
        const existed = firstState(row) !== "gone";
        expectOutcome(outcome, { ok: true, says: existed ? /^removed vllm-fleet-vllm first \(it held the GPU\)\ncontainer-id 0123456789ab/ : /^container-id 0123456789ab/ });
        expect(outcome.containers).toEqual({ [HEAD]: { state: "running", serve: "absent" } });
    });

    it.each([
        [["restarting"], "is restarting right after start"],
        [["running", "exited"], "exited right after start"],
        [["running", "dead"], "is dead right after start"],
    ] as const)("a new container %j is not up: fails with its log", (afterRun, says) => {
        const outcome = run(CONTAINER_RUN, vars, { containers: { [HEAD]: { state: "gone", afterRun, log: "ray: error: bogus\n" } } });
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toBe(`container vllm-fleet-ray ${says}; its last log lines:\nray: error: bogus\n`);
    });

    it("a new container removed right after its start (by someone else) is not up either", () => {
        const outcome = run(CONTAINER_RUN, vars, { containers: { [HEAD]: { state: "gone", afterRun: ["running", "running", "gone"] } } });
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toBe("container vllm-fleet-ray is gone right after start (removed, its log with it)\n");
    });
});

describe("hub-download.sh: a throw-away container left by an earlier download goes first, in any state", () => {
    const NAME = "vllm-fleet-hub-download";
    const REVISION = "0123456789abcdef0123456789abcdef01234567";

    it.each(ROWS)("%s", (row) => {
        // Outside /tmp: a container has a /tmp of its own.
        const dir = fs.mkdtempSync(path.join(fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(), "hub-states-"));
        try {
            // The huggingface_hub and httpx of the image, as far as the download program uses them.
            const lib = path.join(dir, "lib");
            fs.mkdirSync(path.join(lib, "huggingface_hub"), { recursive: true });
            fs.writeFileSync(path.join(lib, "httpx.py"), "class ConnectError(Exception): pass\nclass TimeoutException(Exception): pass\n");
            fs.writeFileSync(path.join(lib, "huggingface_hub", "errors.py"), "class RevisionNotFoundError(Exception): pass\nclass RepositoryNotFoundError(Exception): pass\n");
            fs.writeFileSync(
                path.join(lib, "huggingface_hub", "__init__.py"),
                "import os\ndef snapshot_download(repo_id, revision, local_dir):\n    open(os.path.join(local_dir, 'config.json'), 'w').write('{}')\n",
            );
            const model = path.join(dir, "model");
            const outcome = run(
                ["model-list", "docker-state", "hub-download"],
                { IMAGE: "image:1", MODEL_PATH: model, REPO: "org/m", REVISION, HUB_ENDPOINT: "", SECRET_ENV: [] },
                { ...docker(row, NAME), env: { PYTHONPATH: lib, PYTHONDONTWRITEBYTECODE: "1" } },
            );
            if (row === ENGINE_DOWN) {
                expectOutcome(outcome, { ok: false, fails: NO_DAEMON });
                return;
            }
            expectOutcome(outcome, { ok: true, says: new RegExp(`^hub-downloaded org/m@${REVISION} `, "m") });
            expect(outcome.containers).toEqual({});
            expect(fs.readFileSync(path.join(model, "config.json"), "utf8")).toBe("{}");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("vllm-args-check.sh: in the serving container only while it runs, else in a throw-away container", () => {
    const STANDIN = path.join(__dirname, "..", "sim", "workload");

    it.each(ROWS)("serving container %s", (row) => {
        const base: StandInDocker = { images: { "img:1": FAKE_IMAGE_ID }, env: { PYTHONPATH: STANDIN, PYTHONDONTWRITEBYTECODE: "1" } };
        const outcome = run(
            ARGS_CHECK,
            { IMAGE: "img:1", CONTAINER: HEAD, SERVE_ARGS: ["serve", "/models/m", "--max-model-len", "4096"], FLAG_KEYS: [], TIMEOUT: 60 },
            { ...base, ...docker(row, HEAD) },
        );
        if (row === ENGINE_DOWN) {
            expectOutcome(outcome, { ok: false, fails: /^the check of the serve arguments could not start a container of img:1: docker: Cannot connect to the Docker daemon at unix:\/\/\/var\/run\/docker\.sock\. Is the docker daemon running\?$/ });
            return;
        }
        expectOutcome(outcome, { ok: true, says: /^accepted$/ });
        const programs = outcome.calls.map((args) => args[0]).filter((word) => word === "exec" || word === "run");
        const state = firstState(row);
        // Where Docker refused the exec (the container stopped meanwhile), a throw-away container checks.
        expect(programs).toEqual(state !== "running" ? ["run"] : row === "stopping under the program (running, then exited)" ? ["exec", "run"] : ["exec"]);
        // Read-only: nothing is stopped, removed, paused or unpaused.
        expect(outcome.calls.map((args) => args[0]).filter((word) => ["rm", "kill", "stop", "pause", "unpause"].includes(word))).toEqual([]);
    });
});

describe("nccl-transport.sh (the fabric check): a read, in every state; says why it could not read", () => {
    const ib = "spark1:1:1 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE\nspark1:1:1 [0] NCCL INFO Using network IB\n";

    describe.each(["ray", "mp"] as const)("executor %s", (executor) => {
        const name = executor === "ray" ? HEAD : "vllm-fleet-vllm";
        it.each(ROWS)(`${name} %s`, (row) => {
            const container = row === ENGINE_DOWN ? undefined : { ...STATES[row], exec: ib, log: ib };
            const outcome = run(
                NCCL_TRANSPORT,
                { NODE: "spark1", CONTAINER: name, EXECUTOR: executor, POLICY: "refuse", HINT: "" },
                container ? { containers: { [name]: container } } : { engineDown: true },
            );
            expect(outcome.status).toBe(0);
            expect(outcome.stderr).toBe("");
            const state = row === ENGINE_DOWN ? "" : firstState(row);
            // The Ray workers' logs only by an exec into the running container (not one that stops under it).
            const stops = row === "stopping under the program (running, then exited)";
            const readable = row !== ENGINE_DOWN && (executor === "ray" ? state === "running" && !stops : state !== "gone");
            if (readable) {
                expect(outcome.stdout).toMatch(/^transport IB\nnccl NET\/IB : Using/);
            } else {
                const why =
                    row === ENGINE_DOWN
                        ? `container ${name} is unknown \\(Docker on this node does not answer\\)`
                        : `container ${name} is ${state === "gone" ? "missing" : stops ? "exited" : state}${executor === "ray" ? " \\(the Ray workers' logs are inside it\\)" : ""}`;
                expect(outcome.stdout).toMatch(new RegExp(`^transport unknown\\nunread ${why}\\n$`));
            }
        });
    });
});

describe("weights-stop.sh (before a weight sync, and weights-close.sh after it): stale pid files and gone processes", () => {
    /** A process whose command line reads `name ...`, ignoring SIGTERM when `hung`. */
    function processNamed(name: string, hung = false): ChildProcess {
        return spawn("bash", ["-c", `${hung ? "trap '' TERM; " : ""}exec -a "${name}" sleep 30`], { stdio: "ignore" });
    }
    const alive = (pid: number): boolean => {
        try {
            process.kill(pid, 0);
            return true;
        } catch {
            return false;
        }
    };

    type Files = (state: string) => { pid?: string; files?: string; stranger?: ChildProcess; ours?: ChildProcess[] };
    it.each<[string, Files]>([
        ["no state left (nothing ran, or closed already)", () => ({})],
        ["empty and garbled pid files", () => ({ pid: "", files: "not a pid" })],
        ["pid files of receivers gone (ended by themselves, or a reboot)", () => ({ pid: "999999999", files: "999999998" })],
        ["a pid file whose pid is another process now (reused): left alone", () => {
            const stranger = processNamed("some-other-program --serve");
            return { pid: String(stranger.pid), files: String(stranger.pid), stranger };
        }],
        ["both receivers running", (state) => {
            const ours = [processNamed(`rsync --daemon --config=${state}/rsyncd.conf`), processNamed("python3 -c <program> receive-files 192.168.200.13 28732")];
            return { pid: String(ours[0].pid), files: String(ours[1].pid), ours };
        }],
        ["a receiver that ignores SIGTERM: SIGKILL", (state) => {
            const ours = [processNamed(`rsync --daemon --config=${state}/rsyncd.conf`, true)];
            return { pid: String(ours[0].pid), ours };
        }],
    ])("%s", async (_what, files) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "weights-stop-"));
        const state = path.join(dir, "vllm-fleet-rsyncd-28730");
        const made = files(state);
        try {
            await new Promise((resolve) => setTimeout(resolve, 200)); // the processes have their names
            if (made.pid !== undefined || made.files !== undefined) {
                fs.mkdirSync(state);
                if (made.pid !== undefined) fs.writeFileSync(path.join(state, "pid"), made.pid);
                if (made.files !== undefined) fs.writeFileSync(path.join(state, "files.pid"), made.files);
            }
            fs.writeFileSync(path.join(dir, "sleep"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
            const result = spawnSync("bash", ["-c", `${scriptProgram("weights-stop", { STATE: state })}\nstop_weight_receivers "$STATE"`], {
                env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
                encoding: "utf8",
            });
            expect(result.stderr).toBe("");
            expect(result.status).toBe(0);
            expect(fs.existsSync(state)).toBe(false);
            await new Promise((resolve) => setTimeout(resolve, 200));
            for (const child of made.ours ?? []) {
                expect(alive(child.pid!)).toBe(false);
            }
            if (made.stranger) {
                expect(alive(made.stranger.pid!)).toBe(true);
            }
        } finally {
            for (const child of [...(made.ours ?? []), ...(made.stranger ? [made.stranger] : [])]) {
                child.kill("SIGKILL");
            }
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
