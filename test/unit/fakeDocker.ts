/**
 * A sandbox for node-side command lines: they run under `sh -c` (as sshd runs them) with a fake
 * `docker` that records every call and plays back one container, and a `sleep` that returns at once.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

/** The container the fake `docker` plays back. */
export interface FakeContainer {
    /** What `docker inspect --format {{.State.Running}}` answers, one line per call (the last repeats). Default: `true`. */
    readonly running?: readonly string[];
    /** Whether a plain `docker inspect NAME` finds it (an earlier container of that name). Default: yes. */
    readonly existing?: boolean;
    /** What `docker logs` prints. */
    readonly log?: string;
    /** What `docker exec` prints (the answer of a program run in the container). */
    readonly exec?: string;
}

/** The image id every fake node has: what the fake `docker` and the mock probes (mocks.ts) report. */
export const FAKE_IMAGE_ID = `sha256:${"a".repeat(64)}`;

export interface FakeDockerOutcome {
    readonly status: number | null;
    readonly stdout: string;
    readonly stderr: string;
    /** The arguments of every `docker` call, in order. */
    readonly calls: string[][];
}

export function runWithFakeDocker(commandLine: string, container: FakeContainer = {}): FakeDockerOutcome {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fake-docker-"));
    try {
        fs.writeFileSync(path.join(dir, "running"), (container.running ?? ["true"]).join("\n") + "\n");
        fs.writeFileSync(path.join(dir, "log"), container.log ?? "");
        fs.writeFileSync(path.join(dir, "exec"), container.exec ?? "");
        fs.writeFileSync(
            path.join(dir, "docker"),
            [
                "#!/bin/bash",
                `dir=${JSON.stringify(dir)}`,
                `printf '%s\\0' "$@" >> "$dir/calls"; printf '\\n' >> "$dir/calls"`,
                'case "$*" in',
                `  *"{{.Id}}"*) echo ${FAKE_IMAGE_ID}; exit 0 ;;`,
                '  *"{{.State.Running}}"*)',
                '    head -n 1 "$dir/running"',
                '    [ "$(wc -l < "$dir/running")" -gt 1 ] && sed -i 1d "$dir/running"; exit 0 ;;',
                "esac",
                'case "$1" in',
                `  inspect) exit ${container.existing === false ? 1 : 0} ;;`,
                '  logs) cat "$dir/log" ;;',
                '  exec) cat > /dev/null; cat "$dir/exec" ;;',
                "  run) echo 0123456789ab ;;",
                "esac",
                "exit 0",
            ].join("\n") + "\n",
            { mode: 0o755 },
        );
        fs.writeFileSync(path.join(dir, "sleep"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
        const result = spawnSync("sh", ["-c", commandLine], {
            cwd: dir,
            env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
            encoding: "utf8",
            timeout: 20_000,
        });
        const callsFile = path.join(dir, "calls");
        const calls = fs.existsSync(callsFile)
            ? fs
                  .readFileSync(callsFile, "utf8")
                  .split("\0\n")
                  .filter((line) => line !== "")
                  .map((line) => line.split("\0"))
            : [];
        return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}
