/**
 * The optional host firewall (security.firewall: true): on every node, Ray's and vLLM's internal
 * ports admit new connections from the fabric subnet only (components/scripts/firewall.sh); SSH
 * and vLLM's API stay open. Put back by the next `up` when a node lost its rules (a reboot): the
 * read of every run looks for the rules' marker (infra/core/observe.ts firewallRevisions).
 */
import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/core/config";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { scriptProgram } from "./shell";

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
export function closedPorts(config: FleetConfig): string[] {
    return config.executor === "ray" ? [String(config.ray.port), ...RAY_INTERNAL_PORTS] : [String(config.vllm.masterPort)];
}

/** The rules of every node; what starts Ray or vLLM goes after them. */
export function nodeFirewalls(config: FleetConfig, stack: string, nodes: readonly SparkNode[], revisions: Readonly<Record<string, string>>): pulumi.Resource[] {
    if (!config.security.firewall) {
        return [];
    }
    return nodes.map((node, index) => {
        const vars = (action: "apply" | "remove") =>
            scriptProgram("firewall", {
                ACTION: action,
                CHAIN: firewallChain(stack),
                FABRIC_SUBNET: config.fabric.subnet,
                OPEN_PORTS: [String(config.nodes[index].port), String(config.vllm.port)],
                CLOSED_PORTS: closedPorts(config),
                MARKER: firewallMarker(stack),
                REVISION: revisions[node.nodeName] ?? "",
            });
        return hostCommand(
            config.commandRunner,
            `${node.nodeName}-firewall`,
            // A node without its rules (rebooted) has a new revision: the rules are applied again.
            { connection: node.connection, create: vars("apply"), delete: vars("remove"), triggers: [revisions[node.nodeName] ?? ""] },
            { parent: node },
        ).resource;
    });
}
