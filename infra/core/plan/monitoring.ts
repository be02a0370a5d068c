/**
 * The monitoring's plan (config `monitoring`): Prometheus on its node, a node exporter (and with
 * monitoring.gpuExporter NVIDIA's DCGM exporter) on every node, the scrape targets and the alert rules. Prometheus's own configuration is part of its container
 * (its files); the targets, the rules and the key it scrapes the services with are given to the
 * running container by a step (components/scripts/monitoring-config.sh: files it watches, and a
 * SIGHUP for the rules), so a service added or removed changes its targets in place: the container
 * and its data stay. Pure.
 */
import { FleetConfig, GATEWAY_METRICS_PORT } from "../config";
import { ContainerFile, ContainerSpec } from "../containerSpec";
import { REVISION_LABEL, fleetLabels, monitoringContainers } from "../names";
import { urlHost } from "../net";
import { stackDirectory } from "./cache";
import { MonitoredNode, perFabric } from "./dashboard";
import { GrafanaPlan, planGrafana } from "./grafana";
import { PlannedNode } from "./nodes";

/** The uid Prometheus runs as in its image (the official images' `nobody`), which owns its data directory. */
export const PROMETHEUS_UID = 65534;
/** Where the data directory is mounted (the official image's). */
const PROMETHEUS_DATA = "/prometheus";
/** Prometheus's configuration inside its container (one of its files). */
const CONFIG_DIR = "/etc/vllm-fleet/prometheus";
/** What the step writes into the running container: the targets, the rules, the key. */
const STATE_DIR = `${CONFIG_DIR}/state`;
export const PROMETHEUS_KEY_FILE = `${STATE_DIR}/key`;
const RULES_FILE = `${STATE_DIR}/rules.yml`;
/** The scrape jobs, each with its targets file (the GPU's empty without monitoring.gpuExporter). */
export const MONITORING_JOBS = ["vllm", "gateway", "node", "gpu"] as const;
export type MonitoringJob = (typeof MONITORING_JOBS)[number];
const targetsFile = (job: MonitoringJob) => `${STATE_DIR}/${job}.json`;

/** One scrape target: a job, its `host:port` and the labels every series it gives carries. */
export interface ScrapeTarget {
    readonly job: MonitoringJob;
    readonly address: string;
    readonly labels: Readonly<Record<string, string>>;
}

/** What a service offers Prometheus: its name and model, and its first node, where its API (and /metrics) answers. */
export interface MonitoredService {
    readonly name: string;
    readonly vllm: { readonly modelId: string };
    readonly nodes: readonly MonitoredNode[];
    readonly config: { readonly vllm: { readonly port: number } };
}

/**
 * The revision of each monitoring container, as the read decided: kept while it runs, new when it
 * was found dead or missing, so that `up` replaces it (observe.ts containerRevision).
 */
export interface MonitoringRevisions {
    readonly prometheus: string;
    /** Each node's exporter, by node. */
    readonly exporters: Readonly<Record<string, string>>;
    /** Each node's GPU exporter, by node (with monitoring.gpuExporter). */
    readonly gpuExporters?: Readonly<Record<string, string>>;
    /** Grafana's, with monitoring.grafana. */
    readonly grafana?: string;
}

/** The monitoring as planned. */
export interface MonitoringPlan {
    readonly node: string;
    readonly port: number;
    /** Prometheus as clients reach it, e.g. http://10.1.230.180:9090. */
    readonly endpoint: string;
    readonly image: { readonly name: string; readonly source: "present" | "pull" };
    readonly exporterImage: { readonly name: string; readonly source: "present" | "pull" };
    /** Prometheus's container, its configuration among its files. */
    readonly spec: ContainerSpec;
    /** Each node's exporter, on its fabric address. */
    readonly exporters: readonly { readonly node: string; readonly spec: ContainerSpec }[];
    /** Each node's GPU exporter (NVIDIA's DCGM exporter), on its fabric address; none without monitoring.gpuExporter. */
    readonly gpuExporters: readonly { readonly node: string; readonly spec: ContainerSpec }[];
    readonly gpuExporterImage?: { readonly name: string; readonly source: "present" | "pull" };
    /** `<dataDir>/<stack>` on the node, made for Prometheus's user, removed at destroy when asked. */
    readonly data: { readonly dir: string; readonly removeOnDestroy: boolean; readonly uid: number };
    readonly targets: readonly ScrapeTarget[];
    /** Grafana beside Prometheus (monitoring.grafana), its admin password (the API key) added where it is known. */
    readonly grafana?: GrafanaPlan;
    /**
     * The step that gives the running container its targets, rules and key (the key added where it is
     * known), then waits until Prometheus has loaded the rules and scraped every target up.
     */
    readonly configStep: {
        readonly container: string;
        readonly port: number;
        readonly files: readonly ContainerFile[];
        readonly keyFile: string;
        readonly uid: number;
        readonly addresses: readonly string[];
        readonly ruleGroups: number;
        readonly timeoutSeconds: number;
    };
}

/** The scrape targets: each service's API, the gateway's router, each node's exporter and, when it runs, its GPU exporter. */
export function scrapeTargets(
    services: readonly MonitoredService[],
    gateway: { readonly node: string; readonly fabricIp: string } | undefined,
    nodes: readonly MonitoredNode[],
    exporterPort: number,
    gpuExporterPort?: number,
): ScrapeTarget[] {
    return [
        // The API answers on the first node's fabric address with vllm.host all and fabric.
        ...services.map((service) => ({
            job: "vllm" as const,
            address: `${urlHost(service.nodes[0].fabric.ip)}:${service.config.vllm.port}`,
            labels: { service: service.name, model: service.vllm.modelId, node: service.nodes[0].name },
        })),
        ...(gateway ? [{ job: "gateway" as const, address: `${urlHost(gateway.fabricIp)}:${GATEWAY_METRICS_PORT}`, labels: { node: gateway.node } }] : []),
        ...nodes.map((node) => ({
            job: "node" as const,
            address: `${urlHost(node.fabric.ip)}:${exporterPort}`,
            labels: { node: node.name, fabric_device: node.fabric.interface },
        })),
        ...(gpuExporterPort === undefined ? [] : nodes.map((node) => ({ job: "gpu" as const, address: `${urlHost(node.fabric.ip)}:${gpuExporterPort}`, labels: { node: node.name } }))),
    ];
}

/** A targets file of Prometheus's file-based discovery: one group per target, with its labels. */
export function targetsFileContent(targets: readonly ScrapeTarget[], job: MonitoringJob): string {
    return `${JSON.stringify(
        targets.filter((target) => target.job === job).map((target) => ({ targets: [target.address], labels: target.labels })),
        null,
        2,
    )}\n`;
}

/**
 * Prometheus's configuration (JSON, which YAML reads): the jobs, each discovering its targets from
 * its file; the services' scraped with the stack's key (read from a file at each scrape).
 */
export function prometheusConfig(settings: { readonly stack: string; readonly intervalSeconds: number; readonly keyed: boolean; readonly port: number }): string {
    const interval = `${settings.intervalSeconds}s`;
    const job = (name: MonitoringJob, extra: Record<string, unknown> = {}) => ({
        job_name: name,
        ...extra,
        // The files are watched: a change is read at once (and every 30 s besides).
        file_sd_configs: [{ files: [targetsFile(name)], refresh_interval: "30s" }],
    });
    const config = {
        global: {
            scrape_interval: interval,
            scrape_timeout: `${Math.min(settings.intervalSeconds, 10)}s`,
            evaluation_interval: interval,
            external_labels: { stack: settings.stack },
        },
        rule_files: [RULES_FILE],
        scrape_configs: [
            job("vllm", settings.keyed ? { authorization: { type: "Bearer", credentials_file: PROMETHEUS_KEY_FILE } } : {}),
            job("gateway"),
            job("node"),
            job("gpu"),
            { job_name: "prometheus", static_configs: [{ targets: [`127.0.0.1:${settings.port}`] }] },
        ],
    };
    return `# vllm-fleet's Prometheus (infra/core/plan/monitoring.ts); JSON, which YAML reads.\n${JSON.stringify(config, null, 2)}\n`;
}

/** One alert rule. */
interface AlertRule {
    readonly alert: string;
    readonly expr: string;
    readonly for: string;
    readonly labels: { readonly severity: "critical" | "warning" };
    readonly annotations: { readonly summary: string };
}

/**
 * The alert rules vllm-fleet ships: a service, the gateway's router, a node's exporter or its GPU exporter that does not
 * answer; the KV cache above 90% for 5 minutes; waiting requests growing for 5 minutes; a node's
 * available memory below 5% (page cache counts as available: what the kernel can give back); errors
 * on a node's fabric interface (each node's from the plan: its interface by name).
 */
export function alertRules(nodes: readonly MonitoredNode[]): AlertRule[] {
    // Each node's fabric interface by name: received and sent errors added up, the nodes side by side.
    const fabricErrors = perFabric(nodes, (selector) => `(increase(node_network_receive_errs_total${selector}[5m]) + increase(node_network_transmit_errs_total${selector}[5m]))`);
    return [
        {
            alert: "ServiceDown",
            expr: 'up{job="vllm"} == 0',
            for: "30s",
            labels: { severity: "critical" },
            annotations: { summary: "service {{ $labels.service }} does not answer at {{ $labels.instance }} (its /metrics)" },
        },
        {
            alert: "GatewayDown",
            expr: 'up{job="gateway"} == 0',
            for: "30s",
            labels: { severity: "critical" },
            annotations: { summary: "the gateway's router on {{ $labels.node }} does not answer ({{ $labels.instance }})" },
        },
        {
            alert: "NodeExporterDown",
            expr: 'up{job="node"} == 0',
            for: "1m",
            labels: { severity: "critical" },
            annotations: { summary: "node {{ $labels.node }} does not answer (its exporter at {{ $labels.instance }})" },
        },
        {
            alert: "GpuExporterDown",
            expr: 'up{job="gpu"} == 0',
            for: "1m",
            labels: { severity: "warning" },
            annotations: { summary: "node {{ $labels.node }}: its GPU exporter does not answer at {{ $labels.instance }}" },
        },
        {
            alert: "KvCacheHigh",
            expr: 'max by (service) (vllm:kv_cache_usage_perc{job="vllm"}) > 0.9',
            for: "5m",
            labels: { severity: "warning" },
            annotations: { summary: "service {{ $labels.service }}: KV cache {{ $value | humanizePercentage }} full for 5 minutes" },
        },
        {
            alert: "RequestsWaitingGrowing",
            expr: 'sum by (service) (vllm:num_requests_waiting{job="vllm"}) > 0 and sum by (service) (deriv(vllm:num_requests_waiting{job="vllm"}[5m])) > 0',
            for: "5m",
            labels: { severity: "warning" },
            annotations: { summary: "service {{ $labels.service }}: {{ $value }} requests waiting, and more each minute, for 5 minutes" },
        },
        {
            alert: "NodeMemoryLow",
            expr: 'node_memory_MemAvailable_bytes{job="node"} / node_memory_MemTotal_bytes{job="node"} < 0.05',
            for: "2m",
            labels: { severity: "critical" },
            annotations: { summary: "node {{ $labels.node }}: {{ $value | humanizePercentage }} of its memory available" },
        },
        {
            alert: "FabricErrors",
            expr: `sum by (node, device) (${fabricErrors}) > 0`,
            for: "0s",
            labels: { severity: "warning" },
            annotations: { summary: "node {{ $labels.node }}: {{ $value }} errors on its fabric interface {{ $labels.device }} in 5 minutes" },
        },
    ];
}

/** The rules file: one group of {@link alertRules} (JSON, which YAML reads). */
export function rulesFileContent(rules: readonly AlertRule[]): string {
    return `${JSON.stringify({ groups: [{ name: "vllm-fleet", rules }] }, null, 2)}\n`;
}

/** How long the step waits for Prometheus to load its rules and find every target up. */
const MONITORING_READY_SECONDS = 180;

/** The monitoring's plan, when the stack has it. */
export function planMonitoring(
    config: Pick<FleetConfig, "monitoring" | "nodes" | "vllm">,
    stack: string,
    nodes: readonly PlannedNode[],
    services: readonly MonitoredService[],
    gateway: { readonly node: string; readonly fabricIp: string } | undefined,
    revisions: MonitoringRevisions,
): MonitoringPlan | undefined {
    const monitoring = config.monitoring;
    if (!monitoring) {
        return undefined;
    }
    const names = monitoringContainers(stack);
    const node = config.nodes.find((entry) => entry.name === monitoring.node)!;
    const keyed = config.vllm.apiKey !== "none";
    // Every series carries the stack (external labels reach alerts only, not queries).
    const targets = scrapeTargets(services, gateway, nodes, monitoring.nodeExporter.port, monitoring.gpuExporter?.port).map((target) => ({ ...target, labels: { ...target.labels, stack } }));
    const data = { dir: stackDirectory(monitoring.dataDir, stack, "monitoring.dataDir"), removeOnDestroy: monitoring.removeDataOnDestroy, uid: PROMETHEUS_UID };
    const emptyState: ContainerFile[] = [
        ...MONITORING_JOBS.map((job) => ({ path: targetsFile(job), content: "[]\n" })),
        { path: RULES_FILE, content: "groups: []\n" },
    ];
    const spec: ContainerSpec = {
        name: names.prometheus,
        image: monitoring.image.name,
        entrypoint: ["/bin/prometheus"],
        command: [
            `--config.file=${CONFIG_DIR}/prometheus.yml`,
            `--storage.tsdb.path=${PROMETHEUS_DATA}`,
            `--storage.tsdb.retention.time=${monitoring.retention}`,
            `--web.listen-address=0.0.0.0:${monitoring.port}`,
        ],
        env: {},
        mounts: [{ source: data.dir, target: PROMETHEUS_DATA, readOnly: false }],
        networkHost: true,
        ipcHost: false,
        ulimits: [],
        restart: "unless-stopped",
        labels: { ...fleetLabels(stack, "prometheus"), [REVISION_LABEL]: revisions.prometheus },
        // The configuration, and empty targets and rules until the step gives the running container its own.
        files: [{ path: `${CONFIG_DIR}/prometheus.yml`, content: prometheusConfig({ stack, intervalSeconds: monitoring.scrapeIntervalSeconds, keyed, port: monitoring.port }) }, ...emptyState],
    };
    const exporters = nodes.map((planned) => ({
        node: planned.name,
        spec: {
            name: names.exporter,
            image: monitoring.nodeExporter.image.name,
            entrypoint: ["/bin/node_exporter"],
            // On the fabric address only: Prometheus reaches it there, nobody on the management network does.
            command: [`--web.listen-address=${urlHost(planned.fabric.ip)}:${monitoring.nodeExporter.port}`, "--path.rootfs=/host"],
            env: {},
            mounts: [{ source: "/", target: "/host", readOnly: true }],
            networkHost: true,
            ipcHost: false,
            ulimits: [],
            restart: "unless-stopped" as const,
            labels: { ...fleetLabels(stack, "node-exporter"), [REVISION_LABEL]: revisions.exporters[planned.name] },
        },
    }));
    const gpuExporter = monitoring.gpuExporter;
    const gpuExporters = gpuExporter
        ? nodes.map((planned) => ({
              node: planned.name,
              spec: {
                  name: names.gpuExporter,
                  image: gpuExporter.image.name,
                  // The image's entrypoint (it refreshes the linker's cache, then runs dcgm-exporter with these).
                  command: ["--address", `${urlHost(planned.fabric.ip)}:${gpuExporter.port}`],
                  env: {},
                  mounts: [],
                  networkHost: true,
                  ipcHost: false,
                  ulimits: [],
                  gpus: "all" as const,
                  restart: "unless-stopped" as const,
                  labels: { ...fleetLabels(stack, "gpu-exporter"), [REVISION_LABEL]: revisions.gpuExporters?.[planned.name] ?? "" },
              },
          }))
        : [];
    const rules = alertRules(nodes);
    const grafana = monitoring.grafana ? planGrafana(monitoring.grafana, stack, urlHost(node.host), monitoring.port, nodes, Boolean(gpuExporter), revisions.grafana ?? "", MONITORING_READY_SECONDS) : undefined;
    return {
        node: monitoring.node,
        port: monitoring.port,
        endpoint: `http://${urlHost(node.host)}:${monitoring.port}`,
        image: monitoring.image,
        exporterImage: monitoring.nodeExporter.image,
        spec,
        exporters,
        gpuExporters,
        ...(gpuExporter ? { gpuExporterImage: gpuExporter.image } : {}),
        data,
        targets,
        grafana,
        configStep: {
            container: names.prometheus,
            port: monitoring.port,
            files: [...MONITORING_JOBS.map((job) => ({ path: targetsFile(job), content: targetsFileContent(targets, job) })), { path: RULES_FILE, content: rulesFileContent(rules) }],
            keyFile: keyed ? PROMETHEUS_KEY_FILE : "",
            uid: PROMETHEUS_UID,
            addresses: targets.map((target) => `${target.job} ${target.address}`),
            ruleGroups: 1,
            timeoutSeconds: MONITORING_READY_SECONDS,
        },
    };
}
