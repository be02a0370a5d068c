/**
 * The nodes as the plan sees them: each one's fabric attachment, found once per run from the facts
 * the read at its start found (fabric.ts), and its GPUs. Pure.
 */
import { FleetConfig } from "../config";
import { FabricFacts, findFabric } from "../fabric";
import { NodeFacts } from "../facts";

/** One node as the plan sees it. */
export interface PlannedNode {
    readonly name: string;
    readonly fabric: FabricFacts;
    readonly gpus: number;
}

/** A node and what the read at the start of the run found there. */
export interface ObservedNode {
    readonly name: string;
    readonly facts: NodeFacts;
}

/**
 * Each node's fabric attachment and GPUs; refuses a node with no address (or several) in the
 * fabric subnet, or whose fabric interface is down, naming it.
 */
export function planNodes(config: Pick<FleetConfig, "fabric">, nodes: readonly ObservedNode[]): PlannedNode[] {
    return nodes.map((node) => ({ name: node.name, fabric: findFabric(node.name, node.facts, config.fabric.cidr), gpus: node.facts.gpus.length }));
}

/** GPUs needed by the parallelism: TP × PP. */
export function gpusNeeded(config: Pick<FleetConfig, "parallelism">): number {
    return config.parallelism.tensor * config.parallelism.pipeline;
}

/**
 * What the nodes' fabric attachments warn about: RoCE devices without the RDMA device nodes the
 * serving containers would need (unless they run privileged), which makes NCCL fall back to TCP.
 */
export function fabricWarnings(config: Pick<FleetConfig, "container">, nodes: readonly PlannedNode[]): string[] {
    return nodes
        .filter((node) => node.fabric.hcas.length > 0 && node.fabric.rdmaDevices.length === 0 && !config.container.privileged)
        .map(
            (node) =>
                `node ${node.name}: RoCE devices ${node.fabric.hcas.join(", ")} but no RDMA device nodes in /dev/infiniband: its NCCL will fall back to TCP sockets (load ib_uverbs and rdma_ucm)`,
        );
}
