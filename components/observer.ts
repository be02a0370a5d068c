/**
 * The program-time read of every node (like a Terraform data source): at the start of each
 * `pulumi preview` and `up`, in parallel over the nodes, one SSH session per node runs probe.sh and
 * live.sh, which only read. Facts are therefore never stale (a host fixed since the last run is seen
 * fixed) and the live state of the fleet's containers and endpoint reaches reconciliation
 * (infra/observe.ts). Reached like every other path to a node (ssh.ts).
 */
import { spawn } from "child_process";
import { FleetConfig, FleetNode } from "../infra/config";
import { FleetError } from "../infra/errors";
import { NodeObservation, parseObservation, servingContainerOf } from "../infra/observe";
import { WATCHDOG_CONTAINER } from "../infra/plan";
import { firewallMarker } from "./firewall";
import { programsOnStdin, runFromStdin, scriptProgram } from "./shell";
import { sharedConnectionFailed, sshArgs, sshShareOptions, writeSshFiles } from "./ssh";

/** Reads every node; fails naming the node when one cannot be read. */
export type Observer = (config: FleetConfig, secrets: ObserverSecrets, options?: { rayNodes?: boolean }) => Promise<NodeObservation[]>;

/** What the read needs besides the config. */
export interface ObserverSecrets {
    readonly privateKey: string;
    readonly privateKeyPath?: string;
    readonly stack: string;
}

/** The read-only program run on node `index` (with `rayNodes`, the head also lists Ray's nodes). */
export function observeProgram(config: FleetConfig, stack: string, index: number, rayNodes = false): string {
    const serving = servingContainerOf(config);
    return scriptProgram(["model-list", "probe", "live"], {
        IMAGE: config.image.name,
        MODEL_PATH: config.model.path,
        STACK: stack,
        SERVING_CONTAINER: serving,
        SERVE_IN_CONTAINER: config.executor === "ray" && index === 0 ? "yes" : "no",
        ENDPOINT: index === 0 ? "yes" : "no",
        PORT: config.vllm.port,
        SERVED_NAME: config.model.servedName,
        WATCHDOG_CONTAINER: index === 0 ? WATCHDOG_CONTAINER : "",
        RAY_NODES: rayNodes && config.executor === "ray" && index === 0 ? "yes" : "no",
        FIREWALL_MARKER: config.security.firewall ? firewallMarker(stack) : "",
    });
}

/** ssh's own failure (exit 255), with what the session printed before it. */
class SshSessionError extends FleetError {
    constructor(
        message: string,
        readonly stdout: string,
    ) {
        super(message);
    }
}

function readNode(node: FleetNode, timeoutSeconds: number, args: string[], input: string): Promise<string> {
    const where = `node ${node.name} (${node.user}@${node.host}:${node.port})`;
    return new Promise((resolve, reject) => {
        const child = spawn("ssh", args, { stdio: ["pipe", "pipe", "pipe"] });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutSeconds * 1000);
        child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
        child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
        child.stdin.on("error", () => undefined);
        child.stdin.end(input);
        child.on("error", (error) => {
            clearTimeout(timer);
            reject(new FleetError(`${where}: cannot run ssh: ${error.message}`));
        });
        child.on("close", (code, signal) => {
            clearTimeout(timer);
            const stderr = Buffer.concat(err).toString("utf8").trim();
            const last = stderr.split("\n").slice(-3).join(" / ");
            if (code === 0) {
                resolve(Buffer.concat(out).toString("utf8"));
            } else if (code === 255) {
                reject(new SshSessionError(`${where}: ssh failed (connection or authentication): ${last || "no answer"}`, Buffer.concat(out).toString("utf8")));
            } else if (signal) {
                reject(new FleetError(`${where}: reading the node took longer than ${timeoutSeconds}s`));
            } else {
                reject(new FleetError(`${where}: reading the node failed (exit ${code}): ${last}`));
            }
        });
    });
}

/** The observer of real hosts: the system ssh client, one session per node, all at once. */
export const observeOverSsh: Observer = async (config, secrets, options = {}) =>
    Promise.all(
        config.nodes.map(async (node, index) => {
            const target = { ...node, connectTimeoutSeconds: config.timeouts.sshConnectSeconds };
            const files = writeSshFiles(secrets.stack, { ...target, node: node.name }, secrets.privateKey, secrets.privateKeyPath);
            const input = programsOnStdin({ create: observeProgram(config, secrets.stack, index, options.rayNodes) });
            const timeout = config.timeouts.sshConnectSeconds * 2 + 90;
            const read = (extra: readonly string[]) => readNode(node, timeout, sshArgs(target, files.keyFile, files.knownHostsFile, runFromStdin("create"), extra), input);
            // Over the node's shared connection (the steps of this run use it next); once more on a
            // connection of its own when that one failed.
            const shared = sshShareOptions(target, secrets.privateKey);
            const output = await read(shared.options).catch((error: unknown) => {
                if (error instanceof SshSessionError && sharedConnectionFailed(shared, 255, error.stdout)) {
                    return read(["-o", "ControlPath=none"]);
                }
                throw error;
            });
            return parseObservation(node.name, output);
        }),
    );
