/**
 * How every path reaches a node over SSH, from one place: remote.Command (its own Go client), the
 * builtin runner and the image pipe (the system `ssh`), and the Docker provider (`ssh://`, which runs
 * the system `ssh` too). They all use the same key and treat host keys alike: a node's pinned
 * `hostKey` is checked, strictly, by every one of them; without a pinned key none checks, which is
 * what remote.Command does (a `pulumi preview` warns about it).
 */
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { sshConnectTimedOut } from "./stepFailure";

/** An SSH endpoint of one node. */
export interface SshConnection {
    /** The node's name in the stack, used in error messages. */
    readonly node: string;
    readonly host: string;
    readonly port: number;
    readonly user: string;
    readonly privateKey: pulumi.Input<string>;
    /** A public key line (`ssh-ed25519 AAAA...`); when given the host key is checked against it. */
    readonly hostKey?: string;
    /** Seconds to wait for the TCP connection before failing. */
    readonly connectTimeoutSeconds: number;
}

/** The parts of a connection the system ssh client's options depend on. */
export interface SshTarget {
    readonly host: string;
    readonly port: number;
    readonly hostKey?: string;
    readonly connectTimeoutSeconds: number;
}

/** The line of a known_hosts file that pins `target`'s host key. */
export function knownHostsLine(target: Pick<SshTarget, "host" | "port" | "hostKey">): string {
    const hostField = target.port === 22 ? target.host : `[${target.host}]:${target.port}`;
    return `${hostField} ${target.hostKey}\n`;
}

/**
 * How the system ssh client notices that a node it is connected to stopped answering (OpenSSH's
 * ServerAliveInterval and ServerAliveCountMax): after `intervalSeconds` without a packet from the
 * node it sends a keepalive, which the node's sshd answers itself, not the session's program (a
 * session whose program says nothing for an hour, as a model load may, is kept); when `countMax`
 * in a row go unanswered it closes the connection and the sessions on it, 12 s after the node's
 * last packet (while logging in, after 9 s without one). Short because a session that was waiting
 * on a shared connection whose node went silent then tries a fresh connection (ssh does that
 * itself), which waits ConnectTimeout: the node is named within ConnectTimeout + 12 s.
 */
export const SSH_KEEPALIVE = { intervalSeconds: 3, countMax: 3 } as const;

/**
 * Options of the system ssh client for `target` (all but the port, which the Docker provider takes in
 * its `ssh://` URL): the key file, no prompts, bounded connect time, a connection closed when its
 * node stops answering ({@link SSH_KEEPALIVE}), and the host key checked against `knownHostsFile`
 * when the node pins one. One connection attempt: a second one waits ConnectTimeout again for a
 * node that does not answer, while within one attempt the kernel already sends the SYN again.
 */
export function sshClientOptions(target: SshTarget, keyFile: string, knownHostsFile: string): string[] {
    return [
        "-i", keyFile,
        "-o", "IdentitiesOnly=yes",
        "-o", "BatchMode=yes",
        "-o", `ConnectTimeout=${target.connectTimeoutSeconds}`,
        "-o", "ConnectionAttempts=1",
        "-o", `ServerAliveInterval=${SSH_KEEPALIVE.intervalSeconds}`,
        "-o", `ServerAliveCountMax=${SSH_KEEPALIVE.countMax}`,
        "-o", `StrictHostKeyChecking=${target.hostKey ? "yes" : "no"}`,
        "-o", `UserKnownHostsFile=${target.hostKey ? knownHostsFile : "/dev/null"}`,
        "-o", "LogLevel=ERROR",
    ];
}

/** The full argument list of `ssh` running `remote` on `target`; `extra`: more options (e.g. {@link sshShareOptions}). */
export function sshArgs(target: SshTarget & { readonly user: string }, keyFile: string, knownHostsFile: string, remote: string, extra: readonly string[] = []): string[] {
    return [...sshClientOptions(target, keyFile, knownHostsFile), ...extra, "-p", String(target.port), `${target.user}@${target.host}`, "--", remote];
}

/**
 * Options that let the sessions to one node share one connection (OpenSSH's ControlMaster, as
 * Ansible does by default): the first session makes it, later ones, of this run and of runs within
 * 30 s, open a channel on it instead of paying a key exchange and a new sshd. The socket is named by
 * everything the connection was made with (user, host, port, the key, the pinned host key) and lives
 * in a directory only this user can enter, under $TMPDIR (or /tmp when that path would be too long
 * for a socket); where there is no such directory, nothing is shared.
 * `existing`: whether a shared connection was there to be used (see {@link sharedConnectionFailed}).
 * Self-contained: it is serialized into the builtin runner's dynamic provider.
 */
export function sshShareOptions(target: SshTarget & { readonly user: string }, privateKey: string): { options: string[]; existing: boolean } {
    const fsModule = require("fs") as typeof import("fs");
    const osModule = require("os") as typeof import("os");
    const pathModule = require("path") as typeof import("path");
    const cryptoModule = require("crypto") as typeof import("crypto");
    const uid = typeof process.getuid === "function" ? process.getuid() : -1;
    // A socket's path has room for 104 bytes on macOS (whose $TMPDIR is long), 108 on Linux, and
    // ssh adds 17 while it makes one; 100 leaves a margin. Else /tmp.
    const fits = (base: string) => pathModule.join(base, `vllm-fleet-ssh-${uid}`, "x".repeat(24)).length + 17 <= 100;
    const base = [osModule.tmpdir(), "/tmp"].find(fits);
    if (base === undefined) {
        return { options: [], existing: false };
    }
    const dir = pathModule.join(base, `vllm-fleet-ssh-${uid}`);
    try {
        fsModule.mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
            return { options: [], existing: false };
        }
    }
    const stat = fsModule.lstatSync(dir);
    if (!stat.isDirectory() || stat.uid !== uid || (stat.mode & 0o077) !== 0) {
        return { options: [], existing: false };
    }
    const id = cryptoModule
        .createHash("sha256")
        .update(JSON.stringify([target.user, target.host, target.port, target.hostKey ?? "", privateKey]))
        .digest("hex")
        .slice(0, 24);
    const socket = pathModule.join(dir, id);
    return { options: ["-o", "ControlMaster=auto", "-o", `ControlPath=${socket}`, "-o", "ControlPersist=30"], existing: fsModule.existsSync(socket) };
}

/**
 * The error of a session whose ssh gave up waiting for the node (stepFailure.ts, sshConnectTimedOut),
 * naming it as `where`; else undefined. A connection that went silent later, which the keepalives
 * close ({@link SSH_KEEPALIVE}), ends with 255 and no word: the run tries it once more on a
 * connection of its own ({@link sharedConnectionFailed}), whose connect timeout then speaks.
 */
export function noAnswerMessage(where: string, stderr: string, connectTimeoutSeconds: number): string | undefined {
    return sshConnectTimedOut(stderr) ? `${where} does not answer on SSH (no reply within ${connectTimeoutSeconds} s)` : undefined;
}

/**
 * Whether a session that went through an existing shared connection failed for the connection's
 * sake rather than the program's or the node's: ssh's 255 before any output, and no word that the
 * node did not answer. ssh itself already makes a fresh connection when the shared one fails before
 * the session opens (the node rebooted since, and the connection's end went with it); this is for a
 * shared connection that ended after it opened. Such a session is run once more on a connection of
 * its own. Not when ssh says the node did not answer: its fresh connection waited ConnectTimeout
 * already, and another would wait as long again (the node is named within ConnectTimeout + 12 s).
 */
export function sharedConnectionFailed(shared: { existing: boolean }, outcome: { readonly code: number | null; readonly stdout: string; readonly stderr: string }): boolean {
    return shared.existing && outcome.code === 255 && outcome.stdout === "" && !sshConnectTimedOut(outcome.stderr);
}

/**
 * Runs one ssh session, `attempt` with the options it is given, over the node's shared connection
 * ({@link sshShareOptions}); once more on a connection of its own when the shared one failed
 * ({@link sharedConnectionFailed}). Self-contained: it is serialized into the builtin runner's
 * dynamic provider.
 */
export async function overSharedConnection<T extends { readonly code: number | null; readonly stdout: string; readonly stderr: string }>(
    target: SshTarget & { readonly user: string },
    privateKey: string,
    attempt: (options: readonly string[]) => Promise<T>,
): Promise<T> {
    const shared = sshShareOptions(target, privateKey);
    const outcome = await attempt(shared.options);
    return sharedConnectionFailed(shared, outcome) ? attempt(["-o", "ControlPath=none"]) : outcome;
}

/** Files the system ssh client of the operator's machine reads for one node. */
export interface SshFiles {
    readonly keyFile: string;
    readonly knownHostsFile: string;
}

/**
 * Where the key and the pinned host key of a node live on the operator's machine for the clients
 * that need files (the Docker provider, the image pipe): `~/.cache/vllm-fleet/ssh/<stack>/`, mode
 * 0700, one pair per node. The paths are the same on every run (the Docker provider keeps them in
 * its state and `pulumi destroy`, which does not run the program, uses them); the files are written
 * anew by every run of the program. A key given as a file (`ssh.privateKeyPath`) is used where it is.
 */
export function sshFilesDir(stack: string): string {
    const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    return path.join(base, "vllm-fleet", "ssh", stack);
}

/** Writes `text` to `file` with mode 0600, unless it already holds exactly that. */
function writePrivate(file: string, text: string): void {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    if (fs.existsSync(file) && fs.readFileSync(file, "utf8") === text) {
        return;
    }
    const temporary = `${file}.${crypto.randomBytes(4).toString("hex")}`;
    fs.writeFileSync(temporary, text, { mode: 0o600 });
    fs.renameSync(temporary, file);
}

/** Writes the ssh files of `connection` (with its key in plain text) and returns their paths. */
export function writeSshFiles(stack: string, connection: Omit<SshConnection, "privateKey">, privateKey: string, privateKeyPath?: string): SshFiles {
    const dir = sshFilesDir(stack);
    const knownHostsFile = path.join(dir, `${connection.node}.known_hosts`);
    writePrivate(knownHostsFile, connection.hostKey ? knownHostsLine(connection) : "");
    if (privateKeyPath) {
        return { keyFile: privateKeyPath, knownHostsFile };
    }
    const keyFile = path.join(dir, `${connection.node}.key`);
    writePrivate(keyFile, privateKey.endsWith("\n") ? privateKey : `${privateKey}\n`);
    return { keyFile, knownHostsFile };
}

/**
 * The ssh files of `connection` on the operator's machine, written when the returned Output
 * resolves (so a resource that takes it waits for them). Not secret: it holds paths only.
 */
export function materializeSshFiles(stack: string, connection: SshConnection, privateKeyPath?: string): pulumi.Output<SshFiles> {
    return pulumi.unsecret(pulumi.output(connection.privateKey).apply((key) => writeSshFiles(stack, connection, key, privateKeyPath)));
}
