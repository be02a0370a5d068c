/**
 * The compile caches of the serving containers on each node (config `cache`, the plan's
 * infra/core/plan/cache.ts): the serving containers mount the node's directory for their image,
 * and a step per node, which they wait for, removes this stack's caches at `pulumi destroy` (after
 * every container that used them is gone) only when asked (`cache.removeOnDestroy`).
 */
import * as pulumi from "@pulumi/pulumi";
import { ContainerSpec } from "../infra/core/containerSpec";
import { CachePlan, withCompileCache } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram, shQuote } from "./shell";

/** The caches the serving containers of a service mount. */
export interface ServingCache {
    readonly plan: CachePlan;
    /** The content identity of the image on the nodes (one on every node: preflight), which keys the cache. */
    readonly imageIdentity: pulumi.Input<string | undefined>;
}

/** `spec` with the node's compile cache mounted, once the image's identity is known; `spec` itself without a cache. */
export function withServingCache(spec: pulumi.Output<ContainerSpec>, cache: ServingCache | undefined): pulumi.Output<ContainerSpec> {
    if (!cache) {
        return spec;
    }
    return pulumi.all([spec, cache.imageIdentity]).apply(([resolved, identity]) => withCompileCache(resolved, cache.plan, identity));
}

export interface CompileCacheArgs {
    /** The node whose caches these are. */
    readonly node: NodeAccess;
    /** The plan's cache (config `cache`, enabled). */
    readonly plan: CachePlan;
    readonly runner: CommandRunner;
}

/** The scripts of a removal step: dir-remove.sh after docker-state.sh (its one_line). */
export const DIR_REMOVE = ["docker-state", "dir-remove"];

/**
 * The stack's caches on one node, with the cache enabled: its step's delete removes them
 * (dir-remove.sh) only with `removeOnDestroy`, and keeps them otherwise. The step is there either
 * way, so that turning `removeOnDestroy` off changes its delete in place rather than deleting the
 * step, which would run the removal; with the cache turned off it goes, and removes only when asked.
 */
export class CompileCache extends pulumi.ComponentResource {
    /** The step the serving containers of the node wait for (so destroy removes them first). */
    public readonly step: pulumi.Resource;

    constructor(name: string, args: CompileCacheArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:node:CompileCache", name, {}, opts);
        const plan = args.plan;
        this.step = hostCommand(
            args.runner,
            name,
            {
                connection: args.node.connection,
                // Nothing to do at create: Docker makes each image's directory when a container mounts it.
                create: `echo ${shQuote(`compile caches in ${plan.stackDir}`)}`,
                delete: plan.removeOnDestroy
                    ? scriptProgram(DIR_REMOVE, { DIR: plan.stackDir, WHAT: "compile cache", IMAGE: plan.image })
                    : `echo ${shQuote(`compile caches kept in ${plan.stackDir} (cache.removeOnDestroy is false)`)}`,
            },
            { parent: this },
        ).resource;
        this.registerOutputs({});
    }
}
