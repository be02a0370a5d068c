/**
 * A command run on a node over SSH when a resource is created, updated or deleted: the one way the
 * components act on hosts. Two realizations of the same arguments:
 *
 * - `pulumi-command` (default): `remote.Command` of @pulumi/command, Pulumi's standard provider.
 * - `builtin`: vllm-fleet's own resource (a Pulumi dynamic resource running the system `ssh`
 *   client), kept only for machines where the command provider plugin cannot be installed.
 *
 * Both take bash programs and send them on the command's standard input (see shell.ts): values
 * reach the remote shell quoted, never spliced, and the command lines stay short. Changing a program
 * updates in place (runs `update`, else `create`); changing `triggers` replaces (delete first, then
 * create; or create first, with createBeforeReplace). Both reach the node with the same key and host-key rules (ssh.ts).
 */
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import { SshConnection, SshFiles, SshTarget, knownHostsLine, overSharedConnection, sshArgs } from "./ssh";
import { CommandPrograms, programsOnStdin, readScript, renderAssignments, runFromStdin } from "./shell";
import { StepOperation, StepOutcome, StepWhere, nodeAddress, peerRunResult, stepFailureMessage } from "./stepFailure";
import { progressRelay } from "./stepProgress";

export { SshConnection } from "./ssh";

/** How commands reach the hosts. */
export type CommandRunner = "pulumi-command" | "builtin";

/**
 * A program run on another node at the same time as the command (e.g. the sending side of a copy
 * between nodes). Only control passes through the machine running Pulumi: the two SSH sessions and
 * their output; whatever the two programs exchange goes between the nodes directly.
 */
export interface PeerProgram {
    readonly connection: SshConnection;
    /** A bash program run on the peer node on create and update. */
    readonly program: pulumi.Input<string>;
}

export interface HostCommandArgs {
    readonly connection: SshConnection;
    /**
     * Runs `peer.program` on another node while this command runs (both start together); the
     * command succeeds only when both programs do. Its output follows this command's, each line
     * prefixed with the peer node's name. When one side fails, the other is given 10 s to finish
     * (it usually notices on its own), then its session is closed. Both runners run the two
     * sessions with scripts/peer-run.sh on this machine, which holds that rule.
     */
    readonly peer?: PeerProgram;
    /** The ssh files of both nodes on this machine (see ssh.ts), for the pulumi-command runner with a peer. */
    readonly peerFiles?: { readonly peer: pulumi.Output<SshFiles>; readonly self: pulumi.Output<SshFiles> };
    /** Bash programs (not command lines): run on create, on update (default: create) and on delete. */
    readonly create: pulumi.Input<string>;
    readonly update?: pulumi.Input<string>;
    readonly delete?: pulumi.Input<string>;
    /** Any change here replaces the command (delete, then create). */
    readonly triggers?: pulumi.Input<unknown[]>;
    /** Replaced by creating first (no delete program): its dependents are not replaced with it, as with delete first. */
    readonly createBeforeReplace?: boolean;
}

/** What the components read from a command. */
export interface HostCommand {
    readonly resource: pulumi.CustomResource;
    readonly stdout: pulumi.Output<string>;
}

// Read once, when this module loads: the builtin runner's provider, which runs peer-run.sh too, is
// serialized with the text itself rather than a path to a file of this checkout.
const PEER_RUN_SH = [readScript("run-step"), readScript("peer-run")].join("\n");
/** What runs peer-run.sh's program on this machine (a local.Command's interpreter). */
const PEER_RUN_INTERPRETER = ["/bin/bash", "-c"];

/** One node of a command with a peer, as scripts/peer-run.sh reaches it. */
interface PeerRunSide {
    readonly target: { readonly node: string; readonly user: string; readonly host: string; readonly port: number };
    /** The ssh command line that reaches it, up to the `--` after which peer-run.sh puts the remote command. */
    readonly ssh: readonly string[];
}

/** An ssh command line of peer-run.sh (SELF_SSH, PEER_SSH): ssh and its options for `target`, ending in `--`. */
function peerRunSsh(target: SshTarget & { readonly user: string }, keyFile: string, knownHostsFile: string): string[] {
    return ["ssh", ...sshArgs(target, keyFile, knownHostsFile, "")].slice(0, -1);
}

/**
 * The program that runs one operation of a command with a peer on this machine, for both runners:
 * the quoted inputs, then run-step.sh's functions and peer-run.sh. The peer runs its one program on
 * create and on update alike (programsOnStdin gives update the create program); it is named by this
 * step's operation. Self-contained but for the scripts' text: the builtin runner's provider runs it.
 */
function peerRunScript(resource: string, operation: "create" | "update", connectTimeoutSeconds: number): string {
    return [
        renderAssignments({
            OPERATION: operation,
            FLEET_STEP: resource,
            FLEET_SSH_CONNECT_SECONDS: connectTimeoutSeconds,
            SELF_RUN: runFromStdin(operation),
            PEER_RUN: runFromStdin(operation),
        }),
        PEER_RUN_SH,
    ].join("\n");
}

/** peer-run.sh's standard input: the nodes as messages name them, their ssh command lines and programs. */
function peerRunInput(resource: string, self: PeerRunSide & { readonly programs: CommandPrograms }, peer: PeerRunSide & { readonly program: string }): string {
    return (
        renderAssignments({
            PEER_NODE: peer.target.node,
            SELF_WHERE: nodeAddress(self.target),
            PEER_WHERE: nodeAddress(peer.target),
            SELF_SSH: self.ssh,
            PEER_SSH: peer.ssh,
            SELF_PROGRAMS: programsOnStdin(self.programs, { resource, node: nodeAddress(self.target) }),
            PEER_PROGRAMS: programsOnStdin({ create: peer.program }, { resource, node: nodeAddress(peer.target) }),
        }) + "\n"
    );
}

/** Registers a command with the chosen runner. */
export function hostCommand(
    runner: CommandRunner,
    name: string,
    args: HostCommandArgs,
    opts: pulumi.CustomResourceOptions = {},
): HostCommand {
    const options: pulumi.CustomResourceOptions = { ...opts, deleteBeforeReplace: !args.createBeforeReplace };
    if (runner === "pulumi-command" && args.peer) {
        // remote.Command reaches one host: peer-run.sh runs the two ssh clients here (control only),
        // with the same key and host-key files as every other path (ssh.ts), the programs on their stdin.
        const files = args.peerFiles;
        if (!files) {
            throw new Error(`${name}: a command with a peer and the pulumi-command runner needs the ssh files of both nodes`);
        }
        const peer = args.peer;
        const stdin = pulumi
            .all([args.create, args.update, args.delete, peer.program, files.self, files.peer])
            .apply(([create, update, del, peerProgram, own, other]) =>
                peerRunInput(
                    name,
                    { target: args.connection, ssh: peerRunSsh(args.connection, own.keyFile, own.knownHostsFile), programs: { create, update, delete: del } },
                    { target: peer.connection, ssh: peerRunSsh(peer.connection, other.keyFile, other.knownHostsFile), program: peerProgram },
                ),
            );
        const resource = new command.local.Command(
            name,
            {
                create: peerRunScript(name, "create", args.connection.connectTimeoutSeconds),
                update: peerRunScript(name, "update", args.connection.connectTimeoutSeconds),
                stdin: pulumi.secret(stdin),
                triggers: args.triggers,
                addPreviousOutputInEnv: false,
                interpreter: PEER_RUN_INTERPRETER,
            },
            options,
        );
        return { resource, stdout: resource.stdout };
    }
    if (runner === "pulumi-command") {
        const resource = new command.remote.Command(
            name,
            {
                connection: {
                    host: args.connection.host,
                    port: args.connection.port,
                    user: args.connection.user,
                    privateKey: args.connection.privateKey,
                    hostKey: args.connection.hostKey,
                    // A dead host fails after a few short dials instead of the provider's default minutes.
                    dialErrorLimit: 3,
                    perDialTimeout: args.connection.connectTimeoutSeconds,
                },
                // The programs travel on standard input; the command lines stay short (see shell.ts).
                stdin: pulumi
                    .all([args.create, args.update, args.delete])
                    .apply(([create, update, del]) => programsOnStdin({ create, update, delete: del }, { resource: name, node: nodeAddress(args.connection) })),
                create: runFromStdin("create"),
                update: runFromStdin("update"),
                delete: args.delete === undefined ? undefined : runFromStdin("delete"),
                triggers: args.triggers,
                addPreviousOutputInEnv: false,
            },
            options,
        );
        return { resource, stdout: resource.stdout };
    }
    const resource = new SshCommand(name, args, options);
    return { resource, stdout: resource.stdout };
}

/** The inputs (and stored outputs) of the builtin resource. */
export interface SshCommandProps {
    /** The resource's name, for the line that tells a failure (absent in the state of older versions). */
    name?: string;
    node: string;
    host: string;
    port: number;
    user: string;
    privateKey: string;
    hostKey?: string;
    connectTimeoutSeconds: number;
    create: string;
    update?: string;
    delete?: string;
    triggers?: unknown[];
    createBeforeReplace?: boolean;
    peer?: { node: string; host: string; port: number; user: string; hostKey?: string; program: string };
    stdout?: string;
    stderr?: string;
}

/**
 * Runs one operation's program on the node with the system ssh client, the programs on standard
 * input, over the node's shared connection (ssh.ts, overSharedConnection). With `props.peer` (on
 * create and update), scripts/peer-run.sh runs here, as the pulumi-command runner's local.Command
 * runs it, and starts the two sessions (see HostCommandArgs.peer). A failure is told in one line per
 * failed side (with a peer, as peer-run.sh words them, the peer's first), naming the step, the
 * operation, the node and the reason (stepFailure.ts), with what preceded the reason under it.
 * The progress lines of the step's standard error are printed here as they come (stepProgress.ts).
 * Self-contained (it `require`s what it uses, and peer-run.sh travels as text) because Pulumi
 * serializes it into the dynamic provider.
 */
export async function runOverSsh(props: SshCommandProps, operation: StepOperation): Promise<{ stdout: string; stderr: string }> {
    const childProcess = require("child_process") as typeof import("child_process");
    const fs = require("fs") as typeof import("fs");
    const os = require("os") as typeof import("os");
    const path = require("path") as typeof import("path");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-ssh-"));
    try {
        const keyFile = path.join(dir, "key");
        fs.writeFileSync(keyFile, props.privateKey.endsWith("\n") ? props.privateKey : `${props.privateKey}\n`, { mode: 0o600 });
        type Target = { node: string; host: string; port: number; user: string; hostKey?: string };
        const sshTarget = (target: Target) => ({ ...target, connectTimeoutSeconds: props.connectTimeoutSeconds });
        const knownHostsFile = (target: Target) => {
            const file = path.join(dir, `known_hosts-${target.node}`);
            if (target.hostKey) {
                fs.writeFileSync(file, knownHostsLine(target));
            }
            return file;
        };
        // A state written before the name was an input has none.
        const resource = props.name ?? "a host command";
        const where = (target: Target): StepWhere => ({
            resource,
            operation,
            node: target.node,
            user: target.user,
            host: target.host,
            port: target.port,
            connectTimeoutSeconds: props.connectTimeoutSeconds,
        });
        const run = (file: string, args: readonly string[], input: string, cannotRun: string) =>
            new Promise<StepOutcome>((resolve, reject) => {
                const child = childProcess.spawn(file, args, { stdio: ["pipe", "pipe", "pipe"] });
                const out: Buffer[] = [];
                const err: Buffer[] = [];
                const relay = progressRelay(resource, (line) => console.log(line));
                child.stdin!.on("error", () => undefined);
                child.stdin!.end(input);
                child.stdout!.on("data", (chunk: Buffer) => out.push(chunk));
                child.stderr!.on("data", (chunk: Buffer) => {
                    err.push(chunk);
                    relay(chunk.toString("utf8"));
                });
                child.on("error", (error: Error) => reject(new Error(`${cannotRun}: ${error.message}`)));
                child.on("close", (code: number | null, signal: string | null) =>
                    resolve({ code, signal, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") }),
                );
            });
        if (props.peer && operation !== "delete") {
            // The two sessions do not share connections (each makes its own, as with the
            // pulumi-command runner): peer-run.sh has no second try for a shared connection that
            // ended, and one key exchange per side is nothing beside an image copy.
            const peer = props.peer;
            const outcome = await run(
                PEER_RUN_INTERPRETER[0],
                [...PEER_RUN_INTERPRETER.slice(1), peerRunScript(resource, operation, props.connectTimeoutSeconds)],
                peerRunInput(
                    resource,
                    { target: props, ssh: peerRunSsh(sshTarget(props), keyFile, knownHostsFile(props)), programs: props },
                    { target: peer, ssh: peerRunSsh(sshTarget(peer), keyFile, knownHostsFile(peer)), program: peer.program },
                ),
                `${resource} (${operation}) on node ${nodeAddress(props)}: cannot run ${PEER_RUN_INTERPRETER[0]}`,
            );
            const result = peerRunResult(outcome, where(props), where(peer));
            if (result.failure !== undefined) {
                throw new Error(result.failure);
            }
            return { stdout: result.stdout, stderr: result.stderr };
        }
        const outcome = await overSharedConnection(sshTarget(props), props.privateKey, (extra) =>
            run(
                "ssh",
                sshArgs(sshTarget(props), keyFile, knownHostsFile(props), runFromStdin(operation), extra),
                programsOnStdin(props, { resource, node: nodeAddress(props) }),
                `${resource} (${operation}) on node ${nodeAddress(props)}: cannot run ssh`,
            ),
        );
        if (outcome.code !== 0) {
            throw new Error(stepFailureMessage(where(props), outcome));
        }
        return { stdout: outcome.stdout, stderr: outcome.stderr };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/**
 * `error`, with the next print of it by the dynamic-provider host dropped. On a failed delete (and
 * only there), @pulumi/pulumi's host (cmd/dynamic-provider) prints `${error}: ${error.stack}` on its
 * standard error before it hands the error to the engine; the engine shows every line of that under
 * the stack, and then the error itself under the resource, so `pulumi up` showed the message three
 * times, two of them with the host's stack frames. The next `console.error` that is exactly that
 * print is dropped, once; any other passes (and puts console.error back), so a host that prints
 * otherwise is left as it is. Self-contained: it is serialized into the dynamic provider.
 */
export function withoutHostEcho(error: Error): Error {
    const echo = `${error}: ${error.stack}`;
    const print = console.error;
    console.error = (...args: unknown[]) => {
        console.error = print;
        if (!(args.length === 1 && args[0] === echo)) {
            print(...args);
        }
    };
    return error;
}

const sshCommandProvider: pulumi.dynamic.ResourceProvider = {
    async create(inputs: SshCommandProps) {
        const { stdout, stderr } = await runOverSsh(inputs, "create");
        const crypto = require("crypto") as typeof import("crypto");
        return { id: `${inputs.node}-${crypto.randomBytes(6).toString("hex")}`, outs: { ...inputs, stdout, stderr } };
    },
    async diff(_id: string, olds: SshCommandProps, news: SshCommandProps) {
        const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
        const replaces = (["triggers", "host", "port", "node"] as const).filter((key) => !same(olds[key], news[key]));
        const changed = (["create", "update", "delete", "user", "hostKey", "connectTimeoutSeconds", "peer"] as const).filter(
            (key) => !same(olds[key], news[key]),
        );
        return {
            changes: replaces.length + changed.length > 0,
            replaces: [...replaces],
            deleteBeforeReplace: !news.createBeforeReplace,
        };
    },
    async update(_id: string, _olds: SshCommandProps, news: SshCommandProps) {
        const { stdout, stderr } = await runOverSsh(news, "update");
        return { outs: { ...news, stdout, stderr } };
    },
    async delete(_id: string, props: SshCommandProps) {
        if (props.delete) {
            await runOverSsh(props, "delete").catch((error: Error) => {
                throw withoutHostEcho(error);
            });
        }
    },
};

/** The builtin realization: vllm-fleet's own SSH command resource. */
export class SshCommand extends pulumi.dynamic.Resource {
    /** Standard output of the last create/update run. */
    public readonly stdout!: pulumi.Output<string>;
    public readonly stderr!: pulumi.Output<string>;

    constructor(name: string, args: HostCommandArgs, opts?: pulumi.CustomResourceOptions) {
        super(
            sshCommandProvider,
            name,
            {
                name,
                node: args.connection.node,
                host: args.connection.host,
                port: args.connection.port,
                user: args.connection.user,
                privateKey: pulumi.secret(args.connection.privateKey),
                hostKey: args.connection.hostKey,
                connectTimeoutSeconds: args.connection.connectTimeoutSeconds,
                create: args.create,
                update: args.update,
                delete: args.delete,
                triggers: args.triggers,
                ...(args.createBeforeReplace ? { createBeforeReplace: true } : {}),
                peer: args.peer
                    ? {
                          node: args.peer.connection.node,
                          host: args.peer.connection.host,
                          port: args.peer.connection.port,
                          user: args.peer.connection.user,
                          hostKey: args.peer.connection.hostKey,
                          program: args.peer.program,
                      }
                    : undefined,
                stdout: undefined,
                stderr: undefined,
            },
            { ...opts, additionalSecretOutputs: ["privateKey"] },
            "remote",
            "SshCommand",
        );
    }
}
