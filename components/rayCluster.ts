import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/core/config";
import { PlannedNode, RAY_CONTAINER, SERVING_CONTAINERS, gpusNeeded, rayContainerSpec } from "../infra/core/plan";
import { realizeContainer, servingContainerName } from "./container";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface RayClusterArgs {
    readonly config: FleetConfig;
    /** The stack name, put on every container as a label. */
    readonly stack: string;
    /** The nodes; the first one is the head. */
    readonly nodes: readonly SparkNode[];
    /** The nodes as planned (after preflight), see planFleet. */
    readonly planned: pulumi.Output<PlannedNode[]>;
    /** Each node's container revision, by node name (infra/core/observe.ts: a dead container gets a new one). */
    readonly revisions: Readonly<Record<string, string>>;
    /** The cluster's token (Ray token authentication), a secret: every node and every driver uses it. */
    readonly rayToken: pulumi.Output<string>;
    /** What must be done before the head container starts (the check of the serve arguments). */
    readonly after?: readonly pulumi.Resource[];
}

/**
 * A Ray cluster across the nodes: a head container on node 0 and a worker container on each other
 * node, built from one ContainerSpec each, every one pinned to its node's fabric address. Ready only
 * when Ray itself reports every node under its fabric address and every GPU.
 */
export class RayCluster extends pulumi.ComponentResource {
    /** `fabric-ip:port` of the head. */
    public readonly headAddress: pulumi.Output<string>;
    /** What the readiness gate saw: `ray-node <ip> <gpus>` lines and `ray-resources CPU=… GPU=…`. */
    public readonly status: pulumi.Output<string>;
    /** Changes whenever the cluster is rebuilt: what runs on it restarts then. */
    public readonly revision: pulumi.Output<string>;

    constructor(name: string, args: RayClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:ray:RayCluster", name, {}, opts);
        const { config, nodes } = args;
        if (nodes.length === 0) {
            throw new Error("a Ray cluster needs at least one node");
        }

        const planned = args.planned;
        const headIp = planned.apply((list) => list[0].fabric.ip);
        this.headAddress = pulumi.interpolate`${headIp}:${config.ray.port}`;

        const joined: pulumi.Resource[] = [];
        const revisions: pulumi.Output<string>[] = [];
        let headContainerId: pulumi.Output<string> | undefined;
        nodes.forEach((node, index) => {
            const spec =
                index === 0
                    ? pulumi.all([planned, args.rayToken]).apply(([list, token]) => rayContainerSpec(config, args.stack, list, 0, args.revisions[node.nodeName], token))
                    : pulumi
                          .all([planned, args.rayToken, headContainerId!])
                          .apply(([list, token, headId]) => rayContainerSpec(config, args.stack, list, index, args.revisions[node.nodeName], token, headId));
            // A worker's spec holds its head's container id: it is created after the head's
            // `docker run` and replaced whenever the head is (see rayContainerSpec); its `ray start`
            // retries the head while that boots, so the two still boot side by side.
            const container = realizeContainer(
                config.containerDriver,
                config.commandRunner,
                servingContainerName("ray", node.nodeName, index),
                node,
                spec,
                { parent: this, dependsOn: index === 0 ? [...(args.after ?? [])] : [] },
                // The join wait below watches the container.
                { removeFirst: SERVING_CONTAINERS, watchSeconds: 0 },
            );
            const join = hostCommand(
                config.commandRunner,
                `${name}-${node.nodeName}-ray-joined`,
                {
                    connection: node.connection,
                    create: pulumi.all([planned, this.headAddress]).apply(([list, address]) =>
                        scriptProgram("ray-wait-node", {
                            CONTAINER: RAY_CONTAINER,
                            NODE_IP: list[index].fabric.ip,
                            ADDRESS: address,
                            TIMEOUT: config.timeouts.rayReadySeconds,
                        }),
                    ),
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
            config.commandRunner,
            `${name}-ready`,
            {
                connection: nodes[0].connection,
                create: pulumi.all([planned, this.headAddress]).apply(([list, address]) =>
                    scriptProgram("ray-ready", {
                        CONTAINER: RAY_CONTAINER,
                        ADDRESS: address,
                        EXPECTED_IPS: list.map((node) => node.fabric.ip),
                        EXPECTED_GPUS: gpusNeeded(config),
                        TIMEOUT: config.timeouts.rayReadySeconds,
                    }),
                ),
                triggers: revisions,
            },
            { parent: this, dependsOn: joined },
        );
        this.status = gate.stdout;
        this.revision = pulumi.all(revisions).apply((all) => all.join(","));
        this.registerOutputs({ headAddress: this.headAddress, status: this.status });
    }
}
