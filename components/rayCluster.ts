/**
 * A Ray cluster across a service's nodes (`ray` executor): a head container on the first node and a
 * worker container on each other node, each pinned to its node's fabric address (the specs come
 * from the plan, infra/core/plan). Ready only when Ray itself reports every node under its fabric
 * address and every GPU.
 */
import * as pulumi from "@pulumi/pulumi";
import { RayPlan, joinedTo, withEnv } from "../infra/core/plan";
import { ServingCache, withServingCache } from "./compileCache";
import { ServingKeyCheck, realizeContainer, withServingKeyCheck } from "./container";
import { ComponentError } from "./errors";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface RayClusterArgs {
    /** The nodes, in the plan's order; the first one is the head. */
    readonly nodes: readonly NodeAccess[];
    /** The cluster as planned: containers, head address, what readiness means. */
    readonly plan: RayPlan;
    /** Resolves once the nodes passed preflight: no container starts before. */
    readonly gate: pulumi.Input<unknown>;
    /** The cluster's token (Ray token authentication), a secret: every node and every driver uses it. */
    readonly rayToken: pulumi.Output<string>;
    readonly runner: CommandRunner;
    readonly containerDriver: "docker" | "ssh";
    /** What must be done before the head container starts (the check of the serve arguments, the firewall). */
    readonly after?: readonly pulumi.Resource[];
    /** The compile caches every Ray container mounts (config `cache`); none: caches die with the containers. */
    readonly cache?: ServingCache;
    /** The key check of every route, carried by the head, where `vllm serve` runs (with an API key). */
    readonly keyCheck?: ServingKeyCheck;
}

export class RayCluster extends pulumi.ComponentResource {
    /** `fabric-ip:port` of the head. */
    public readonly headAddress: pulumi.Output<string>;
    /** What the readiness gate saw: `ray-node <ip> <gpus>` lines and `ray-resources CPU=… GPU=…`. */
    public readonly status: pulumi.Output<string>;
    /** Changes whenever the cluster is rebuilt: what runs on it restarts then. */
    public readonly revision: pulumi.Output<string>;

    constructor(name: string, args: RayClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:ray:RayCluster", name, {}, opts);
        const { plan, nodes } = args;
        if (nodes.length === 0 || nodes.length !== plan.nodes.length) {
            throw new ComponentError(`a Ray cluster needs its nodes as planned (${plan.nodes.length}), got ${nodes.length}`, this);
        }
        this.headAddress = pulumi.output(plan.headAddress);
        const gated = pulumi.all([args.gate, args.rayToken]).apply(([, token]) => token);

        const joined: pulumi.Resource[] = [];
        const revisions: pulumi.Output<string>[] = [];
        let headContainerId: pulumi.Output<string> | undefined;
        nodes.forEach((node, index) => {
            const planned = plan.nodes[index];
            const role = index === 0 ? "head" : "worker";
            // A worker's spec holds its head's container id: it is created after the head's
            // `docker run` and replaced whenever the head is (containers.ts joinedTo); its
            // `ray start` retries the head while that boots, so the two still boot side by side.
            const spec = withServingCache(
                index === 0
                    ? withServingKeyCheck(
                          gated.apply((token) => withEnv(planned.spec, { RAY_AUTH_TOKEN: token })),
                          args.keyCheck,
                      )
                    : pulumi.all([gated, headContainerId!]).apply(([token, headId]) => joinedTo(withEnv(planned.spec, { RAY_AUTH_TOKEN: token }), planned.node, headId)),
                args.cache,
            );
            const container = realizeContainer(
                args.containerDriver,
                args.runner,
                `${name}-${node.nodeName}-ray-${role}`,
                node,
                spec,
                { parent: this, dependsOn: index === 0 ? [...(args.after ?? [])] : [] },
                // The join wait below watches the container.
                { removeFirst: plan.removeFirst, watchSeconds: 0 },
            );
            const join = hostCommand(
                args.runner,
                `${name}-${node.nodeName}-ray-joined`,
                {
                    connection: node.connection,
                    create: scriptProgram("ray-wait-node", { CONTAINER: plan.container, NODE_IP: planned.fabricIp, ADDRESS: plan.headAddress, TIMEOUT: plan.timeoutSeconds }),
                    triggers: [container.revision],
                },
                { parent: this, dependsOn: [container.resource] },
            );
            if (index === 0) {
                headContainerId = container.revision;
            }
            joined.push(join.resource);
            revisions.push(container.revision);
        });

        const gate = hostCommand(
            args.runner,
            `${name}-ready`,
            {
                connection: nodes[0].connection,
                create: scriptProgram("ray-ready", {
                    CONTAINER: plan.container,
                    ADDRESS: plan.headAddress,
                    EXPECTED_IPS: [...plan.expectedIps],
                    EXPECTED_GPUS: plan.expectedGpus,
                    TIMEOUT: plan.timeoutSeconds,
                }),
                triggers: revisions,
            },
            { parent: this, dependsOn: joined },
        );
        this.status = gate.stdout;
        this.revision = pulumi.all(revisions).apply((all) => all.join(","));
        this.registerOutputs({ headAddress: this.headAddress, status: this.status });
    }
}
