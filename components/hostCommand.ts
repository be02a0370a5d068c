/**
 * A command run on a node over SSH when a resource is created, updated or deleted: the one way the
 * components act on hosts. Two realizations of the same arguments:
 *
 * - `pulumi-command` (default): `remote.Command` of @pulumi/command, Pulumi's standard provider.
 * - `builtin`: vllm-fleet's own resource (a Pulumi dynamic resource running the system `ssh`
 *   client), for machines where the command provider plugin cannot be installed. This workplace's
 *   Go module proxy does not serve the provider's source, so the proving ground uses it.
 *
 * Both take the command as one string (`bash -c '<program>'`, see shell.ts): values reach the remote
 * shell quoted, never spliced. Changing `create`/`update` updates in place (runs `update`, else
 * `create`); changing `triggers` replaces (delete first, then create).
 */
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";

/** How commands reach the hosts. */
export type CommandRunner = "pulumi-command" | "builtin";

/** An SSH endpoint of one node. */
export interface SshConnection {
    /** The node's name in the stack, used in error messages. */
    readonly node: string;
    readonly host: string;
    readonly port: number;
    readonly user: string;
    readonly privateKey: pulumi.Input<string>;
    /** A public key line; when given the host key is checked against it. */
    readonly hostKey?: string;
    /** Seconds to wait for the TCP connection before failing. */
    readonly connectTimeoutSeconds: number;
}

/** Another node whose command's standard output becomes the standard input of this one. */
export interface PipeSource {
    readonly connection: SshConnection;
    readonly command: pulumi.Input<string>;
}

export interface HostCommandArgs {
    /** A private key file, for the local ssh clients of a pipe with the pulumi-command runner. */
    readonly keyPath?: string;
    readonly connection: SshConnection;
    /**
     * Streams `source.command`'s output (run on another node) into this command's standard input,
     * through the machine running Pulumi: nodes need no keys for each other. The command may exit
     * early without reading (e.g. "already there"); the source is then stopped.
     */
    readonly source?: PipeSource;
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
        // remote.Command cannot read from another host: run the two ssh clients here. They need
        // the key as a file (ssh.privateKeyPath).
        const keyPath = args.keyPath;
        if (!keyPath) {
            throw new Error(`${name}: piping between nodes with the pulumi-command runner needs vllm-fleet:ssh.privateKeyPath`);
        }
        const pipe = (to: pulumi.Input<string>) =>
            pulumi
                .all([args.source!.command, to])
                .apply(([from, into]) => `${sshCommandLine(args.source!.connection, keyPath, from)} | ${sshCommandLine(args.connection, keyPath, into)}`);
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
                create: args.create,
                update: args.update,
                delete: args.delete,
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

/** The ssh client options both runners use (host key checked when known, no prompts). */
function sshOptions(connection: { port: number; connectTimeoutSeconds: number; hostKey?: string }, knownHostsFile: string): string[] {
    return [
        "-p", String(connection.port),
        "-o", "BatchMode=yes",
        "-o", "IdentitiesOnly=yes",
        "-o", `ConnectTimeout=${connection.connectTimeoutSeconds}`,
        "-o", "ConnectionAttempts=2",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=8",
        "-o", `StrictHostKeyChecking=${connection.hostKey ? "yes" : "no"}`,
        "-o", `UserKnownHostsFile=${connection.hostKey ? knownHostsFile : "/dev/null"}`,
        "-o", "LogLevel=ERROR",
    ];
}

/** A local shell line running `remote` on the node with the system ssh client (quoted throughout). */
export function sshCommandLine(connection: SshConnection, keyPath: string, remote: string): string {
    const quote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;
    const options = sshOptions({ ...connection, hostKey: undefined }, "/dev/null");
    return ["ssh", "-i", keyPath, ...options, `${connection.user}@${connection.host}`, "--", remote].map(quote).join(" ");
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
    source?: { node: string; host: string; port: number; user: string; hostKey?: string; command: string };
    stdout?: string;
    stderr?: string;
}

/**
 * Runs `commandLine` on the node with the system ssh client; with `props.source`, the source node's
 * command is piped into it. Self-contained (it `require`s what it uses) because Pulumi serializes it
 * into the dynamic provider.
 */
async function runOverSsh(props: SshCommandProps, commandLine: string): Promise<{ stdout: string; stderr: string }> {
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
                const hostField = target.port === 22 ? target.host : `[${target.host}]:${target.port}`;
                fs.writeFileSync(knownHosts, `${hostField} ${target.hostKey}\n`);
            }
            return ["-i", keyFile, ...sshOptions({ ...target, connectTimeoutSeconds: props.connectTimeoutSeconds }, knownHosts), `${target.user}@${target.host}`, "--", remote];
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
        return await new Promise((resolve, reject) => {
            const source = props.source;
            const sourceChild = source ? childProcess.spawn("ssh", argsFor(source, source.command), { stdio: ["ignore", "pipe", "pipe"] }) : undefined;
            const child = childProcess.spawn("ssh", argsFor(props, commandLine), { stdio: [sourceChild ? "pipe" : "ignore", "pipe", "pipe"] });
            const sourceErr: Buffer[] = [];
            let sourceExit: { code: number | null; signal: string | null } | undefined;
            if (sourceChild && child.stdin) {
                sourceChild.stdout.pipe(child.stdin);
                // The target may stop reading early (nothing to copy): that is not an error.
                child.stdin.on("error", () => undefined);
                sourceChild.stderr.on("data", (chunk: Buffer) => sourceErr.push(chunk));
                sourceChild.on("close", (code: number | null, signal: string | null) => {
                    sourceExit = { code, signal };
                });
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
        const { stdout, stderr } = await runOverSsh(inputs, inputs.create);
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
        const { stdout, stderr } = await runOverSsh(news, news.update ?? news.create);
        return { outs: { ...news, stdout, stderr } };
    },
    async delete(_id: string, props: SshCommandProps) {
        if (props.delete) {
            await runOverSsh(props, props.delete);
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
                          command: args.source.command,
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
