/**
 * The optional host firewall of each node (security.firewall): which ports stay open to everyone
 * (SSH), which face clients and admit only `security.clients` (the gateway's port, each service's
 * API), which admit only the fabric subnet (Ray's and vLLM's internal ports; the services' APIs too
 * with `security.servicePorts: gateway`), and the marker the rules leave
 * (components/scripts/firewall.sh). Pure.
 */
import * as crypto from "crypto";
import { FleetConfig, GATEWAY_METRICS_PORT } from "../config";

/** Ray's client server, its worker processes' range and its dashboard agent (Ray's defaults, kept). */
export const RAY_INTERNAL_PORTS = ["10001:19999", "52365"] as const;

/** The iptables chain of a stack's rules (at most 28 characters). */
export function firewallChain(stack: string): string {
    return `VLLMFLEET-${crypto.createHash("sha256").update(stack).digest("hex").slice(0, 8)}`;
}

/** The marker the rules leave on a node (tmpfs: gone with them after a reboot). */
export function firewallMarker(stack: string): string {
    return `/dev/shm/vllm-fleet-firewall-${firewallChain(stack)}`;
}

/** The ports closed to everything outside the fabric, besides the kernel's ephemeral range. */
export function closedPorts(config: Pick<FleetConfig, "executor" | "ray" | "vllm">): string[] {
    return config.executor === "ray" ? [String(config.ray.port), ...RAY_INTERNAL_PORTS] : [String(config.vllm.masterPort)];
}

/** The rules of one node. */
export interface FirewallPlan {
    readonly node: string;
    readonly chain: string;
    readonly fabricSubnet: string;
    /** Open to everyone: the node's SSH port. */
    readonly openPorts: readonly string[];
    /** The ports that face clients on this node: the gateway's, and each service's API (unless servicePorts is gateway). */
    readonly clientPorts: readonly string[];
    /** The networks (CIDR) whose hosts may open connections to {@link clientPorts} (0.0.0.0/0: everyone). */
    readonly clients: readonly string[];
    /** From the fabric subnet only (besides the kernel's ephemeral range, which firewall.sh reads). */
    readonly closedPorts: readonly string[];
    readonly marker: string;
    /** The revision of the rules: a new one (a node that lost them) applies them again (observe.ts). */
    readonly revision: string;
}

/**
 * Each node's rules (none without security.firewall): SSH open to all; the gateway's port (on its
 * node) and the API port of every service placed on the node to `security.clients` (to the fabric
 * only with `security.servicePorts: gateway`, where the gateway reaches the services); the internal
 * ports of those services (Ray's, or vLLM's rendezvous) to the fabric subnet only.
 */
export function planFirewalls(
    config: Pick<FleetConfig, "security" | "nodes" | "fabric" | "gateway" | "monitoring">,
    services: readonly Pick<FleetConfig, "nodes" | "executor" | "ray" | "vllm">[],
    stack: string,
    revisions: Readonly<Record<string, string>>,
): FirewallPlan[] {
    const { security } = config;
    if (!security.firewall) {
        return [];
    }
    const behindGateway = security.servicePorts === "gateway";
    return config.nodes.map((node) => {
        const placed = services.filter((service) => service.nodes.some((own) => own.name === node.name));
        const apiPorts = placed.map((service) => String(service.vllm.port));
        return {
            node: node.name,
            chain: firewallChain(stack),
            fabricSubnet: config.fabric.subnet,
            openPorts: [String(node.port)],
            clientPorts: clientPorts(config, placed, node.name),
            clients: security.clients,
            closedPorts: unique([...(behindGateway ? apiPorts : []), ...placed.flatMap(closedPorts), ...monitoringInternalPorts(config, node.name)]),
            marker: firewallMarker(stack),
            revision: revisions[node.name] ?? "",
        };
    });
}

const unique = (values: readonly string[]) => [...new Set(values)];

/**
 * With monitoring, what only Prometheus reaches on `node`, over the fabric: the exporters' ports (the
 * node's, the GPU's), and the gateway router's metrics on the gateway's node (both listen on the fabric address anyway).
 */
function monitoringInternalPorts(config: Pick<FleetConfig, "gateway" | "monitoring">, node: string): string[] {
    if (!config.monitoring) {
        return [];
    }
    return [
        String(config.monitoring.nodeExporter.port),
        ...(config.monitoring.gpuExporter ? [String(config.monitoring.gpuExporter.port)] : []),
        ...(config.gateway?.node === node ? [String(GATEWAY_METRICS_PORT)] : []),
    ];
}

/**
 * The ports of `node` (of every node when omitted) that face clients: the gateway's and Prometheus's
 * on their nodes and the API port of each service placed there, unless `security.servicePorts: gateway` leaves clients
 * the gateway only.
 */
export function clientPorts(
    config: Pick<FleetConfig, "security" | "gateway" | "monitoring">,
    services: readonly Pick<FleetConfig, "nodes" | "vllm">[],
    node?: string,
): string[] {
    const { gateway } = config;
    const placed = node === undefined ? services : services.filter((service) => service.nodes.some((own) => own.name === node));
    const apiPorts = config.security.servicePorts === "gateway" ? [] : placed.map((service) => String(service.vllm.port));
    const { monitoring } = config;
    return unique([
        ...(gateway !== undefined && (node === undefined || gateway.node === node) ? [String(gateway.port)] : []),
        ...apiPorts,
        ...(monitoring !== undefined && (node === undefined || monitoring.node === node) ? [String(monitoring.port), ...(monitoring.grafana ? [String(monitoring.grafana.port)] : [])] : []),
    ]);
}
