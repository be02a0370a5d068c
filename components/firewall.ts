/**
 * The optional host firewall of a node (security.firewall: true): Ray's and vLLM's internal ports
 * admit new connections from the fabric subnet only, the ports that face clients (the gateway's, the
 * services' APIs) from security.clients only (components/scripts/firewall.sh); SSH stays open. Put back by the next `up` when the node lost its rules (a reboot): the read of every
 * run looks for the rules' marker (infra/core/observe.ts firewallRevisions), and a new revision
 * applies them again.
 */
import * as pulumi from "@pulumi/pulumi";
import { FirewallPlan } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface NodeFirewallArgs {
    readonly node: NodeAccess;
    /** The node's rules (infra/core/plan/firewall.ts). */
    readonly rules: FirewallPlan;
    readonly runner: CommandRunner;
}

/** The firewall rules of one node; what starts Ray or vLLM goes after them. */
export class NodeFirewall extends pulumi.ComponentResource {
    /** The step that applies the rules (and removes them on delete). */
    public readonly rules: pulumi.Resource;

    constructor(name: string, args: NodeFirewallArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:node:NodeFirewall", name, {}, opts);
        const { rules } = args;
        const program = (action: "apply" | "remove") =>
            scriptProgram("firewall", {
                ACTION: action,
                CHAIN: rules.chain,
                FABRIC_SUBNET: rules.fabricSubnet,
                OPEN_PORTS: [...rules.openPorts],
                CLIENT_PORTS: [...rules.clientPorts],
                CLIENTS: [...rules.clients],
                CLOSED_PORTS: [...rules.closedPorts],
                MARKER: rules.marker,
                REVISION: rules.revision,
            });
        this.rules = hostCommand(
            args.runner,
            name,
            // A node without its rules (rebooted) has a new revision: the rules are applied again.
            { connection: args.node.connection, create: program("apply"), delete: program("remove"), triggers: [rules.revision] },
            // The step was a child of the node before this component was: the same resource.
            { parent: this, aliases: opts?.parent ? [{ parent: opts.parent }] : [] },
        ).resource;
        this.registerOutputs({});
    }
}
