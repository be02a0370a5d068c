/**
 * How a failed step is told: one line naming the resource, the operation, the node and the last
 * meaningful line of what it ran. The same table of realistic outputs is read by the TypeScript
 * (stepFailure.ts, the builtin runner) and by the node-side bash (scripts/run-step.sh, which both
 * runners send), so the two cannot drift apart.
 */
import { execFileSync, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { runOverSsh, withoutHostEcho } from "../../components/hostCommand";
import { programsOnStdin, readScript, renderAssignments, runFromStdin, shQuote } from "../../components/shell";
import { StepOutcome, StepWhere, failureReason, shortenContainerIds, stepFailureLine, stepFailureMessage } from "../../components/stepFailure";

const CONTAINER_ID = "60f75cb3d2a94e1c8b7f6a5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a291";
const IMAGE_ID = "sha256:4f2a9c8e1b3d5f7a9c0e2b4d6f8a1c3e5b7d9f0a2c4e6b8d0f1a3c5e7b9d1f2a";
const spark1: StepWhere = { resource: "vllm-serve", operation: "delete", node: "spark1", user: "spark", host: "10.230.34.10", port: 22 };
const outcome = (stderr: string, code: number | null = 1, stdout = ""): StepOutcome => ({ code, signal: null, stdout, stderr });

/** vLLM's end when its engine cannot start (v0.11, as `vllm serve` logs it). */
const VLLM_KV_CACHE_FAILURE = [
    "(EngineCore_DP0 pid=300) ERROR 12-03 17:58:01 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=300) ValueError: To serve at least one request with the models's max seq len (262144), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory (10.94 GiB). Based on the available memory, the estimated maximum model length is 118784. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    "(APIServer pid=1) Traceback (most recent call last):",
    '(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>',
    "(APIServer pid=1)     sys.exit(main())",
    '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 880, in wait_for_engine_startup',
    "(APIServer pid=1)     raise RuntimeError(",
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
].join("\n");

/** [what, standard error, exit status, the reason]: outputs as the nodes give them. */
const reasons: [string, string, number, string][] = [
    [
        "docker rm of a container that is not running (its id shortened as docker ps shows it)",
        `Error response from daemon: Container ${CONTAINER_ID} is not running\n`,
        1,
        "Error response from daemon: Container 60f75cb3d2a9 is not running",
    ],
    [
        "docker run whose name is taken, before Docker's pointer to --help",
        `docker: Error response from daemon: Conflict. The container name "/vllm-fleet-ray" is already in use by container "${CONTAINER_ID}". You have to remove (or rename) that container to be able to reuse that name.\nSee 'docker run --help'.\n`,
        125,
        'docker: Error response from daemon: Conflict. The container name "/vllm-fleet-ray" is already in use by container "60f75cb3d2a9". You have to remove (or rename) that container to be able to reuse that name.',
    ],
    [
        "docker pull of a tag the registry does not have",
        "Error response from daemon: manifest for nvcr.io/nvidia/vllm:25.99-py3 not found: manifest unknown: manifest unknown\n",
        1,
        "Error response from daemon: manifest for nvcr.io/nvidia/vllm:25.99-py3 not found: manifest unknown: manifest unknown",
    ],
    [
        "Docker's daemon not answering",
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
        1,
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    ],
    [
        "a script's own one-line error after `set -x` traces",
        "+ docker image inspect --format '{{.Id}}' nvcr.io/nvidia/vllm:25.11-py3\n++ id -u\n+ echo 'nvcr.io/nvidia/vllm:25.11-py3 here is missing'\nnvcr.io/nvidia/vllm:25.11-py3 here is missing, not " +
            `${IMAGE_ID} as read at the start of this run\n+ exit 1\n`,
        1,
        `nvcr.io/nvidia/vllm:25.11-py3 here is missing, not ${IMAGE_ID} as read at the start of this run`,
    ],
    [
        "rsync's real error before its pointer to it",
        'rsync: [sender] link_stat "/models/qwen/model-00001.safetensors" failed: No such file or directory (2)\nrsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1338) [sender=3.2.7]\n',
        23,
        'rsync: [sender] link_stat "/models/qwen/model-00001.safetensors" failed: No such file or directory (2)',
    ],
    [
        "a generic trailer alone, which is then the reason",
        "rsync error: error in rsync protocol data stream (see previous errors) (code 12) at io.c(232) [Receiver=3.2.7]\n",
        12,
        "rsync error: error in rsync protocol data stream (see previous errors) (code 12) at io.c(232) [Receiver=3.2.7]",
    ],
    ["vLLM's root cause, not its traceback or its pointer to the cause", `vllm serve exited before it served qwen; the server log ends with:\n${VLLM_KV_CACHE_FAILURE}\n`, 1, VLLM_KV_CACHE_FAILURE.split("\n")[1]],
    [
        "a Python traceback's last line",
        'Traceback (most recent call last):\n  File "<string>", line 12, in <module>\nConnectionRefusedError: [Errno 111] Connection refused\n',
        1,
        "ConnectionRefusedError: [Errno 111] Connection refused",
    ],
    ["a line ending in CRLF", "curl: (7) Failed to connect to 192.168.200.12 port 8000 after 0 ms: Couldn't connect to server\r\n\n\n", 7, "curl: (7) Failed to connect to 192.168.200.12 port 8000 after 0 ms: Couldn't connect to server"],
    ["what a progress bar left last", "copying  10%\rcopying  55%\rdocker load: unexpected EOF\n", 1, "docker load: unexpected EOF"],
    ["the command that failed, when the program said nothing", `vllm-fleet-failed-command: grep -q '^receiving files' "$state/files.log"\n`, 1, "`grep -q '^receiving files' \"$state/files.log\"` exited 1"],
    ["nothing at all", "", 3, "exited 3 with no reason on standard error"],
    ["a reason more than 100 lines back (only the last 100 are read)", "docker: Error response from daemon: Conflict.\n" + "+ retry\n".repeat(100), 1, "exited 1 with no reason on standard error"],
    ["a reason 99 lines back", "docker: Error response from daemon: Conflict.\n" + "+ retry\n".repeat(99), 1, "docker: Error response from daemon: Conflict."],
];

/** [what, standard error]: ssh's own failures (exit 255, the node's program never ran). */
const sshFailures: [string, string, string][] = [
    ["a refused connection", "ssh: connect to host 10.230.34.10 port 22: Connection refused\n", "ssh: connect to host 10.230.34.10 port 22: Connection refused"],
    ["a key the node does not accept", "spark@10.230.34.10: Permission denied (publickey).\n", "spark@10.230.34.10: Permission denied (publickey)."],
    [
        "a host key that changed",
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\nHost key for 10.230.34.10 has changed and you have requested strict checking.\nHost key verification failed.\n",
        "Host key verification failed.",
    ],
    ["no word at all", "", "no answer"],
];

/** [what, standard error]: ssh giving up waiting for the node (exit 255), as OpenSSH 9.2 prints it (\r and all). */
const noAnswers: [string, string][] = [
    ["no TCP connection within ConnectTimeout", "ssh: connect to host 10.230.34.10 port 22: Connection timed out\r\n"],
    ["the same on macOS", "ssh: connect to host 10.230.34.10 port 22: Operation timed out\r\n"],
    ["no SSH banner within ConnectTimeout (sshd stopped)", "Connection timed out during banner exchange\r\n"],
    ["a shared connection gone silent, then ssh's own fresh one", "mux_client_request_session: read from master failed: Broken pipe\r\nssh: connect to host 10.230.34.10 port 22: Connection timed out\r\n"],
];

/** The bash of scripts/run-step.sh reading `stderr` as fleet_filter does, then its reason. */
function bashReason(stderr: string, status: number, kind = ""): string {
    const program = `${readScript("run-step")}\nfleet_filter "" 2>/dev/null\nfleet_reason ${status} ${kind}`;
    return execFileSync("bash", ["-c", program], { input: stderr, encoding: "utf8" });
}

describe("the reason of a failed step: the last meaningful line of what it ran", () => {
    it.each(reasons)("%s (stepFailure.ts)", (_what, stderr, status, reason) => {
        expect(failureReason(outcome(stderr, status))).toBe(reason);
    });

    it.each(reasons)("%s (run-step.sh, on the node)", (_what, stderr, status, reason) => {
        expect(bashReason(stderr, status)).toBe(reason);
    });

    it.each(sshFailures)("ssh failed: %s (stepFailure.ts and peer-run.sh alike)", (_what, stderr, last) => {
        const reason = `ssh failed (connection or authentication): ${last}`;
        expect(failureReason(outcome(stderr, 255), "ssh")).toBe(reason);
        expect(bashReason(stderr, 255, "ssh")).toBe(reason);
    });

    it.each(noAnswers)("the node does not answer on SSH: %s (stepFailure.ts)", (_what, stderr) => {
        expect(failureReason(outcome(stderr, 255), "ssh", 20)).toBe("does not answer on SSH (no reply within 20 s)");
        expect(failureReason(outcome(stderr, 255), "ssh")).toMatch(/^does not answer on SSH: .*timed out/);
    });

    it("keeps a line to a readable length, its start and its end", () => {
        const long = `Error: ${"x".repeat(900)} the end`;
        const reason = failureReason(outcome(long));
        expect([...reason].length).toBeLessThan(500);
        expect(reason.startsWith("Error: xxx")).toBe(true);
        expect(reason.endsWith("x the end")).toBe(true);
        expect(bashReason(long, 1)).toBe(reason);
    });

    it("shortens container ids only: digests and longer hex stay whole", () => {
        expect(shortenContainerIds(`Container ${CONTAINER_ID} and ${CONTAINER_ID} are gone`)).toBe("Container 60f75cb3d2a9 and 60f75cb3d2a9 are gone");
        expect(shortenContainerIds(`image ${IMAGE_ID}, nvcr.io/nvidia/vllm@${IMAGE_ID}`)).toBe(`image ${IMAGE_ID}, nvcr.io/nvidia/vllm@${IMAGE_ID}`);
        expect(shortenContainerIds(`${CONTAINER_ID}00`)).toBe(`${CONTAINER_ID}00`);
    });
});

describe("the one line of a failed step", () => {
    it("names the resource, the operation, the node and its address, then the reason", () => {
        expect(stepFailureLine(spark1, outcome(`Error response from daemon: Container ${CONTAINER_ID} is not running\n`))).toBe(
            "vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): Error response from daemon: Container 60f75cb3d2a9 is not running",
        );
    });

    it("takes the node's own line when it printed one, whatever came after it", () => {
        const stderr = "Error response from daemon: No such container: vllm-fleet-ray\nvllm-fleet: vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): Error response from daemon: No such container: vllm-fleet-ray\n";
        expect(stepFailureLine(spark1, outcome(stderr))).toBe("vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): Error response from daemon: No such container: vllm-fleet-ray");
    });

    it("says ssh failed when the session to the node did (255, no line from the node)", () => {
        expect(stepFailureLine({ ...spark1, operation: "create" }, outcome("ssh: connect to host 10.230.34.10 port 22: Connection refused\n", 255))).toBe(
            "vllm-serve (create) on node spark1 (spark@10.230.34.10:22): ssh failed (connection or authentication): ssh: connect to host 10.230.34.10 port 22: Connection refused",
        );
    });

    it("says the node does not answer on SSH when ssh timed out waiting for it", () => {
        expect(stepFailureLine({ ...spark1, operation: "create", connectTimeoutSeconds: 20 }, outcome(noAnswers[0][1], 255))).toBe(
            "vllm-serve (create) on node spark1 (spark@10.230.34.10:22): does not answer on SSH (no reply within 20 s)",
        );
    });

    it("trusts the node's line over ssh's 255 when the program itself exited 255", () => {
        const stderr = "vllm-fleet: vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): `false` exited 255\n";
        expect(stepFailureLine(spark1, outcome(stderr, 255))).toBe("vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): `false` exited 255");
    });
});

describe("the message of a failed step (builtin runner)", () => {
    it("is the one line first, then what preceded the reason, without repeating it", () => {
        const stderr = "vllm serve exited before it served qwen; the server log ends with:\n" + VLLM_KV_CACHE_FAILURE + "\n";
        const message = stepFailureMessage({ ...spark1, operation: "create" }, outcome(stderr, 1, "starting vllm serve\n"));
        const lines = message.split("\n");
        expect(lines[0]).toBe(`vllm-serve (create) on node spark1 (spark@10.230.34.10:22): ${VLLM_KV_CACHE_FAILURE.split("\n")[1]}`);
        expect(lines.slice(1)).toEqual([
            "  standard error before it:",
            "    vllm serve exited before it served qwen; the server log ends with:",
            "    (EngineCore_DP0 pid=300) ERROR 12-03 17:58:01 [core.py:708] EngineCore failed to start.",
            "  standard output ended with:",
            "    starting vllm serve",
        ]);
        expect(message.match(/To serve at least one request/g)).toHaveLength(1);
    });

    it("is the one line alone when nothing preceded the reason", () => {
        expect(stepFailureMessage(spark1, outcome(`Error response from daemon: Container ${CONTAINER_ID} is not running\n`))).toBe(
            "vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): Error response from daemon: Container 60f75cb3d2a9 is not running",
        );
    });
});

/** Runs a host command's operation as the runners do: the command line by a login shell, the programs on its standard input. */
function runStep(programs: { create: string; delete?: string }, operation: "create" | "delete" = "create") {
    const input = programsOnStdin(programs, { resource: "vllm-serve", node: "spark1 (spark@10.230.34.10:22)" });
    return spawnSync("sh", ["-c", runFromStdin(operation)], { input, encoding: "utf8" });
}

describe("run-step.sh: a failing program's standard error ends with its step's one line", () => {
    it("passes the output through as it is and adds the line last, keeping the exit status", () => {
        const run = runStep({ create: "set -euo pipefail\necho started\necho 'Error response from daemon: Container " + CONTAINER_ID + " is not running' >&2\nexit 4" });
        expect(run.status).toBe(4);
        expect(run.stdout).toBe("started\n");
        expect(run.stderr.split("\n")).toEqual([
            `Error response from daemon: Container ${CONTAINER_ID} is not running`,
            "vllm-fleet: vllm-serve (create) on node spark1 (spark@10.230.34.10:22): Error response from daemon: Container 60f75cb3d2a9 is not running",
            "",
        ]);
    });

    it("names the operation that ran", () => {
        const run = runStep({ create: "true", delete: "echo 'Error response from daemon: No such container: vllm-fleet-ray' >&2; exit 1" }, "delete");
        expect(run.stderr).toMatch(/^vllm-fleet: vllm-serve \(delete\) on node spark1 \(spark@10\.230\.34\.10:22\): Error response from daemon: No such container: vllm-fleet-ray$/m);
    });

    it("says nothing more when the program succeeds", () => {
        const run = runStep({ create: "set -euo pipefail\necho 'a warning' >&2\necho done" });
        expect(run.status).toBe(0);
        expect(run.stdout).toBe("done\n");
        expect(run.stderr).toBe("a warning\n");
    });

    it("names the command that failed when the program said nothing, as written (a secret's variable, not its value)", () => {
        const run = runStep({ create: "set -euo pipefail\nTOKEN='hf_secret-value'\ncheck() { grep -q \"$TOKEN\" /dev/null; }\ncheck" });
        expect(run.status).toBe(1);
        expect(run.stderr).toBe('vllm-fleet: vllm-serve (create) on node spark1 (spark@10.230.34.10:22): `grep -q "$TOKEN" /dev/null` exited 1\n');
        expect(run.stderr).not.toContain("hf_secret-value");
    });

    it("leaves what the program captures of its own standard error as it was", () => {
        const run = runStep({ create: 'set -euo pipefail\nout="$( { cat /nonexistent; echo x; } 2>&1 )"\nprintf "%s\\n" "$out"' });
        expect(run.status).toBe(0);
        expect(run.stdout).toBe("cat: /nonexistent: No such file or directory\nx\n");
    });

    it("leaves the program its own traps, exit and pipelines", () => {
        const run = runStep({
            create: "set -euo pipefail\ntrap 'echo cleaned up' EXIT\nseen=unset\necho x | while read -r line; do seen=$line; done\necho \"seen=$seen\"\nexit 2",
        });
        expect(run.status).toBe(2);
        // Without lastpipe, as in any bash: the loop ran in a subshell of its own.
        expect(run.stdout).toBe("seen=unset\ncleaned up\n");
        expect(run.stderr).toBe("vllm-fleet: vllm-serve (create) on node spark1 (spark@10.230.34.10:22): exited 2 with no reason on standard error\n");
    });

    it("keeps the program off every command line while it runs", () => {
        const run = runStep({ create: "secret=sk-in-the-program; ps -eww -o args | grep -c 'sk-in-th[e]' || true" });
        expect(run.stdout.trim()).toBe("0");
    });
});

describe("peer-run.sh: a command with a peer (pulumi-command runner) ends with one line per failed side, the peer's first", () => {
    const fakeSsh = (behaviour: string) => ["bash", "-c", behaviour, "fake-ssh"];
    /** An ssh stand-in that runs the remote command line with a login shell, as sshd does. */
    const runsRemote = fakeSsh('exec sh -c "$1"');

    function peerRun(self: { programs: string; ssh?: string[] }, peer: { programs: string; ssh?: string[] }) {
        const stdin = renderAssignments({
            PEER_NODE: "spark1",
            SELF_WHERE: "spark2 (spark@10.230.34.11:22)",
            PEER_WHERE: "spark1 (spark@10.230.34.10:22)",
            SELF_SSH: self.ssh ?? runsRemote,
            PEER_SSH: peer.ssh ?? runsRemote,
            SELF_PROGRAMS: programsOnStdin({ create: self.programs }, { resource: "spark2-image", node: "spark2 (spark@10.230.34.11:22)" }),
            PEER_PROGRAMS: programsOnStdin({ create: peer.programs }, { resource: "spark2-image", node: "spark1 (spark@10.230.34.10:22)" }),
        });
        const script = [
            renderAssignments({ OPERATION: "create", FLEET_STEP: "spark2-image", FLEET_SSH_CONNECT_SECONDS: 20, SELF_RUN: runFromStdin("create"), PEER_RUN: runFromStdin("create") }),
            readScript("run-step"),
            readScript("peer-run"),
        ].join("\n");
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "peer-run-"));
        try {
            return spawnSync("bash", ["-c", script], { input: stdin + "\n", encoding: "utf8", cwd: dir });
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }

    it("succeeds quietly when both sides do, the peer's output prefixed", () => {
        const run = peerRun({ programs: "echo received" }, { programs: "echo sent; echo 'a note' >&2" });
        expect(run.status).toBe(0);
        expect(run.stdout.split("\n").sort()).toEqual(["", "received", "spark1: sent"]);
        expect(run.stderr).toBe("spark1: a note\n");
    });

    it("ends with the peer's line, then this node's, each once", () => {
        const run = peerRun(
            { programs: "echo 'the image copy into nvcr.io/nvidia/vllm:25.11-py3 failed (receiver exit 1)' >&2; exit 1" },
            { programs: "echo 'docker save of nvcr.io/nvidia/vllm:25.11-py3 did not start' >&2; exit 1" },
        );
        expect(run.status).not.toBe(0);
        const lines = run.stderr.trimEnd().split("\n");
        expect(lines.slice(-2)).toEqual([
            "vllm-fleet: spark2-image (create) on node spark1 (spark@10.230.34.10:22): docker save of nvcr.io/nvidia/vllm:25.11-py3 did not start",
            "vllm-fleet: spark2-image (create) on node spark2 (spark@10.230.34.11:22): the image copy into nvcr.io/nvidia/vllm:25.11-py3 failed (receiver exit 1)",
        ]);
        expect(run.stderr.match(/vllm-fleet: /g)).toHaveLength(2);
        expect(lines).toContain("spark1: docker save of nvcr.io/nvidia/vllm:25.11-py3 did not start");
    });

    it("words the line itself when ssh to the peer failed", () => {
        const run = peerRun({ programs: "echo received" }, { programs: "true", ssh: fakeSsh("echo 'ssh: connect to host 10.230.34.10 port 22: Connection refused' >&2; exit 255") });
        expect(run.status).not.toBe(0);
        expect(run.stderr.trimEnd().split("\n").slice(-1)).toEqual([
            "vllm-fleet: spark2-image (create) on node spark1 (spark@10.230.34.10:22): ssh failed (connection or authentication): ssh: connect to host 10.230.34.10 port 22: Connection refused",
        ]);
    });

    it.each(noAnswers)("words the line itself when the peer does not answer on SSH: %s (as stepFailure.ts)", (_what, stderr) => {
        const printed = stderr.replace(/\r\n/g, "\\r\\n");
        const run = peerRun({ programs: "echo received" }, { programs: "true", ssh: fakeSsh(`printf '${printed}' >&2; exit 255`) });
        expect(run.status).not.toBe(0);
        const line = "spark2-image (create) on node spark1 (spark@10.230.34.10:22): does not answer on SSH (no reply within 20 s)";
        expect(run.stderr.trimEnd().split("\n").slice(-1)).toEqual([`vllm-fleet: ${line}`]);
        expect(stepFailureLine({ resource: "spark2-image", operation: "create", node: "spark1", user: "spark", host: "10.230.34.10", port: 22, connectTimeoutSeconds: 20 }, outcome(stderr, 255))).toBe(line);
    });
});

describe("a command with a peer (builtin runner) runs peer-run.sh here: the same lines as the pulumi-command runner", () => {
    const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----\n";
    const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
    const SEND_FAILED = "docker save of nvcr.io/nvidia/vllm:25.11-py3 did not start";
    const RECEIVE_FAILED = "the image copy into nvcr.io/nvidia/vllm:25.11-py3 failed (receiver exit 1)";
    const onSpark1 = "spark2-image (create) on node spark1 (spark@10.230.34.10:22)";
    const onSpark2 = "spark2-image (create) on node spark2 (spark@10.230.34.11:22)";
    let dir: string;
    let savedPath: string | undefined;
    beforeEach(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "peer-builtin-"));
        savedPath = process.env.PATH;
        // A stand-in for ssh: logs its arguments, runs what the node's file under `dir` says (if
        // any), then the remote command line with sh, as sshd does; closed, it closes the session.
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        fs.writeFileSync(
            path.join(bin, "ssh"),
            [
                "#!/bin/bash",
                'for ((i = 1; i <= $#; i++)); do [ "${!i}" = -- ] && break; done',
                'target=${*:i-1:1} remote=${*:i+1:1}',
                `printf '%s\\n' "$*" >> ${JSON.stringify(path.join(dir, "calls"))}`,
                `node=${JSON.stringify(dir)}/\${target#*@}.sh`,
                '[ ! -f "$node" ] || source "$node"',
                "set -m",
                'sh -c "$remote" <&0 &',
                "session=$!",
                `trap 'kill -TERM -- "-$session" 2>/dev/null; exit 255' TERM`,
                'wait "$session"',
            ].join("\n") + "\n",
            { mode: 0o755 },
        );
        process.env.PATH = `${bin}:${savedPath}`;
    });
    afterEach(() => {
        process.env.PATH = savedPath;
        fs.rmSync(dir, { recursive: true, force: true });
    });
    /** What ssh does before the session on a node that it cannot reach: `stderr` and 255. */
    const unreachable = (host: string, stderr: string) => fs.writeFileSync(path.join(dir, `${host}.sh`), `printf '%s' ${shQuote(stderr)} >&2\nexit 255\n`);
    /** The image copy into spark2 (this node) from spark1 (the peer), as the builtin runner runs it. */
    const copy = (receive: string, send: string) =>
        runOverSsh(
            {
                name: "spark2-image",
                node: "spark2",
                host: "10.230.34.11",
                port: 22,
                user: "spark",
                privateKey: KEY,
                hostKey: HOST_KEY,
                connectTimeoutSeconds: 20,
                create: receive,
                peer: { node: "spark1", host: "10.230.34.10", port: 22, user: "spark", hostKey: HOST_KEY, program: send },
            },
            "create",
        );
    const failureOf = (run: Promise<unknown>) =>
        run.then(
            () => expect.unreachable("the copy succeeded"),
            (error: Error) => error.message.split("\n"),
        );

    it("succeeds when both sides do: this node's output, then the peer's prefixed; each side on a connection of its own", async () => {
        const result = await copy("echo received", "echo sent; echo 'a note' >&2");
        expect(result).toEqual({ stdout: "received\nspark1: sent\n", stderr: "spark1: a note\n" });
        const calls = fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n");
        expect(calls).toHaveLength(2);
        for (const [host, node] of [["10.230.34.11", "spark2"], ["10.230.34.10", "spark1"]]) {
            const call = calls.find((line) => line.includes(`spark@${host} --`))!;
            expect(call).toMatch(/^-i \S+\/key -o IdentitiesOnly=yes /);
            expect(call).toContain(`StrictHostKeyChecking=yes -o UserKnownHostsFile=${path.dirname(call.split(" ")[1])}/known_hosts-${node}`);
            expect(call).not.toContain("ControlPath");
        }
    });

    it("tells both sides' failures, the peer's first, one line each, then what preceded each reason", async () => {
        const lines = await failureOf(
            copy(`echo receiving; echo 'waiting for the sender' >&2; echo '${RECEIVE_FAILED}' >&2; exit 1`, `echo sending; echo 'saving' >&2; echo '${SEND_FAILED}' >&2; exit 1`),
        );
        expect(lines).toEqual([
            `${onSpark1}: ${SEND_FAILED}`,
            `${onSpark2}: ${RECEIVE_FAILED}`,
            "  node spark1, standard error before it:",
            "    saving",
            "  node spark1, standard output ended with:",
            "    sending",
            "  node spark2, standard error before it:",
            "    waiting for the sender",
            "  node spark2, standard output ended with:",
            "    receiving",
        ]);
    });

    it.each([
        ["the peer", "echo received", `echo '${SEND_FAILED}' >&2; exit 1`, `${onSpark1}: ${SEND_FAILED}`],
        ["this node", `echo '${RECEIVE_FAILED}' >&2; exit 1`, "echo sent", `${onSpark2}: ${RECEIVE_FAILED}`],
    ])("tells %s's failure alone when the other side finishes", async (_side, receive, send, line) => {
        expect(await failureOf(copy(receive, send))).toEqual([line]);
    });

    it(
        "gives this node 10 s after the peer failed, then closes its session and says it was stopped",
        async () => {
            const started = Date.now();
            const lines = await failureOf(copy("sleep 60", `echo '${SEND_FAILED}' >&2; exit 1`));
            expect(lines).toEqual([`${onSpark1}: ${SEND_FAILED}`, `${onSpark2}: stopped after the other side had failed`]);
            expect(Date.now() - started).toBeGreaterThanOrEqual(10_000);
            expect(Date.now() - started).toBeLessThan(40_000);
        },
        60_000,
    );

    it.each([
        ["the peer's node", "refused", "10.230.34.10", "ssh: connect to host 10.230.34.10 port 22: Connection refused\n", `${onSpark1}: ssh failed (connection or authentication): ssh: connect to host 10.230.34.10 port 22: Connection refused`],
        ["the peer's node", "no answer", "10.230.34.10", noAnswers[0][1], `${onSpark1}: does not answer on SSH (no reply within 20 s)`],
        ["this node", "key refused", "10.230.34.11", "spark@10.230.34.11: Permission denied (publickey).\n", `${onSpark2}: ssh failed (connection or authentication): spark@10.230.34.11: Permission denied (publickey).`],
        ["this node", "no banner", "10.230.34.11", noAnswers[2][1], `${onSpark2}: does not answer on SSH (no reply within 20 s)`],
    ])("words the line itself when ssh cannot reach %s (%s)", async (_node, _what, host, stderr, line) => {
        unreachable(host, stderr);
        expect(await failureOf(copy("echo received", "echo sent"))).toEqual([line]);
    });
});

describe("a failed delete of the builtin runner is shown once", () => {
    it("drops the dynamic-provider host's own print of the error (`${e}: ${e.stack}`), once", () => {
        const print = vi.spyOn(console, "error").mockImplementation(() => undefined);
        try {
            const error = withoutHostEcho(new Error("vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): Error response from daemon: No such container: x"));
            // What @pulumi/pulumi's cmd/dynamic-provider does with a failed delete before it returns the error to the engine.
            console.error(`${error}: ${error.stack}`);
            expect(print).not.toHaveBeenCalled();
            console.error(`${error}: ${error.stack}`);
            expect(print).toHaveBeenCalledTimes(1);
        } finally {
            print.mockRestore();
        }
    });

    it("lets any other print through, and stops looking", () => {
        const print = vi.spyOn(console, "error").mockImplementation(() => undefined);
        try {
            const error = withoutHostEcho(new Error("x"));
            console.error("something else");
            console.error(`${error}: ${error.stack}`);
            expect(print.mock.calls).toEqual([["something else"], [`${error}: ${error.stack}`]]);
        } finally {
            print.mockRestore();
        }
    });
});
