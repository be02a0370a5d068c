/**
 * Building the text that runs on a node. Node-side logic lives in real .sh files (./scripts); the
 * TypeScript only prepends quoted variable assignments to them, so no value is ever spliced into
 * shell syntax: a model name like `x'; touch /tmp/pwned; '` stays one harmless string.
 */
import * as fs from "fs";
import * as path from "path";
import { findProjectRoot } from "../infra/core/project";

/** Quotes `value` for POSIX shells: the result always reads back as exactly `value`. */
export function shQuote(value: string): string {
    if (value.includes("\0")) {
        throw new Error("a value with a NUL byte cannot be passed to a shell");
    }
    return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** A shell variable name we may assign. */
const VARIABLE = /^[A-Z_][A-Z0-9_]*$/;

/** Values handed to a script: strings, numbers, booleans, or lists of strings (bash arrays). */
export type ScriptValue = string | number | boolean | readonly string[];

/** Renders `NAME='value'` lines (and `NAME=('a' 'b')` arrays) in a stable order. */
export function renderAssignments(vars: Readonly<Record<string, ScriptValue>>): string {
    return Object.keys(vars)
        .sort()
        .map((name) => {
            if (!VARIABLE.test(name)) {
                throw new Error(`not a shell variable name: ${JSON.stringify(name)}`);
            }
            const value = vars[name];
            if (Array.isArray(value)) {
                return `${name}=(${value.map((item) => shQuote(item)).join(" ")})`;
            }
            return `${name}=${shQuote(String(value))}`;
        })
        .join("\n");
}

// From the project root, so compiled code (bin/) finds the same files.
const SCRIPTS_DIR = path.join(findProjectRoot(__dirname), "components", "scripts");
const scriptCache = new Map<string, string>();

/** The text of components/scripts/<name>.sh (or of <name> itself when it has an extension, e.g. watchdog.py). */
export function readScript(name: string): string {
    let text = scriptCache.get(name);
    if (text === undefined) {
        text = fs.readFileSync(path.join(SCRIPTS_DIR, path.extname(name) ? name : `${name}.sh`), "utf8");
        scriptCache.set(name, text);
    }
    return text;
}

/**
 * A complete bash program: strict mode, the quoted inputs, then the bodies of the named scripts in
 * order (their shebangs and `set` lines are kept; they are harmless after ours).
 */
export function scriptProgram(names: string | readonly string[], vars: Readonly<Record<string, ScriptValue>> = {}): string {
    const bodies = (typeof names === "string" ? [names] : names).map((name) => readScript(name));
    return ["set -euo pipefail", renderAssignments(vars), ...bodies].filter((part) => part !== "").join("\n");
}

/** The command line that runs `program` on the remote login shell: `bash -c '<program>'`. */
export function bashCommand(program: string): string {
    return `bash -c ${shQuote(program)}`;
}

/** The programs of one host command, by operation. */
export interface CommandPrograms {
    readonly create: string;
    readonly update?: string;
    readonly delete?: string;
}

// Read once, when this module loads: the builtin runner's provider, which calls programsOnStdin,
// is serialized with the text itself rather than a path to a file of this checkout.
const RUN_STEP = readScript("run-step");

/** Which step a host command's programs are, for the line that tells its failure (scripts/run-step.sh). */
export interface StepLabel {
    /** The resource's name, e.g. `vllm-serve`. */
    readonly resource: string;
    /** The node as messages name it: `spark1 (spark@10.230.34.10:22)` (stepFailure.ts nodeAddress). */
    readonly node: string;
}

/**
 * The programs of a host command as the data its remote shell reads on standard input: quoted
 * assignments, one per operation (an update without a program of its own runs `create` again),
 * then the functions of scripts/run-step.sh, which {@link runFromStdin} calls. With `step`, a failing
 * program ends its standard error with one line naming the step, the operation, the node and why.
 */
export function programsOnStdin(programs: CommandPrograms, step?: StepLabel): string {
    return `${renderAssignments({
        FLEET_CREATE: programs.create,
        FLEET_UPDATE: programs.update ?? programs.create,
        FLEET_DELETE: programs.delete ?? "",
        FLEET_STEP: step?.resource ?? "",
        FLEET_NODE: step?.node ?? "",
    })}\n${RUN_STEP}`;
}

/**
 * The remote command line that runs one operation's program from {@link programsOnStdin}. It is
 * short on purpose: a failing command is reported quoting its command line, and the program itself
 * (kilobytes, with its secrets) stays out of the message and out of every process's command line.
 * Standard input is read to the end before the program starts, so nothing the program runs can
 * consume it.
 */
export function runFromStdin(operation: "create" | "update" | "delete"): string {
    // The program runs in a subshell of this shell (fleet_run evals it), never as an argument of a
    // new one: a command line is readable by every user of the node (`ps`), and programs carry
    // secrets (keys, tokens).
    return `bash -c 'eval "$(cat)" && fleet_run ${operation}'`;
}
