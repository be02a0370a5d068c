/**
 * A swap that stops the old service first (infra/core/plan/swaps.ts): a step on each node of the
 * service that leaves the config, which the new service's serving containers wait for, stops the old
 * one's containers there (swap-stop.sh). Its delete does nothing: the old service's own resources,
 * deleted at the end of the up, remove its containers, and the step goes with the next up (the read
 * then finds nothing of the old service running).
 */
import * as pulumi from "@pulumi/pulumi";
import { SwapStop } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface SwapStopArgs {
    /** The node the old service's containers run on. */
    readonly node: NodeAccess;
    /** What to stop there. */
    readonly stop: SwapStop;
    readonly runner: CommandRunner;
}

export class SwapStopStep extends pulumi.ComponentResource {
    /** The step the new service's containers wait for. */
    public readonly step: pulumi.Resource;

    constructor(name: string, args: SwapStopArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:swap:SwapStop", name, {}, opts);
        this.step = hostCommand(
            args.runner,
            name,
            { connection: args.node.connection, create: scriptProgram(["docker-state", "swap-stop"], { NAMES: [...args.stop.containers] }) },
            { parent: this },
        ).resource;
        this.registerOutputs({});
    }
}
