/**
 * The optional host firewall of each node (security.firewall): which ports stay open to everyone,
 * which only to the fabric subnet, and the marker the rules leave (components/scripts/firewall.sh).
 * Pure.
 */
import * as crypto from "crypto";
import { FleetConfig } from "../config";

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
    /** Open to everyone: the node's SSH port and vLLM's API. */
    readonly openPorts: readonly string[];
    /** From the fabric subnet only (besides the kernel's ephemeral range, which firewall.sh reads). */
    readonly closedPorts: readonly string[];
    readonly marker: string;
    /** The revision of the rules: a new one (a node that lost them) applies them again (observe.ts). */
    readonly revision: string;
}

/**
 * Each node's rules (none without security.firewall): SSH and the API port of every service placed
 * on the node open to all; the internal ports of those services (Ray's, or vLLM's rendezvous) to the
 * fabric subnet only.
 */
export function planFirewalls(
    config: Pick<FleetConfig, "security" | "nodes" | "fabric">,
    services: readonly Pick<FleetConfig, "nodes" | "executor" | "ray" | "vllm">[],
    stack: string,
    revisions: Readonly<Record<string, string>>,
): FirewallPlan[] {
    if (!config.security.firewall) {
        return [];
    }
    const unique = (values: readonly string[]) => [...new Set(values)];
    return config.nodes.map((node) => {
        const placed = services.filter((service) => service.nodes.some((own) => own.name === node.name));
        return {
            node: node.name,
            chain: firewallChain(stack),
            fabricSubnet: config.fabric.subnet,
            openPorts: unique([String(node.port), ...placed.map((service) => String(service.vllm.port))]),
            closedPorts: unique(placed.flatMap(closedPorts)),
            marker: firewallMarker(stack),
            revision: revisions[node.name] ?? "",
        };
    });
}
