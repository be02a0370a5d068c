/**
 * A sandbox for node-side command lines: they run under `sh -c` (as sshd runs them) with a
 * stand-in `docker` (docker-stand-in.sh) that holds the state of each named container and answers
 * as Docker does in that state, records every call, and a `sleep` that returns at once.
 *
 * Inside a container (a `docker exec` without a recorded answer, a foreground `docker run`) the
 * command runs here with the container's processes played by three stand-ins first on its PATH:
 * `pgrep`/`pkill` find and signal the container's `vllm serve` (running, hung: it ignores SIGTERM
 * and goes only with SIGKILL, or absent), and `python3` starts it when called as the launcher of
 * vllm-lifecycle.sh's start (and is the real python3 otherwise).
 */
import { spawnSync } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { findProjectRoot } from "../../infra/core/project";

/** The project's root: kept visible inside a container's own /tmp (docker-stand-in.sh). */
export const PROJECT_ROOT = findProjectRoot(__dirname);

/** The image id every fake node has: what the stand-in `docker` and the mock probes (mocks.ts) report. */
export const FAKE_IMAGE_ID = `sha256:${"a".repeat(64)}`;

/**
 * The content identity image-identity.sh computes for an image of the stand-in `docker` with this
 * id: the stand-in describes it as one layer named after the id (docker-stand-in.sh), on linux/arm64.
 */
export function standInIdentity(imageId: string): string {
    return `sha256:${crypto.createHash("sha256").update(`vllm-fleet image identity 1\nplatform linux arm64 v8\nlayer ${imageId}\n`).digest("hex")}`;
}

/** The content identity of the image every fake node has: what the stand-in `docker` and the mock probes (mocks.ts) report. */
export const FAKE_IMAGE_IDENTITY = standInIdentity(FAKE_IMAGE_ID);

/** A container's State.Status as Docker reports it, or `gone`: no container of that name. */
export type ContainerState = "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead" | "gone";

/** The `vllm serve` process inside a container: running, hung (ignores SIGTERM), or not there. */
export type ServeState = "running" | "hung" | "absent";

/** One named container of the stand-in. */
export interface StandInContainer {
    /**
     * Its state now, or the states it goes through while a program looks: each `docker inspect` of
     * it moves one on, the last one stays. Default: running.
     */
    readonly state?: ContainerState | readonly ContainerState[];
    /** The states a `docker run --name` of this name gives the new container (default: running). */
    readonly afterRun?: readonly ContainerState[];
    /** Its `vllm serve` (default: absent). */
    readonly serve?: ServeState;
    /** What `docker logs` prints (also of the container a `docker run` makes, with afterRun). */
    readonly log?: string;
    /** When set, what every `docker exec` into it prints (the command itself is not run). */
    readonly exec?: string;
    /** The id of its image (default: {@link FAKE_IMAGE_ID}). */
    readonly image?: string;
    readonly exitCode?: number;
}

export interface StandInDocker {
    /** The containers by name; a name not here has no container until a `docker run --name` makes one. */
    readonly containers?: Readonly<Record<string, StandInContainer>>;
    /** The daemon does not answer (stopped, or restarting): every call fails as the CLI does then. */
    readonly engineDown?: boolean;
    /** Images by name and id ("": no such image); any other name has {@link FAKE_IMAGE_ID}. */
    readonly images?: Readonly<Record<string, string>>;
    /** The registry digests (RepoDigests: `name@sha256:...`) of images by name; none by default. */
    readonly repoDigests?: Readonly<Record<string, readonly string[]>>;
    /** What the daemon answers every `docker pull` with when the pull fails (its error, as a real registry made it); unset: pulls succeed. */
    readonly pullError?: string;
    /** Variables for the command line (and what runs inside containers). */
    readonly env?: Readonly<Record<string, string>>;
}

/** A container as the command line left it. */
export interface ContainerAfter {
    readonly state: ContainerState;
    readonly serve: ServeState;
    /** The files copied into it (`docker cp`), by absolute path, with their content and mode; absent when none. */
    readonly files?: Readonly<Record<string, { content: string; mode: number }>>;
}

export interface FakeDockerOutcome {
    readonly status: number | null;
    readonly stdout: string;
    readonly stderr: string;
    /** The arguments of every `docker` call, in order. */
    readonly calls: string[][];
    /** Every container that is there at the end, by name (a name absent here is gone). */
    readonly containers: Readonly<Record<string, ContainerAfter>>;
}

const STAND_IN = path.join(__dirname, "docker-stand-in.sh");

/** The processes inside a container, as its state files say (see docker-stand-in.sh). */
const INSIDE: Readonly<Record<string, string>> = {
    pgrep: [
        "#!/bin/bash",
        "# STAND-IN: the only process of the container a pattern can find is its `vllm serve`.",
        'serve="$(cat "$STANDIN_DIR/c/$STANDIN_CONTAINER/serve" 2>/dev/null || echo absent)"',
        'case "$serve" in running | hung) ;; *) exit 1 ;; esac',
        'printf "vllm serve /models/m\\n" | grep -Eq -- "${*: -1}" || exit 1',
        "echo 4242",
    ].join("\n"),
    pkill: [
        "#!/bin/bash",
        "# STAND-IN: SIGTERM stops a running `vllm serve`, not a hung one; SIGKILL stops both.",
        'file="$STANDIN_DIR/c/$STANDIN_CONTAINER/serve"',
        'serve="$(cat "$file" 2>/dev/null || echo absent)"',
        'case "$serve" in running | hung) ;; *) exit 1 ;; esac',
        'printf "vllm serve /models/m\\n" | grep -Eq -- "${*: -1}" || exit 1',
        'case " $* " in *" -9 "* | *" -KILL "*) echo absent >"$file" ;; *) [ "$serve" = hung ] || echo absent >"$file" ;; esac',
    ].join("\n"),
    python3: [
        "#!/bin/bash",
        "# STAND-IN: vllm-lifecycle.sh's launcher (its program execs `vllm`) starts the server, which stays;",
        "# anything else is the real python3.",
        'if [ "${1:-}" = -c ] && [[ "${2:-}" == *"os.execvp"* ]]; then',
        '  echo running >"$STANDIN_DIR/c/$STANDIN_CONTAINER/serve"',
        "  command -p sleep 2",
        "  exit 0",
        "fi",
        'PATH="$STANDIN_REAL_PATH" exec python3 "$@"',
    ].join("\n"),
};

function statesOf(state: StandInContainer["state"]): readonly ContainerState[] {
    return state === undefined ? ["running"] : typeof state === "string" ? [state] : state;
}

/** Runs `commandLine` under `sh -c` against the stand-in `docker` in the given state. */
export function runWithFakeDocker(commandLine: string, docker: StandInDocker = {}): FakeDockerOutcome {
    // Not under /tmp: what runs inside a container has a /tmp of its own over it.
    const dir = fs.mkdtempSync(path.join(fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(), "fake-docker-"));
    try {
        const bin = path.join(dir, "bin");
        const inside = path.join(dir, "inside");
        for (const sub of [bin, inside, path.join(dir, "c"), path.join(dir, "images"), path.join(dir, "afterrun")]) {
            fs.mkdirSync(sub);
        }
        fs.writeFileSync(path.join(bin, "docker"), `#!/bin/sh\nexec bash ${JSON.stringify(STAND_IN)} "$@"\n`, { mode: 0o755 });
        fs.writeFileSync(path.join(bin, "sleep"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
        for (const [name, text] of Object.entries(INSIDE)) {
            fs.writeFileSync(path.join(inside, name), `${text}\n`, { mode: 0o755 });
        }
        if (docker.engineDown) {
            fs.writeFileSync(path.join(dir, "engine-down"), "");
        }
        if (docker.pullError !== undefined) {
            fs.writeFileSync(path.join(dir, "pull-error"), docker.pullError);
        }
        for (const [name, id] of Object.entries(docker.images ?? {})) {
            fs.writeFileSync(path.join(dir, "images", name.replace(/\//g, "%")), id);
        }
        for (const [name, digests] of Object.entries(docker.repoDigests ?? {})) {
            fs.writeFileSync(path.join(dir, "images", `${name.replace(/\//g, "%")}.digests`), digests.map((digest) => `${digest}\n`).join(""));
        }
        for (const [name, container] of Object.entries(docker.containers ?? {})) {
            if (container.afterRun) {
                fs.writeFileSync(path.join(dir, "afterrun", name), container.afterRun.join("\n") + "\n");
                fs.writeFileSync(path.join(dir, "afterrun", `${name}.log`), container.log ?? "");
            }
            const states = statesOf(container.state);
            if (states.length === 1 && states[0] === "gone") {
                continue;
            }
            const own = path.join(dir, "c", name);
            fs.mkdirSync(own);
            fs.writeFileSync(path.join(own, "status"), states.join("\n") + "\n");
            fs.writeFileSync(path.join(own, "serve"), container.serve ?? "absent");
            fs.writeFileSync(path.join(own, "log"), container.log ?? "");
            fs.writeFileSync(path.join(own, "exitcode"), String(container.exitCode ?? 0));
            if (container.exec !== undefined) {
                fs.writeFileSync(path.join(own, "exec"), container.exec);
            }
            if (container.image !== undefined) {
                fs.writeFileSync(path.join(own, "image"), container.image);
            }
        }
        const result = spawnSync("sh", ["-c", commandLine], {
            cwd: dir,
            // HOME here: what a step leaves under the home (an image delivery's mark) stays in the stand-in's folder.
            env: { ...process.env, HOME: dir, ...docker.env, PATH: `${bin}:${process.env.PATH}`, STANDIN_DIR: dir, STANDIN_IMAGE_ID: FAKE_IMAGE_ID, STANDIN_PROJECT: PROJECT_ROOT },
            encoding: "utf8",
            timeout: 60_000,
        });
        const callsFile = path.join(dir, "calls");
        const calls = fs.existsSync(callsFile)
            ? fs
                  .readFileSync(callsFile, "utf8")
                  .split("\0\n")
                  .filter((line) => line !== "")
                  .map((line) => line.split("\0"))
            : [];
        const containers: Record<string, ContainerAfter> = {};
        for (const name of fs.readdirSync(path.join(dir, "c"))) {
            const own = path.join(dir, "c", name);
            const state = (fs.readFileSync(path.join(own, "status"), "utf8").split("\n")[0] || "gone") as ContainerState;
            if (state !== "gone") {
                // A process started by exec lives only while the container's main one does.
                const alive = (state === "running" || state === "paused") && fs.existsSync(path.join(own, "serve"));
                const serve = alive ? (fs.readFileSync(path.join(own, "serve"), "utf8").trim() as ServeState) : "absent";
                const files: Record<string, { content: string; mode: number }> = {};
                const walk = (dir: string) => {
                    for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
                        const file = path.join(dir, entry.name);
                        if (entry.isDirectory()) {
                            walk(file);
                        } else {
                            files[file.slice(path.join(own, "fs").length)] = { content: fs.readFileSync(file, "utf8"), mode: fs.statSync(file).mode & 0o777 };
                        }
                    }
                };
                walk(path.join(own, "fs"));
                containers[name] = { state, serve, ...(Object.keys(files).length > 0 ? { files } : {}) };
            }
        }
        return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls, containers };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}
