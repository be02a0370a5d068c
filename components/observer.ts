/**
 * The program-time read of every node (like a Terraform data source): at the start of each
 * `pulumi preview` and `up`, in parallel over the nodes, one SSH session per node runs probe.sh and
 * live.sh, which only read, once for each view of the node (a service placed on it) in that session. Facts are therefore never stale (a host fixed since the last run is seen
 * fixed) and the live state of the fleet's containers and endpoint reaches reconciliation
 * (infra/core/observe.ts). Reached like every other path to a node (ssh.ts).
 */
import { spawn } from "child_process";
import { FleetConfig, FleetNode } from "../infra/core/config";
import { FleetError } from "../infra/core/errors";
import { ServiceContainers, deliveryMarkDir, servingContainer } from "../infra/core/names";
import { NodeObservation, parseObservation } from "../infra/core/observe";
import { firewallMarker } from "../infra/core/plan";
import { programsOnStdin, runFromStdin, scriptProgram } from "./shell";
import { noAnswerMessage, overSharedConnection, sshArgs, writeSshFiles } from "./ssh";

/**
 * Reads the nodes of every view, each node in one SSH session however many views have it; answers
 * each view's observations in the order of its nodes. Fails naming the node when one cannot be read.
 */
export type Observer = (views: readonly ObserveView[], secrets: ObserverSecrets, options?: { rayNodes?: boolean }) => Promise<NodeObservation[][]>;

/** One service's view of its nodes: its config (its nodes, image, model, port) and container names. */
export interface ObserveView {
    readonly config: FleetConfig;
    /** The names of the service's containers (infra/core/names.ts). */
    readonly containers: ServiceContainers;
}

/** What the read needs besides the views. */
export interface ObserverSecrets {
    readonly privateKey: string;
    readonly privateKeyPath?: string;
    readonly stack: string;
}

/** The read-only program run on node `index` (with `rayNodes`, the head also lists Ray's nodes). */
export function observeProgram(config: FleetConfig, stack: string, containers: ServiceContainers, index: number, rayNodes = false): string {
    const serving = servingContainer(containers, config.executor);
    return scriptProgram(["model-list", "image-identity", "image-mark", "probe", "live"], {
        IMAGE: config.image.name,
        MODEL_PATH: config.model.path,
        STACK: stack,
        OWN_NAMES: [containers.ray, containers.vllm, containers.watchdog],
        SERVING_CONTAINER: serving,
        SERVE_IN_CONTAINER: config.executor === "ray" && index === 0 ? "yes" : "no",
        ENDPOINT: index === 0 ? "yes" : "no",
        PORT: config.vllm.port,
        SERVED_NAME: config.model.servedName,
        WATCHDOG_CONTAINER: index === 0 ? containers.watchdog : "",
        RAY_NODES: rayNodes && config.executor === "ray" && index === 0 ? "yes" : "no",
        FIREWALL_MARKER: config.security.firewall ? firewallMarker(stack) : "",
        DELIVERY_MARKS: deliveryMarkDir(stack),
    });
}

/** What one ssh session ended with. */
interface SessionOutcome {
    readonly code: number | null;
    readonly signal: NodeJS.Signals | null;
    readonly stdout: string;
    readonly stderr: string;
}

/** Runs ssh with `args`, `input` on its standard input, killed after `timeoutSeconds`. */
function runSsh(node: FleetNode, timeoutSeconds: number, args: string[], input: string): Promise<SessionOutcome> {
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
            reject(new FleetError(`${nodeWhere(node)}: cannot run ssh: ${error.message}`));
        });
        child.on("close", (code, signal) => {
            clearTimeout(timer);
            resolve({ code, signal, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") });
        });
    });
}

function nodeWhere(node: FleetNode): string {
    return `node ${node.name} (${node.user}@${node.host}:${node.port})`;
}

/** The read's output, or the error that names the node and why. */
function readOutput(node: FleetNode, connectTimeoutSeconds: number, timeoutSeconds: number, outcome: SessionOutcome): string {
    const where = nodeWhere(node);
    const last = outcome.stderr.trim().split("\n").slice(-3).join(" / ");
    if (outcome.code === 0) {
        return outcome.stdout;
    } else if (outcome.code === 255) {
        throw new FleetError(
            noAnswerMessage(where, outcome.stderr, connectTimeoutSeconds) ?? `${where}: ssh failed (connection or authentication): ${last || "no answer"}`,
        );
    } else if (outcome.signal) {
        throw new FleetError(`${where}: reading the node took longer than ${timeoutSeconds}s`);
    }
    throw new FleetError(`${where}: reading the node failed (exit ${outcome.code}): ${last}`);
}

/** The line read-views.sh prints before view `index`'s output. */
const VIEW_LINE = /^@@ vllm-fleet view (\d+)$/;

/** Splits what read-views.sh printed into each view's output, by the view's number. */
export function splitViews(output: string): Map<number, string> {
    const views = new Map<number, string>();
    let current: number | undefined;
    let lines: string[] = [];
    const flush = () => current !== undefined && views.set(current, lines.join("\n"));
    for (const line of output.split("\n")) {
        const header = VIEW_LINE.exec(line.trimEnd());
        if (header) {
            flush();
            current = Number(header[1]);
            lines = [];
        } else {
            lines.push(line);
        }
    }
    flush();
    return views;
}

/**
 * Runs a read-only `program` on `node` over SSH (the node's shared connection, as every path to a
 * node goes) and answers what it printed; fails naming the node when it cannot.
 */
export async function readOverSsh(node: FleetNode, sshConnectSeconds: number, secrets: ObserverSecrets, program: string, timeoutSeconds: number): Promise<string> {
    const target = { ...node, connectTimeoutSeconds: sshConnectSeconds };
    const files = writeSshFiles(secrets.stack, { ...target, node: node.name }, secrets.privateKey, secrets.privateKeyPath);
    const input = programsOnStdin({ create: program });
    const outcome = await overSharedConnection(target, secrets.privateKey, (extra) =>
        runSsh(node, timeoutSeconds, sshArgs(target, files.keyFile, files.knownHostsFile, runFromStdin("create"), extra), input),
    );
    return readOutput(node, sshConnectSeconds, timeoutSeconds, outcome);
}

/**
 * The observer of real hosts: the system ssh client, one session per node (every view of the node
 * read in it, read-views.sh), all nodes at once.
 */
export const observeOverSsh: Observer = async (views, secrets, options = {}) => {
    const nodes = [...new Map(views.flatMap((view) => view.config.nodes.map((node) => [node.name, { node, view }] as const))).values()];
    const reads = await Promise.all(
        nodes.map(async ({ node, view: first }) => {
            const timeouts = first.config.timeouts;
            const programs = views.map((view) => {
                const index = view.config.nodes.findIndex((candidate) => candidate.name === node.name);
                return index < 0 ? "" : observeProgram(view.config, secrets.stack, view.containers, index, options.rayNodes);
            });
            const timeout = timeouts.sshConnectSeconds * 2 + 90 * programs.filter((program) => program !== "").length;
            // Over the node's shared connection, which the steps of this run use next.
            const output = await readOverSsh(node, timeouts.sshConnectSeconds, secrets, scriptProgram("read-views", { VIEWS: programs }), timeout);
            return [node.name, splitViews(output)] as const;
        }),
    );
    const byNode = new Map(reads);
    return views.map((view, index) =>
        view.config.nodes.map((node) => {
            const output = byNode.get(node.name)?.get(index);
            if (output === undefined) {
                throw new FleetError(`${nodeWhere(node)}: reading the node printed nothing for service view ${index}`);
            }
            return parseObservation(node.name, output);
        }),
    );
};
