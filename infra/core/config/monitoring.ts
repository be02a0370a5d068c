/**
 * `vllm-fleet:monitoring`: Prometheus on a node the stack names, scraping every service's
 * `/metrics`, the gateway's router and a node exporter on every node, with the alert rules vllm-fleet
 * ships (plan/monitoring.ts). Off without the key; `monitoring.node` alone turns it on. The schema,
 * and the checks across keys: the node is one of `nodes`, the ports are free where they listen. Pure.
 */
import { z } from "zod";
import { ownDirectoryProblem } from "./cache";
import { FleetNode, imageNameSchema } from "./fields";
import { GATEWAY_METRICS_PORT, GATEWAY_ROUTER_PORT, GatewayConfig, servicePortsOn } from "./gateway";
import { ABSOLUTE_PATH, normalizeAbsolutePath } from "./model";
import { CrossKeyIssue, rayTakes } from "./ports";
import { ServiceInput } from "./services";

/**
 * The official images (Prometheus's long-term-support line, the node exporter and Grafana of its
 * time), pinned by the digest of their multi-platform index (arm64 and amd64), the tag kept for the
 * reader: a tag can move to another build.
 */
export const PROMETHEUS_IMAGE = "prom/prometheus:v3.5.0@sha256:63805ebb8d2b3920190daf1cb14a60871b16fd38bed42b857a3182bc621f4996";
export const NODE_EXPORTER_IMAGE = "prom/node-exporter:v1.9.1@sha256:d00a542e409ee618a4edc67da14dd48c5da66726bbd5537ab2af9c1dfc442c8a";
export const GRAFANA_IMAGE = "grafana/grafana:11.6.0@sha256:62d2b9d20a19714ebfe48d1bb405086081bc602aa053e28cf6d73c7537640dfb";
/**
 * NVIDIA's DCGM exporter (arm64 and amd64), the GPU's exporter (monitoring.gpuExporter), by tag:
 * preview warns and says how to pin it, as for any monitoring image named by a tag alone.
 */
export const DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-ubuntu22.04";
/** Where Prometheus keeps its data on its node: `<dataDir>/<stack>`. */
export const DEFAULT_MONITORING_DATA_DIR = "/var/lib/vllm-fleet/prometheus";

/** A monitoring image: pulled (the default), or already on the node (`present`). */
const monitoringImage = (name: string) =>
    z
        .strictObject({
            name: imageNameSchema,
            /** `pull` (docker pull on each node that runs it) or `present` (already there). */
            source: z.enum(["present", "pull"]).default("pull"),
        })
        .default({ name, source: "pull" });

const port = z.number().int().min(1).max(65535);
// Prometheus's duration syntax for the retention (one unit: 15d, 90d, 1y, 12h).
const DURATION = /^[1-9][0-9]{0,5}(ms|s|m|h|d|w|y)$/;

const NODE_EXPORTER_DEFAULTS = { image: { name: NODE_EXPORTER_IMAGE, source: "pull" as const }, port: 9100 };

export const monitoringSchema = z.strictObject({
    /** The node (from `nodes`) Prometheus runs on. */
    node: z.string(),
    /** Prometheus's port (its web UI and API), on every address of that node: behind security.clients with the firewall. */
    port: port.default(9090),
    /** How often every target is scraped and the alert rules are evaluated. */
    scrapeIntervalSeconds: z.number().int().min(1).max(300).default(10),
    /** How long Prometheus keeps samples (its --storage.tsdb.retention.time). */
    retention: z.string().regex(DURATION, "a duration such as 15d, 90d, 1y or 12h (a whole number and one of ms, s, m, h, d, w, y)").default("15d"),
    /** The directory on the node that holds Prometheus's data; this stack's is `<dataDir>/<stack>`. */
    dataDir: z
        .string()
        .regex(ABSOLUTE_PATH, "an absolute path on the monitoring node, such as /var/lib/vllm-fleet/prometheus")
        .superRefine((value, context) => {
            const problem = ownDirectoryProblem(value, "Prometheus");
            if (problem) {
                context.addIssue({ code: "custom", message: problem });
            }
        })
        .transform(normalizeAbsolutePath)
        .default(DEFAULT_MONITORING_DATA_DIR),
    /** `pulumi destroy` removes this stack's data (`<dataDir>/<stack>`); default: it stays for the next deployment. */
    removeDataOnDestroy: z.boolean().default(false),
    /** Prometheus's image: the official one by default. */
    image: monitoringImage(PROMETHEUS_IMAGE),
    /** The node exporter on every node of the stack, on its fabric address only (Prometheus reaches it there). */
    nodeExporter: z
        .strictObject({
            image: monitoringImage(NODE_EXPORTER_IMAGE),
            port: port.default(NODE_EXPORTER_DEFAULTS.port),
        })
        .default(NODE_EXPORTER_DEFAULTS),
    /**
     * NVIDIA's DCGM exporter on every node (the GPU: utilization, power, temperature, clocks), on its
     * fabric address only; none when unset. It needs the NVIDIA container runtime (`--gpus all`).
     */
    gpuExporter: z
        .strictObject({
            image: monitoringImage(DCGM_EXPORTER_IMAGE),
            port: port.default(9400),
        })
        .optional(),
    /**
     * Grafana beside Prometheus, with the fleet's dashboard and Prometheus as its data source
     * provisioned; none when unset. Its admin user's password is the stack's API key.
     */
    grafana: z
        .strictObject({
            image: monitoringImage(GRAFANA_IMAGE),
            /** Its port on every address of the monitoring node: a client port, like Prometheus's. */
            port: port.default(3000),
        })
        .optional(),
});

export type MonitoringConfig = z.output<typeof monitoringSchema>;

/** What holds each port on a node: the services' ports there, its SSH port, the gateway's there. */
function portsTakenOn(
    node: FleetNode,
    services: readonly ServiceInput[],
    nodes: readonly FleetNode[],
    oneModel: boolean,
    gateway: GatewayConfig | undefined,
): { what: string; port: number; ray: boolean }[] {
    const taken = servicePortsOn(node.name, services, nodes, oneModel).map((entry) => ({ what: entry.key, port: entry.port, ray: entry.ray }));
    taken.push({ what: `the SSH port of ${node.name}`, port: node.port, ray: false }, { what: "sshd's port", port: 22, ray: false });
    if (gateway?.node === node.name) {
        taken.push(
            { what: "vllm-fleet:gateway.port", port: gateway.port, ray: false },
            { what: `the gateway's router (${GATEWAY_ROUTER_PORT})`, port: GATEWAY_ROUTER_PORT, ray: false },
            { what: `the gateway router's metrics (${GATEWAY_METRICS_PORT})`, port: GATEWAY_METRICS_PORT, ray: false },
        );
    }
    return taken;
}

/** What already takes `port` on `node` (every kind of holder once), for a message; empty when free. */
function holders(port: number, taken: readonly { what: string; port: number; ray: boolean }[]): string[] {
    const found = [...new Set(taken.filter((entry) => entry.port === port).map((entry) => entry.what))];
    const byRay = taken.some((entry) => entry.ray) ? rayTakes(port, true) : undefined;
    return byRay ? [...found, `${byRay} of the Ray cluster there`] : found;
}

/**
 * The checks of `monitoring` across keys: its node is one of `nodes`; Prometheus's port is free on
 * that node (no service's, the gateway's or its router's, the SSH port, nor the node exporter's); the
 * exporters' ports (the node's, the GPU's) are free on every node and apart. All use the host's network.
 */
export function monitoringIssues(
    monitoring: MonitoringConfig,
    services: readonly ServiceInput[],
    nodes: readonly FleetNode[],
    oneModel: boolean,
    gateway: GatewayConfig | undefined,
    keyless = false,
): CrossKeyIssue[] {
    const node = nodes.find((entry) => entry.name === monitoring.node);
    if (!node) {
        return [{ path: ["monitoring", "node"], value: monitoring.node, expected: `the name of a node in vllm-fleet:nodes (${nodes.map((entry) => entry.name).join(", ")})` }];
    }
    const issues: CrossKeyIssue[] = [];
    const exporterPort = monitoring.nodeExporter.port;
    const onNode = [...holders(monitoring.port, portsTakenOn(node, services, nodes, oneModel, gateway)), ...(exporterPort === monitoring.port ? ["vllm-fleet:monitoring.nodeExporter.port"] : [])];
    if (onNode.length > 0) {
        issues.push({
            path: ["monitoring", "port"],
            value: monitoring.port,
            expected: `a port other than ${onNode.join(" and ")} on ${node.name} (Prometheus uses the host's network)`,
        });
    }
    const grafana = monitoring.grafana;
    if (grafana && keyless) {
        issues.push({
            path: ["monitoring", "grafana"],
            value: grafana,
            expected: "a stack with an API key (vllm.apiKey not none): Grafana's admin password is the stack's key, and without one it would keep Grafana's default",
        });
    }
    if (grafana) {
        const onGrafana = [
            ...holders(grafana.port, portsTakenOn(node, services, nodes, oneModel, gateway)),
            ...(grafana.port === monitoring.port ? ["vllm-fleet:monitoring.port"] : []),
            ...(grafana.port === exporterPort ? ["vllm-fleet:monitoring.nodeExporter.port"] : []),
        ];
        if (onGrafana.length > 0) {
            issues.push({ path: ["monitoring", "grafana", "port"], value: grafana.port, expected: `a port other than ${onGrafana.join(" and ")} on ${node.name} (Grafana uses the host's network)` });
        }
    }
    // The exporters run on every node, on the host's network: their ports free there, and apart.
    const exporters = [
        { key: ["nodeExporter", "port"], port: exporterPort, what: "the node exporter" },
        ...(monitoring.gpuExporter ? [{ key: ["gpuExporter", "port"], port: monitoring.gpuExporter.port, what: "the GPU exporter" }] : []),
    ];
    for (const [index, exporter] of exporters.entries()) {
        const clashes = [
            ...nodes.flatMap((each) => holders(exporter.port, portsTakenOn(each, services, nodes, oneModel, gateway)).map((what) => `${what} on ${each.name}`)),
            ...exporters.slice(0, index).filter((other) => other.port === exporter.port).map((other) => `vllm-fleet:monitoring.${other.key.join(".")}`),
            ...(index > 0 && exporter.port === monitoring.port ? ["vllm-fleet:monitoring.port"] : []),
            ...(index > 0 && exporter.port === grafana?.port ? ["vllm-fleet:monitoring.grafana.port"] : []),
        ];
        if (clashes.length > 0) {
            issues.push({
                path: ["monitoring", ...exporter.key],
                value: exporter.port,
                expected: `a port other than ${[...new Set(clashes)].join(" and ")} (${exporter.what} runs on every node, on the host's network)`,
            });
        }
    }
    return issues;
}
