/**
 * The fleet as it is on the hosts, read at the start of every `pulumi preview` and `up`
 * (components/observer.ts runs probe.sh and live.sh on every node), and what follows from it.
 * Pure: parsing and the reconciliation decisions are tested without hosts or Pulumi.
 *
 * Reconciliation works through one label, `vllm-fleet.revision`, on each serving container (and a
 * token file beside `vllm serve` in the Ray head). A container found alive keeps the revision it
 * carries, so its inputs do not change and Pulumi leaves it alone; a container found dead, stuck
 * restarting or missing gets a new revision, so its inputs change and Pulumi replaces it, and
 * whatever depends on it follows through its inputs. A first deployment simply gets new revisions.
 */
import { FleetError } from "./errors";
import { NodeFacts, parseProbeOutput, splitSections } from "./facts";
import { FleetConfig } from "./config";
import { RAY_CONTAINER, REVISION_LABEL, VLLM_CONTAINER, WATCHDOG_CONTAINER } from "./plan";

/** One container of the stack on a node, as `docker inspect` shows it. */
export interface LiveContainer {
    readonly name: string;
    readonly id: string;
    readonly status: string;
    readonly running: boolean;
    readonly restarting: boolean;
    readonly exitCode: number;
    readonly restartCount: number;
    readonly startedAt: string;
    readonly labels: Readonly<Record<string, string>>;
}

/**
 * A container on a node that this stack does not own but would touch: another stack's (its label
 * `vllm-fleet.stack`), or one without that label under a name this stack uses.
 */
export interface ForeignContainer {
    readonly name: string;
    /** The stack that owns it ("" when it carries no vllm-fleet label). */
    readonly stack: string;
    /** Docker's words for its state, e.g. `Up 3 hours`, `Exited (137) 2 minutes ago`. */
    readonly status: string;
}

/** What one read of a node found. */
export interface NodeObservation {
    readonly node: string;
    readonly facts: NodeFacts;
    /** This stack's containers (label vllm-fleet.stack = the stack). */
    readonly containers: readonly LiveContainer[];
    /** Containers of others that this stack would touch (none: absent or empty). */
    readonly foreign?: readonly ForeignContainer[];
    /** `vllm serve` inside the Ray head (ray executor, first node only). */
    readonly serve?: { readonly running: boolean; readonly token: string };
    /** The API as the first node answers it: /health's status and one completion. */
    readonly endpoint?: { readonly health: string; readonly completionOk: boolean; readonly detail: string };
    /** The watchdog's recent events (JSON text), when it runs on this node. */
    readonly watchdog?: string;
    /** Ray's live nodes as the head reports them (`npm run status` only): fabric address and GPUs. */
    readonly rayNodes?: readonly { readonly ip: string; readonly gpus: number }[];
    /** The revision security.firewall's rules left on this node ("" when none are there). */
    readonly firewall?: string;
}

/** Parses what probe.sh followed by live.sh printed on `node`. */
export function parseObservation(node: string, output: string): NodeObservation {
    const sections = splitSections(output);
    const containers: LiveContainer[] = [];
    for (const line of (sections.get("containers") ?? "").split("\n")) {
        if (!line.trim().startsWith("{")) {
            continue;
        }
        const raw = JSON.parse(line) as Omit<LiveContainer, "labels"> & { labels: Record<string, string> | null };
        containers.push({ ...raw, name: raw.name.replace(/^\//, ""), labels: raw.labels ?? {} });
    }
    const serveText = sections.get("serve");
    const serve =
        serveText === undefined
            ? undefined
            : { running: /^process yes$/m.test(serveText), token: /^token (\S*)$/m.exec(serveText)?.[1] ?? "" };
    const endpointText = sections.get("endpoint");
    const endpoint =
        endpointText === undefined
            ? undefined
            : {
                  health: /^health (.*)$/m.exec(endpointText)?.[1]?.trim() ?? "none",
                  completionOk: /^completion ok$/m.test(endpointText),
                  detail: /^completion fail (.*)$/m.exec(endpointText)?.[1]?.trim() ?? "",
              };
    const watchdog = sections.get("watchdog")?.trim() || undefined;
    const rayText = sections.get("ray-nodes");
    const rayNodes =
        rayText === undefined
            ? undefined
            : rayText
                  .split("\n")
                  .map((line) => /^(\S+) (\d+)$/.exec(line.trim()))
                  .filter((match): match is RegExpExecArray => match !== null)
                  .map((match) => ({ ip: match[1], gpus: Number(match[2]) }));
    const firewallText = sections.get("firewall");
    const firewall = firewallText === undefined ? undefined : firewallText.trim();
    const foreign = (sections.get("foreign") ?? "")
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map((line) => {
            const [name = "", stack = "", status = ""] = line.split("\t");
            return { name: name.replace(/^\//, ""), stack, status };
        });
    return { node, facts: parseProbeOutput(output), containers, foreign, serve, endpoint, watchdog, rayNodes, firewall };
}

/** Thrown when a node holds containers of another stack that this one would touch. */
export class OwnershipError extends FleetError {}

/**
 * Refuses to go on when a node holds a container this stack does not own but would touch (replace,
 * remove, or take the GPU and ports of): another stack's serving containers, or a container by one
 * of this stack's names without its label. One line per container, naming node, container and
 * owner; nothing has been registered yet, so nothing on any host is touched.
 */
export function checkOwnership(stack: string, observations: readonly NodeObservation[]): void {
    const lines = observations.flatMap((observation) =>
        (observation.foreign ?? []).map((container) =>
            container.stack
                ? `node ${observation.node}: container ${container.name} (${container.status}) belongs to the stack ${container.stack}, not to ${stack}; this stack touches no container of another: destroy that stack first (pulumi destroy --stack ${container.stack}) or give this one other nodes`
                : `node ${observation.node}: container ${container.name} (${container.status}) was not made by a vllm-fleet stack (no vllm-fleet.stack label) but holds a name this stack uses; remove it by hand (docker rm -f ${container.name}) or give this stack other nodes`,
        ),
    );
    if (lines.length > 0) {
        throw new OwnershipError(lines.join("\n"));
    }
}

/**
 * The revision of each node's firewall rules (security.firewall): the one its rules left, so an `up`
 * with nothing to do keeps them, or `fresh()` where none are there (never applied, or gone with a
 * reboot), so that `up` applies them again.
 */
export function firewallRevisions(observations: readonly NodeObservation[], fresh: () => string): Record<string, string> {
    return Object.fromEntries(observations.map((observation) => [observation.node, observation.firewall || fresh()]));
}

/** The serving container of each executor on every node. */
export function servingContainerOf(config: Pick<FleetConfig, "executor">): string {
    return config.executor === "ray" ? RAY_CONTAINER : VLLM_CONTAINER;
}

/** What reconciliation decided for this run. */
export interface Reconciliation {
    /** The revision label of each node's serving container, by node name. */
    readonly revisions: Readonly<Record<string, string>>;
    /** The token of `vllm serve` in the Ray head (ray executor). */
    readonly serveToken: string;
    /** The revision of the watchdog's container on the first node. */
    readonly watchdogRevision: string;
    /** What was found broken and what `up` does about it, one line each, naming node and container. */
    readonly findings: readonly string[];
    /** Whether anything of this stack was found on any node (false: a first deployment). */
    readonly deployed: boolean;
}

function describeDead(container: LiveContainer | undefined, name: string): string {
    if (!container) {
        return `container ${name} is missing`;
    }
    if (container.restarting) {
        return `container ${name} is restarting (exit ${container.exitCode}, ${container.restartCount} restarts)`;
    }
    return `container ${name} is ${container.status} (exit ${container.exitCode}, ${container.restartCount} restarts)`;
}

/** Up and able to serve: running, and neither restarting nor paused (Docker counts both as running). */
const alive = (container: LiveContainer | undefined): container is LiveContainer =>
    container !== undefined && container.running && !container.restarting && container.status !== "paused";

/**
 * Decides, from what the hosts show, which serving containers keep their revision and which get
 * `fresh()` (a new one, so Pulumi replaces them), and whether `vllm serve` of the ray executor must
 * start again. ray: each container on its own (workers follow a new head through its id), and vLLM
 * whenever the endpoint does not answer; mp: the ranks as one group, since vLLM cannot go on with a
 * rank missing.
 */
export function reconcile(
    config: Pick<FleetConfig, "executor" | "nodes">,
    observations: readonly NodeObservation[],
    fresh: () => string,
): Reconciliation {
    const serving = servingContainerOf(config);
    const found = observations.map((observation) => observation.containers.find((container) => container.name === serving));
    const deployed = observations.some((observation) => observation.containers.length > 0);
    const findings: string[] = [];
    const revisions: Record<string, string> = {};
    const endpoint = observations[0]?.endpoint;
    const endpointOk = endpoint?.completionOk === true;
    // The watchdog: kept while it runs, else replaced (it restarts by itself unless stopped by hand).
    const watchdog = observations[0]?.containers.find((container) => container.name === WATCHDOG_CONTAINER);
    const watchdogRevision = alive(watchdog) && watchdog.labels[REVISION_LABEL] ? watchdog.labels[REVISION_LABEL] : fresh();
    if (watchdog && !alive(watchdog)) {
        findings.push(`node ${observations[0].node}: ${describeDead(watchdog, WATCHDOG_CONTAINER)}; up replaces the watchdog`);
    }
    if (config.executor === "mp") {
        const groupAlive = found.every(alive);
        const keep = groupAlive && endpointOk;
        const revision = fresh();
        observations.forEach((observation, index) => {
            const container = found[index];
            revisions[observation.node] = keep && container?.labels[REVISION_LABEL] ? container.labels[REVISION_LABEL] : revision;
        });
        if (deployed && !keep) {
            const dead = observations.flatMap((observation, index) => (alive(found[index]) ? [] : [`node ${observation.node}: ${describeDead(found[index], serving)}`]));
            const reason = dead.length > 0 ? dead.join("; ") : `node ${observations[0].node}: the endpoint does not answer a completion (${endpoint?.detail || "no answer"})`;
            findings.push(`${reason}; up replaces every vLLM rank (the group restarts as one)`);
        }
        return { revisions, serveToken: "", watchdogRevision, findings, deployed };
    }
    observations.forEach((observation, index) => {
        const container = found[index];
        if (alive(container) && container.labels[REVISION_LABEL]) {
            revisions[observation.node] = container.labels[REVISION_LABEL];
            return;
        }
        revisions[observation.node] = fresh();
        if (deployed) {
            const role = index === 0 ? "the Ray head" : "a Ray worker";
            findings.push(`node ${observation.node}: ${describeDead(container, serving)}; up replaces ${role}${index === 0 ? " and its workers" : ""}`);
        }
    });
    const serve = observations[0]?.serve;
    let serveToken = fresh();
    if (alive(found[0]) && serve?.running && endpointOk && serve.token) {
        serveToken = serve.token;
    } else if (deployed && alive(found[0])) {
        const why = !serve?.running ? "vllm serve is not running" : `the endpoint does not answer a completion (${endpoint?.detail || "no answer"})`;
        findings.push(`node ${observations[0].node}: ${why}; up starts vllm serve again`);
    }
    return { revisions, serveToken, watchdogRevision, findings, deployed };
}

/** A new revision: unique per run and node (time and randomness), short. */
export function newRevision(): string {
    return `${Date.now().toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36).padStart(4, "0")}`;
}
