/**
 * What `npm run status` prints, from one read of every node (components/observer.ts): per node the
 * fleet's containers with their state and restart count, and on the first node Ray's live nodes,
 * vLLM's /health, a completion and the watchdog's last actions. Pure, so it is tested directly.
 */
import { FleetConfig } from "../infra/core/config";
import { findFabric } from "../infra/core/fabric";
import { DEFAULT_CONTAINERS, REVISION_LABEL, ServiceContainers, servingContainer } from "../infra/core/names";
import { NodeObservation } from "../infra/core/observe";

/** The report and its verdict: serving means every serving container runs and a completion answered. */
export interface StatusReport {
    readonly text: string;
    readonly serving: boolean;
}

interface WatchdogEvent {
    readonly time?: string;
    readonly event?: string;
    readonly detail?: string;
}

/** The watchdog's last events, one line each (its state file is a JSON list of events). */
export function watchdogLines(json: string | undefined, last = 5): string[] {
    if (!json) {
        return ["watchdog: not running"];
    }
    try {
        const parsed = JSON.parse(json) as WatchdogEvent[] | { events?: WatchdogEvent[] };
        const events = Array.isArray(parsed) ? parsed : (parsed.events ?? []);
        if (events.length === 0) {
            return ["watchdog: running, nothing to report"];
        }
        return ["watchdog, last events:", ...events.slice(-last).map((event) => `  ${event.time ?? "?"}  ${event.event ?? "?"}  ${event.detail ?? ""}`.trimEnd())];
    } catch {
        return [`watchdog: unreadable state (${json.slice(0, 60)})`];
    }
}

/** The image as the last `up`'s argument check found it (the stack output `image`). */
export interface ImageReport {
    readonly name: string;
    readonly vllm: string;
    readonly ray: string;
}

/** The line of the image: its name and the vLLM and Ray inside it ("none": no Ray). */
export function imageLine(image: ImageReport | undefined): string {
    if (!image) {
        return "image: no up has checked it yet (the stack has no output `image`)";
    }
    return `image ${image.name}: vLLM ${image.vllm}, Ray ${image.ray === "none" ? "not installed" : image.ray} (as the last up's argument check found them)`;
}

/** Formats one read of the fleet; `image` is the stack's output of that name. */
export function statusReport(
    config: FleetConfig,
    observations: readonly NodeObservation[],
    containers: ServiceContainers = DEFAULT_CONTAINERS,
    image?: ImageReport,
): StatusReport {
    const serving = servingContainer(containers, config.executor);
    const lines: string[] = [imageLine(image)];
    let allRunning = true;
    observations.forEach((observation, index) => {
        const node = config.nodes[index];
        let fabric = "fabric: not found";
        try {
            const found = findFabric(node.name, observation.facts, config.fabric.cidr);
            fabric = `fabric ${found.ip} on ${found.interface}`;
        } catch (error) {
            fabric = `fabric: ${(error as Error).message}`;
        }
        lines.push(`${node.name} (${node.user}@${node.host}:${node.port})  ${fabric}`);
        const own = observation.containers.find((container) => container.name === serving);
        if (!own || !own.running || own.restarting) {
            allRunning = false;
        }
        if (observation.containers.length === 0) {
            lines.push("  no container of this stack");
        }
        for (const container of [...observation.containers].sort((a, b) => a.name.localeCompare(b.name))) {
            const state = container.restarting ? "restarting" : container.status;
            const exit = container.running ? "" : ` (exit ${container.exitCode})`;
            const revision = container.labels[REVISION_LABEL] ? `  revision ${container.labels[REVISION_LABEL]}` : "";
            lines.push(`  ${container.name.padEnd(22)} ${state}${exit}  restarts ${container.restartCount}  started ${container.startedAt || "-"}${revision}`);
        }
        if (index === 0) {
            if (observation.rayNodes) {
                const alive = observation.rayNodes.map((ray) => `${ray.ip} (${ray.gpus} GPU)`).join(", ");
                lines.push(`  ray nodes alive: ${alive || "none"}`);
            }
            if (observation.serve) {
                lines.push(`  vllm serve: ${observation.serve.running ? "running" : "not running"}`);
            }
            const endpoint = observation.endpoint;
            lines.push(`  /health: ${endpoint?.health ?? "not asked"}`);
            lines.push(`  completion: ${endpoint?.completionOk ? "answered" : `failed (${endpoint?.detail || "no answer"})`}`);
            lines.push(...watchdogLines(observation.watchdog).map((line) => `  ${line}`));
        }
    });
    const answered = observations[0]?.endpoint?.completionOk === true;
    const verdict = allRunning && answered;
    lines.push(verdict ? "serving: yes" : "serving: NO");
    return { text: lines.join("\n"), serving: verdict };
}

/** The gateway as the last `up` put it out (the stack output `gateway`). */
export interface GatewayOutputsReport {
    readonly node: string;
    readonly endpoint: string;
    readonly routes: Record<string, { service: string; url: string }>;
}

/** What a look at the gateway found: the router's workers (GET /workers), and a completion of each model through it. */
export interface GatewayLook {
    /** The router's `/workers` answer (its JSON), or why there was none. */
    readonly workers: { readonly json: string } | { readonly error: string };
    /** Per model: the HTTP status of a completion through the gateway (0: no answer) and a short detail. */
    readonly completions: Record<string, { readonly status: number; readonly detail: string }>;
}

/**
 * The gateway's row: where it answers, then each route (model -> service and its API): registered
 * in the router or not, and up (a completion through the gateway answered) or down with why.
 * Serving when the router answers and every route is registered and up.
 */
export function gatewayReport(gateway: GatewayOutputsReport, look: GatewayLook): StatusReport {
    const lines = [`gateway on ${gateway.node}: ${gateway.endpoint}`];
    let registered: Map<string, string> | undefined;
    if ("json" in look.workers) {
        try {
            const workers = (JSON.parse(look.workers.json) as { workers?: { url?: string; model_id?: string }[] }).workers ?? [];
            registered = new Map(workers.map((worker) => [worker.url ?? "", worker.model_id ?? ""]));
            lines.push(`  router: answering, ${workers.length} worker${workers.length === 1 ? "" : "s"} registered`);
        } catch {
            lines.push(`  router: unreadable /workers (${look.workers.json.slice(0, 60)})`);
        }
    } else {
        lines.push(`  router: not answering (${look.workers.error})`);
    }
    let serving = registered !== undefined;
    for (const [model, route] of Object.entries(gateway.routes)) {
        const inRouter = registered === undefined ? "unknown" : registered.get(route.url) === model ? "registered" : "NOT registered";
        const completion = look.completions[model];
        const up = completion?.status === 200;
        if (!up || inRouter !== "registered") {
            serving = false;
        }
        const state = up ? "up" : `DOWN (${completion ? (completion.status ? `HTTP ${completion.status}` : "no answer") : "not asked"}${completion?.detail ? `: ${completion.detail}` : ""})`;
        lines.push(`  ${model} -> service ${route.service} ${route.url}: ${inRouter}, ${state}`);
    }
    lines.push(serving ? "gateway serving: yes" : "gateway serving: NO");
    return { text: lines.join("\n"), serving };
}

/** The monitoring as the last `up` put it out (the stack output `monitoring`). */
export interface MonitoringOutputsReport {
    readonly node: string;
    readonly endpoint: string;
    readonly targets: readonly string[];
}

/** What Prometheus answered (`/api/v1/targets`, `/api/v1/alerts`: their `data`), or why it did not. */
export type MonitoringLook =
    | {
          readonly targets: { readonly activeTargets: readonly { labels: Record<string, string>; health: string; lastError?: string }[] };
          readonly alerts: { readonly alerts: readonly { labels: Record<string, string>; annotations?: Record<string, string>; state: string; activeAt?: string }[] };
      }
    | { readonly error: string };

/**
 * The monitoring's row: where Prometheus answers, how many of its targets are up (each one down
 * named, with Prometheus's reason), and every alert that fires or is about to, with its summary and
 * since when. Informational: the stack's verdict stays the services' and the gateway's.
 */
export function monitoringReport(monitoring: MonitoringOutputsReport, look: MonitoringLook, now: Date = new Date()): string {
    const lines = [`monitoring on ${monitoring.node}: ${monitoring.endpoint}`];
    if ("error" in look) {
        lines.push(`  Prometheus: not answering (${look.error})`);
        return lines.join("\n");
    }
    const targets = look.targets.activeTargets.filter((target) => target.labels.job !== "prometheus");
    const down = targets.filter((target) => target.health !== "up");
    lines.push(`  targets: ${targets.length - down.length} of ${targets.length} up`);
    for (const target of down) {
        lines.push(`  target ${target.labels.job} ${target.labels.instance} DOWN${target.lastError ? ` (${target.lastError})` : ""}`);
    }
    const alerts = look.alerts.alerts.filter((alert) => alert.state === "firing" || alert.state === "pending");
    if (alerts.length === 0) {
        lines.push("  alerts: none firing");
    }
    for (const alert of alerts) {
        const since = alert.activeAt ? ` for ${Math.max(0, Math.round((now.getTime() - Date.parse(alert.activeAt)) / 1000))} s` : "";
        const state = alert.state === "firing" ? "FIRING" : "pending";
        lines.push(`  alert ${alert.labels.alertname} ${state}${since}: ${alert.annotations?.summary ?? JSON.stringify(alert.labels)}`);
    }
    return lines.join("\n");
}
