/**
 * How a failed step of a host command is told: one line naming the resource, the operation, the
 * node and the reason, e.g.
 *
 *   vllm-serve (delete) on node spark1 (spark@10.230.34.10:22): Error response from daemon: Container 60f75cb3a1b2 is not running
 *
 * The reason is the last meaningful line of the step's standard error: not blank, not a `set -x`
 * trace, not a traceback's frame, not a generic trailer (Docker's "See 'docker run --help'.",
 * rsync's "(see previous errors)", vLLM's "See root cause above") unless nothing else is there; a
 * container id shortened to the 12 characters Docker shows elsewhere (`docker ps`). On the node, scripts/run-step.sh reads the program's standard error
 * the same way and ends it with that line, prefixed `vllm-fleet: `, so the pulumi-command runner's
 * error (which quotes the output) ends with it too; the builtin runner takes the node's line when
 * there is one and words it here when there is none (ssh failed before the program ran). A command
 * with a peer is run by scripts/peer-run.sh with either runner: it words the lines of both sides
 * itself, and the builtin runner only puts them in its message ({@link peerRunResult}).
 *
 * Pure and self-contained (no imports): the builtin runner's dynamic provider serializes it.
 */

/** The operations of a host command. */
export type StepOperation = "create" | "update" | "delete";

/** Which step, and on which node. */
export interface StepWhere {
    /** The resource's name, e.g. `vllm-serve`. */
    readonly resource: string;
    readonly operation: StepOperation;
    readonly node: string;
    readonly user: string;
    readonly host: string;
    readonly port: number;
    /** ssh's ConnectTimeout to this node: how long it waited when the node did not answer. */
    readonly connectTimeoutSeconds?: number;
}

/** What one ssh session of a step ended with. */
export interface StepOutcome {
    readonly code: number | null;
    readonly signal: string | null;
    readonly stdout: string;
    readonly stderr: string;
}

/** The prefix of the line a node prints for a failed step (scripts/run-step.sh). */
export const STEP_LINE_PREFIX = "vllm-fleet: ";
/** Marks the line the node-side ERR trap writes: the command that failed (scripts/run-step.sh). */
export const FAILED_COMMAND_MARK = "vllm-fleet-failed-command: ";

/** `spark1 (spark@10.230.34.10:22)`: a node as every message names it. */
export function nodeAddress(target: { readonly node: string; readonly user: string; readonly host: string; readonly port: number }): string {
    return `${target.node} (${target.user}@${target.host}:${target.port})`;
}

/**
 * Whether the system ssh client gave up waiting for the node, by what it printed on `stderr` (at
 * LogLevel=ERROR, as OpenSSH 9.2 prints it): no TCP connection, or no SSH banner, within
 * ConnectTimeout (the kernel's words differ: "Connection timed out" on Linux, "Operation timed out"
 * on macOS). A connection the keepalives closed later (ssh.ts, SSH_KEEPALIVE) ends with 255 and no
 * word at that level. scripts/peer-run.sh's no_answer reads a line alike.
 */
export function sshConnectTimedOut(stderr: string): boolean {
    return /^(?:ssh: connect to host \S+ port \d+: (?:Connection|Operation) timed out|Connection timed out during banner exchange)\r?$/m.test(stderr);
}

/** What a reading of standard error noted (as scripts/run-step.sh's fleet_filter does). */
export interface StderrNotes {
    /** The node's own line for the failed step, if it printed one. */
    readonly stepLine?: string;
    /** The last meaningful line. */
    readonly any?: string;
    /** The last meaningful line that is not a generic trailer either. */
    readonly reason?: string;
    /** The command that failed (the node-side ERR trap's mark). */
    readonly command?: string;
    /** The lines that are not blank and not the node's marks or step line, as a terminal shows them. */
    readonly lines: readonly string[];
    /** Where in `lines` the reason (else the last meaningful line) is; `lines.length` when none. */
    readonly reasonIndex: number;
}

const STEP_LINE = /^vllm-fleet: .* \(.*\) on node .*: /;
/** A `set -x` trace: PS4 (`+ `), its `+` repeated per level. */
const TRACE = /^\++ /;
/** What vLLM puts before a process's lines: `(EngineCore_DP0 pid=300) `, `(RayWorkerWrapper pid=9, ip=...) `, `[rank0]: `. */
const PROCESS_PREFIX = /^(\([^)]*pid=[0-9]+[^)]*\) |\[rank[0-9]+\]: )+/;
/** A traceback's head, its frames and their code (indented): the reason is the line after them. */
const TRACEBACK = /^Traceback \(most recent call last\):|^\s/;
const GENERIC_TRAILERS = [
    /^See '.*--help'\.?$/, // docker: "See 'docker run --help'."
    /^Run '.*--help' for more information/, // docker
    /\(see previous errors\)/, // rsync: "rsync error: some files/attrs were not transferred (see previous errors) ..."
    /See root cause above/, // vLLM: "RuntimeError: Engine core initialization failed. See root cause above. ..."
    /^Connection to .* closed\.?$/, // ssh
];

/** What a terminal shows of a line: its end of line dropped, and only the last of what a progress bar rewrote. */
function shown(raw: string): string {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    return line.slice(line.lastIndexOf("\r") + 1);
}

/** How a shown line counts (scripts/run-step.sh's fleet_filter counts alike). */
function classify(line: string): "blank" | "noise" | "trailer" | "reason" {
    if (line.trim() === "") {
        return "blank";
    }
    const body = line.replace(PROCESS_PREFIX, "");
    if (TRACE.test(line) || TRACEBACK.test(body)) {
        return "noise";
    }
    return GENERIC_TRAILERS.some((trailer) => trailer.test(body)) ? "trailer" : "reason";
}

/** How many of the last lines the reason is looked for in (scripts/run-step.sh's fleet_filter alike). */
const REASON_WINDOW = 100;

/** Reads standard error line by line, as scripts/run-step.sh's fleet_filter does. */
export function readStderr(stderr: string): StderrNotes {
    let stepLine: string | undefined;
    let command: string | undefined;
    const kept: string[] = [];
    for (const raw of stderr.split("\n")) {
        if (raw.startsWith(FAILED_COMMAND_MARK)) {
            command = raw.slice(FAILED_COMMAND_MARK.length);
        } else if (STEP_LINE.test(raw)) {
            stepLine = raw;
        } else {
            kept.push(raw);
        }
    }
    // A text's last line break ends its last line; it does not start another (bash's read alike).
    if (kept.length > 0 && kept[kept.length - 1] === "") {
        kept.pop();
    }
    let anyIndex: number | undefined;
    let reasonIndex: number | undefined;
    const lines: string[] = [];
    kept.forEach((raw, index) => {
        const line = shown(raw);
        const kind = classify(line);
        if (kind === "blank") {
            return;
        }
        lines.push(line);
        if (index < kept.length - REASON_WINDOW) {
            return;
        }
        if (kind === "trailer" || kind === "reason") {
            anyIndex = lines.length - 1;
        }
        if (kind === "reason") {
            reasonIndex = lines.length - 1;
        }
    });
    return {
        stepLine,
        command,
        lines,
        any: anyIndex === undefined ? undefined : lines[anyIndex],
        reason: reasonIndex === undefined ? undefined : lines[reasonIndex],
        reasonIndex: reasonIndex ?? anyIndex ?? lines.length,
    };
}

/** The last meaningful line of `text` (see {@link readStderr}), or undefined. */
export function lastMeaningfulLine(text: string): string | undefined {
    const notes = readStderr(text);
    return notes.reason ?? notes.any;
}

/**
 * A container id (64 hex digits) shortened to the 12 Docker shows elsewhere (`docker ps`, its
 * TruncateID); image digests (`sha256:...`, `@sha256:...`) stay whole.
 */
export function shortenContainerIds(line: string): string {
    return line.replace(/(?<![0-9a-f:@])([0-9a-f]{12})[0-9a-f]{52}(?![0-9a-f])/g, "$1");
}

/** A reason kept to one readable line: at most 500 characters, its start and its end. */
function clip(reason: string): string {
    return [...reason].length > 500 ? `${[...reason].slice(0, 200).join("")} … ${[...reason].slice(-280).join("")}` : reason;
}

/**
 * Why a step failed, from its outcome: `ssh` when the session to the node failed (ssh's 255 without
 * a line from the node: the node does not answer on SSH when ssh's last word is that it timed out
 * waiting, within `connectTimeoutSeconds`).
 */
export function failureReason(outcome: StepOutcome, kind?: "ssh", connectTimeoutSeconds?: number): string {
    const notes = readStderr(outcome.stderr);
    const last = notes.reason ?? notes.any;
    let reason: string;
    if (kind === "ssh" && last !== undefined && sshConnectTimedOut(last)) {
        reason = connectTimeoutSeconds === undefined ? `does not answer on SSH: ${last}` : `does not answer on SSH (no reply within ${connectTimeoutSeconds} s)`;
    } else if (kind === "ssh") {
        reason = `ssh failed (connection or authentication): ${last ?? "no answer"}`;
    } else {
        const status = outcome.code ?? outcome.signal;
        reason = last ?? (notes.command !== undefined ? `\`${notes.command}\` exited ${status}` : `exited ${status} with no reason on standard error`);
    }
    return clip(shortenContainerIds(reason));
}

/**
 * The one line of a failed step: the node's own line when it printed one (the same words as with the
 * pulumi-command runner), else worded here.
 */
export function stepFailureLine(where: StepWhere, outcome: StepOutcome): string {
    const notes = readStderr(outcome.stderr);
    if (notes.stepLine) {
        return notes.stepLine.slice(STEP_LINE_PREFIX.length);
    }
    const kind = outcome.code === 255 ? "ssh" : undefined;
    return `${where.resource} (${where.operation}) on node ${nodeAddress(where)}: ${failureReason(outcome, kind, where.connectTimeoutSeconds)}`;
}

/**
 * What came before the reason, for the lines under a step's one line: the standard error that
 * preceded the reason line (the reason itself is not repeated), and the end of standard output.
 */
export function stepFailureContext(outcome: StepOutcome, label = ""): string[] {
    const notes = readStderr(outcome.stderr);
    const before = notes.lines.slice(0, notes.reasonIndex).slice(-20);
    const stdout = readStderr(outcome.stdout).lines.slice(-10);
    const section = (title: string, lines: readonly string[]) => (lines.length > 0 ? [`  ${label}${title}:`, ...lines.map((line) => `    ${line}`)] : []);
    return [...section("standard error before it", before), ...section("standard output ended with", stdout)];
}

/**
 * The message of a failed step: one line per failed side, then what preceded each side's reason,
 * indented. The one line comes first because that is the line `pulumi up` shows beside the
 * resource; the lines under it are printed in its diagnostics.
 */
function failureMessage(sides: readonly { line: string; node: string; outcome: StepOutcome }[]): string {
    const context = sides.flatMap((side) => stepFailureContext(side.outcome, sides.length > 1 ? `node ${side.node}, ` : ""));
    return [...sides.map((side) => side.line), ...context].join("\n");
}

/** The message of a failed step without a peer: its one line, then what preceded the reason. */
export function stepFailureMessage(where: StepWhere, outcome: StepOutcome): string {
    return failureMessage([{ line: stepFailureLine(where, outcome), node: where.node, outcome }]);
}

/**
 * What a run of scripts/peer-run.sh (a command with a peer, `self` on this node and `peer` on the
 * other) comes to for the builtin runner. peer-run.sh passes both sessions' output on as it comes,
 * the peer's lines prefixed with `<peer node>: `, and ends a failure's standard error with one line
 * per failed side, the peer's first, worded as run-step.sh words a step's. The output here is this
 * node's lines, then the peer's (prefixed); the failure is those lines, in that order, then what
 * preceded each side's reason, as {@link stepFailureMessage} tells a step without a peer. A line of
 * this node's that starts with the peer's prefix is taken for the peer's: it only moves in the
 * output or its context.
 */
export function peerRunResult(run: StepOutcome, self: StepWhere, peer: StepWhere): { stdout: string; stderr: string; failure?: string } {
    const prefix = `${peer.node}: `;
    const linesOf = (text: string) => {
        const lines = text.split("\n");
        // A text's last line break ends its last line; it does not start another.
        if (lines[lines.length - 1] === "") {
            lines.pop();
        }
        return lines;
    };
    const textOf = (lines: readonly string[]) => lines.map((line) => `${line}\n`).join("");
    const bySide = (lines: readonly string[]) => ({
        self: lines.filter((line) => !line.startsWith(prefix)),
        peer: lines.filter((line) => line.startsWith(prefix)),
    });
    const stdout = bySide(linesOf(run.stdout));
    const stderrLines = linesOf(run.stderr);
    const stderr = bySide(stderrLines.filter((line) => !STEP_LINE.test(line)));
    // The peer's lines as they were, an empty one left out.
    const joined = (side: { self: string[]; peer: string[] }) => textOf([...side.self, ...side.peer.filter((line) => line !== prefix)]);
    if (run.code === 0) {
        return { stdout: joined(stdout), stderr: joined(stderr) };
    }
    const unprefixed = (lines: readonly string[]) => textOf(lines.map((line) => line.slice(prefix.length)));
    const sides = [
        { where: peer, outcome: { ...run, stdout: unprefixed(stdout.peer), stderr: unprefixed(stderr.peer) } },
        { where: self, outcome: { ...run, stdout: textOf(stdout.self), stderr: textOf(stderr.self) } },
    ];
    const failed = stderrLines
        .filter((line) => STEP_LINE.test(line))
        .map((line) => {
            const side = sides.find(({ where }) => line.startsWith(`${STEP_LINE_PREFIX}${where.resource} (${where.operation}) on node ${nodeAddress(where)}: `));
            // A line of neither side's (none is) comes alone.
            const outcome = side?.outcome ?? { ...run, stdout: "", stderr: "" };
            return { line: line.slice(STEP_LINE_PREFIX.length), node: side?.where.node ?? self.node, outcome };
        });
    // peer-run.sh itself failed before it could tell a side's failure: told as this node's.
    return { stdout: joined(stdout), stderr: joined(stderr), failure: failed.length > 0 ? failureMessage(failed) : stepFailureMessage(self, run) };
}
