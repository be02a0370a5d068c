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
 * create). Both reach the node with the same key and host-key rules (ssh.ts).
 */
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import { SshConnection, SshFiles, knownHostsLine, sshArgs } from "./ssh";
import { bashCommand, programsOnStdin, runFromStdin } from "./shell";

export { SshConnection } from "./ssh";

/** How commands reach the hosts. */
export type CommandRunner = "pulumi-command" | "builtin";

/** Another node whose program's standard output becomes the standard input of this one. */
export interface PipeSource {
    readonly connection: SshConnection;
    /** A bash program run on the source node. */
    readonly program: pulumi.Input<string>;
}

export interface HostCommandArgs {
    readonly connection: SshConnection;
    /**
     * Streams `source.program`'s output (run on another node) into this command's standard input,
     * through the machine running Pulumi: nodes need no keys for each other. The command may exit
     * early without reading (e.g. "already there"); the source is then stopped.
     */
    readonly source?: PipeSource;
    /** The ssh files of both ends of a pipe on this machine (see ssh.ts), for the pulumi-command runner. */
    readonly pipeFiles?: { readonly source: pulumi.Output<SshFiles>; readonly target: pulumi.Output<SshFiles> };
    /** Bash programs (not command lines): run on create, on update (default: create) and on delete. */
    readonly create: pulumi.Input<string>;
    readonly update?: pulumi.Input<string>;
    readonly delete?: pulumi.Input<string>;
    /** Any change here replaces the command (delete, then create). */
    readonly triggers?: pulumi.Input<unknown[]>;
}

/** What the components read from a command. */
export interface HostCommand {
    readonly resource: pulumi.CustomResource;
    readonly stdout: pulumi.Output<string>;
}

/** Registers a command with the chosen runner. */
export function hostCommand(
    runner: CommandRunner,
    name: string,
    args: HostCommandArgs,
    opts: pulumi.CustomResourceOptions = {},
): HostCommand {
    const options: pulumi.CustomResourceOptions = { ...opts, deleteBeforeReplace: true };
    if (runner === "pulumi-command" && args.source) {
        // remote.Command cannot read from another host: run the two ssh clients here, with the
        // same key and host-key files as every other path (ssh.ts).
        const files = args.pipeFiles;
        if (!files) {
            throw new Error(`${name}: a pipe between nodes with the pulumi-command runner needs the ssh files of both nodes`);
        }
        const quote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;
        const line = (connection: SshConnection, own: SshFiles, program: string) =>
            ["ssh", ...sshArgs(connection, own.keyFile, own.knownHostsFile, bashCommand(program))].map(quote).join(" ");
        const pipe = (to: pulumi.Input<string>) =>
            pulumi
                .all([args.source!.program, to, files.source, files.target])
                .apply(([from, into, sourceFiles, targetFiles]) => `${line(args.source!.connection, sourceFiles, from)} | ${line(args.connection, targetFiles, into)}`);
        const resource = new command.local.Command(
            name,
            {
                create: pipe(args.create),
                update: args.update === undefined ? undefined : pipe(args.update),
                triggers: args.triggers,
                addPreviousOutputInEnv: false,
                interpreter: ["/bin/bash", "-c"],
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
                    .apply(([create, update, del]) => programsOnStdin({ create, update, delete: del })),
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
interface SshCommandProps {
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
    source?: { node: string; host: string; port: number; user: string; hostKey?: string; program: string };
    stdout?: string;
    stderr?: string;
}

/**
 * Runs one operation's program on the node with the system ssh client, the programs on standard
 * input; with `props.source`, the source node's program is piped into it instead (the program then
 * travels as the command line). Self-contained (it `require`s what it uses) because Pulumi
 * serializes it into the dynamic provider.
 */
async function runOverSsh(props: SshCommandProps, operation: "create" | "update" | "delete"): Promise<{ stdout: string; stderr: string }> {
    const childProcess = require("child_process") as typeof import("child_process");
    const fs = require("fs") as typeof import("fs");
    const os = require("os") as typeof import("os");
    const path = require("path") as typeof import("path");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-ssh-"));
    try {
        const keyFile = path.join(dir, "key");
        fs.writeFileSync(keyFile, props.privateKey.endsWith("\n") ? props.privateKey : `${props.privateKey}\n`, { mode: 0o600 });
        const argsFor = (target: { node: string; host: string; port: number; user: string; hostKey?: string }, remote: string) => {
            const knownHosts = path.join(dir, `known_hosts-${target.node}`);
            if (target.hostKey) {
                fs.writeFileSync(knownHosts, knownHostsLine(target));
            }
            return sshArgs({ ...target, connectTimeoutSeconds: props.connectTimeoutSeconds }, keyFile, knownHosts, remote);
        };
        const tail = (text: string) => text.trimEnd().split("\n").slice(-40).join("\n");
        const failure = (target: { node: string; host: string; port: number; user: string }, code: number | null, signal: string | null, stdout: string, stderr: string) => {
            const what = code === 255 ? "ssh failed (connection or authentication)" : `the command exited ${code ?? signal}`;
            return new Error(
                `node ${target.node} (${target.user}@${target.host}:${target.port}): ${what}\n` +
                    (stderr.trim() ? `--- stderr (tail) ---\n${tail(stderr)}\n` : "") +
                    (stdout.trim() ? `--- stdout (tail) ---\n${tail(stdout)}\n` : ""),
            );
        };
        const program = operation === "create" ? props.create : operation === "update" ? (props.update ?? props.create) : (props.delete ?? "");
        return await new Promise((resolve, reject) => {
            const source = props.source;
            const sourceChild = source ? childProcess.spawn("ssh", argsFor(source, bashCommand(source.program)), { stdio: ["ignore", "pipe", "pipe"] }) : undefined;
            const child = childProcess.spawn("ssh", argsFor(props, source ? bashCommand(program) : runFromStdin(operation)), { stdio: ["pipe", "pipe", "pipe"] });
            const sourceErr: Buffer[] = [];
            let sourceExit: { code: number | null; signal: string | null } | undefined;
            // The target may stop reading early (nothing to copy): that is not an error.
            child.stdin!.on("error", () => undefined);
            if (sourceChild) {
                sourceChild.stdout.pipe(child.stdin!);
                sourceChild.stderr.on("data", (chunk: Buffer) => sourceErr.push(chunk));
                sourceChild.on("close", (code: number | null, signal: string | null) => {
                    sourceExit = { code, signal };
                });
            } else {
                child.stdin!.end(programsOnStdin(props));
            }
            const out: Buffer[] = [];
            const err: Buffer[] = [];
            child.stdout!.on("data", (chunk: Buffer) => out.push(chunk));
            child.stderr!.on("data", (chunk: Buffer) => err.push(chunk));
            child.on("error", (error: Error) => reject(new Error(`node ${props.node} (${props.host}:${props.port}): cannot run ssh: ${error.message}`)));
            child.on("close", (code: number | null, signal: string | null) => {
                if (sourceChild && sourceExit === undefined) {
                    sourceChild.kill();
                }
                const stdout = Buffer.concat(out).toString("utf8");
                const stderr = Buffer.concat(err).toString("utf8");
                if (code === 0) {
                    resolve({ stdout, stderr });
                    return;
                }
                const error = failure(props, code, signal, stdout, stderr);
                if (source && sourceExit && sourceExit.code !== 0 && sourceExit.code !== null) {
                    // The target failed because its source did: say so first.
                    reject(new Error(`${failure(source, sourceExit.code, sourceExit.signal, "", Buffer.concat(sourceErr).toString("utf8")).message}${error.message}`));
                    return;
                }
                reject(error);
            });
        });
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
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
        const changed = (["create", "update", "delete", "user", "hostKey", "connectTimeoutSeconds", "source"] as const).filter(
            (key) => !same(olds[key], news[key]),
        );
        return {
            changes: replaces.length + changed.length > 0,
            replaces: [...replaces],
            deleteBeforeReplace: true,
        };
    },
    async update(_id: string, _olds: SshCommandProps, news: SshCommandProps) {
        const { stdout, stderr } = await runOverSsh(news, "update");
        return { outs: { ...news, stdout, stderr } };
    },
    async delete(_id: string, props: SshCommandProps) {
        if (props.delete) {
            await runOverSsh(props, "delete");
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
                source: args.source
                    ? {
                          node: args.source.connection.node,
                          host: args.source.connection.host,
                          port: args.source.connection.port,
                          user: args.source.connection.user,
                          hostKey: args.source.connection.hostKey,
                          program: args.source.program,
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
