/**
 * A swap that stops the old service first (infra/core/plan/swaps.ts): a step on each node of the
 * service that leaves the config, which the new service's serving containers wait for, stops the old
 * one's containers there (swap-stop.sh). Its delete does nothing: the old service's own resources,
 * deleted at the end of the up, remove its containers, and the step goes with the next up (the read
 * then finds nothing of the old service running).
 */
import * as pulumi from "@pulumi/pulumi";
import { SwapPlan, SwapStop } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface SwapStopArgs {
    /** The node the old service's containers run on. */
    readonly node: NodeAccess;
    /** What to stop there. */
    readonly stop: SwapStop;
    readonly runner: CommandRunner;
    /** Steps to finish first (the old service's stop on its first node). */
    readonly after?: readonly pulumi.Resource[];
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
            { parent: this, dependsOn: [...(args.after ?? [])] },
        ).resource;
        this.registerOutputs({});
    }
}

/**
 * The stops each new service waits for (`plan.stopsBefore`), by service name: one step per leaving
 * service and node, made once and shared by the new services that wait for it.
 */
export function swapStops(plan: SwapPlan, nodeOf: (node: string) => NodeAccess & pulumi.Resource, runner: CommandRunner): (service: string) => pulumi.Resource[] {
    const steps = new Map<string, pulumi.Resource>();
    return (service) => {
        const stops = plan.stopsBefore[service] ?? [];
        return stops.map((stop) => {
            const name = `${stop.node}-${stop.service}-swap-stop`;
            if (!steps.has(name)) {
                const node = nodeOf(stop.node);
                // The other nodes after the first (its watchdog would restart what they stop meanwhile).
                const first = stops.find((other) => other.service === stop.service);
                const after = first && first !== stop ? [steps.get(`${first.node}-${first.service}-swap-stop`)!] : [];
                steps.set(name, new SwapStopStep(name, { node, stop, runner, after }, { parent: node }).step);
            }
            return steps.get(name)!;
        });
    };
}
