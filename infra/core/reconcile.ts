/**
 * Reconciliation: from what the read of the nodes found (observe.ts), which serving containers keep
 * their revision and which get a new one (so Pulumi replaces them), and whether `vllm serve` of the
 * ray executor starts again. Pure.
 */
import { FleetConfig } from "./config";
import { REVISION_LABEL, ServiceContainers, monitoringContainers, servingContainer } from "./names";
import { LiveContainer, NodeObservation } from "./observe";

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
    /** The nodes where this stack's serving container was found alive (its memory is in use by it). */
    readonly servingAlive: readonly string[];
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
    config: Pick<FleetConfig, "executor"> & { readonly containers: ServiceContainers },
    observations: readonly NodeObservation[],
    fresh: () => string,
): Reconciliation {
    const serving = servingContainer(config.containers, config.executor);
    const watchdogName = config.containers.watchdog;
    const found = observations.map((observation) => observation.containers.find((container) => container.name === serving));
    const deployed = observations.some((observation) => observation.containers.length > 0);
    const findings: string[] = [];
    const revisions: Record<string, string> = {};
    const servingAlive = observations.filter((_, index) => alive(found[index])).map((observation) => observation.node);
    const endpoint = observations[0]?.endpoint;
    const endpointOk = endpoint?.completionOk === true;
    // The watchdog: kept while it runs, else replaced (it restarts by itself unless stopped by hand).
    const watchdog = observations[0]?.containers.find((container) => container.name === watchdogName);
    const watchdogRevision = alive(watchdog) && watchdog.labels[REVISION_LABEL] ? watchdog.labels[REVISION_LABEL] : fresh();
    if (watchdog && !alive(watchdog)) {
        findings.push(`node ${observations[0].node}: ${describeDead(watchdog, watchdogName)}; up replaces the watchdog`);
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
        return { revisions, serveToken: "", watchdogRevision, findings, deployed, servingAlive };
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
    return { revisions, serveToken, watchdogRevision, findings, deployed, servingAlive };
}

/**
 * The revision of a container that stands on its own (Prometheus, a node exporter): the one it
 * carries while it runs, so that `up` leaves it alone; else `fresh()`, so that `up` replaces it, with
 * a finding when it is there but dead (a missing one is simply created: on a first deployment too).
 */
export function containerRevision(observation: Pick<NodeObservation, "node" | "containers">, name: string, fresh: () => string): { revision: string; finding?: string } {
    const container = observation.containers.find((candidate) => candidate.name === name);
    if (alive(container) && container.labels[REVISION_LABEL]) {
        return { revision: container.labels[REVISION_LABEL] };
    }
    return { revision: fresh(), ...(container ? { finding: `node ${observation.node}: ${describeDead(container, name)}; up replaces it` } : {}) };
}

/**
 * The revisions of Prometheus and Grafana (on `node`) and of every node's exporters (the node's, the
 * GPU's) (containerRevision), and a finding for each found dead.
 */
export function monitoringRevisions(
    node: string,
    stack: string,
    observations: readonly Pick<NodeObservation, "node" | "containers">[],
    fresh: () => string,
): { prometheus: string; grafana: string; exporters: Record<string, string>; gpuExporters: Record<string, string>; findings: string[] } {
    const names = monitoringContainers(stack);
    const findings: string[] = [];
    const decide = (observation: Pick<NodeObservation, "node" | "containers">, name: string) => {
        const { revision, finding } = containerRevision(observation, name, fresh);
        findings.push(...(finding ? [finding] : []));
        return revision;
    };
    const own = observations.find((observation) => observation.node === node)!;
    return {
        prometheus: decide(own, names.prometheus),
        grafana: decide(own, names.grafana),
        exporters: Object.fromEntries(observations.map((observation) => [observation.node, decide(observation, names.exporter)])),
        gpuExporters: Object.fromEntries(observations.map((observation) => [observation.node, decide(observation, names.gpuExporter)])),
        findings,
    };
}
