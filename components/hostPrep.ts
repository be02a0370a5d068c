/**
 * The preparation of a node before its serving containers start (hostPrep, off by default): the
 * page cache dropped (components/scripts/drop-caches.sh), as NVIDIA's DGX Spark playbook does before
 * a load. Runs once the nodes passed preflight, and again only when the serving containers are
 * (re)created (the plan's trigger, infra/core/plan/hostPrep.ts), never on an `up` with nothing to do.
 */
import * as pulumi from "@pulumi/pulumi";
import { HostPrepPlan } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface HostPrepArgs {
    readonly node: NodeAccess;
    /** The node's preparation (infra/core/plan/hostPrep.ts). */
    readonly plan: HostPrepPlan;
    /** Resolves once the nodes passed preflight: nothing is done to the host before. */
    readonly gate: pulumi.Input<unknown>;
    readonly runner: CommandRunner;
}

/** A node's preparation; the serving containers start after {@link HostPrep.step}. */
export class HostPrep extends pulumi.ComponentResource {
    /** The step that prepares the node. */
    public readonly step: pulumi.Resource;

    constructor(name: string, args: HostPrepArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:node:HostPrep", name, {}, opts);
        const program = pulumi.all([args.gate, scriptProgram("drop-caches")]).apply(([, text]) => text);
        this.step = hostCommand(
            args.runner,
            name,
            // Only on create: a new trigger (serving containers recreated) replaces the step, which drops again.
            { connection: args.node.connection, create: program, triggers: [args.plan.trigger] },
            { parent: this },
        ).resource;
        this.registerOutputs({});
    }
}
