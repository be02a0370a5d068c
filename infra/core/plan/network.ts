/**
 * The network of one node as its serving containers see it: the pins to the fabric, the variables
 * that stay each node's own, and what the fabric check does when NCCL chose TCP. Pure.
 */
import { FleetConfig } from "../config";
import { FabricFacts } from "../fabric";
import { PlannedNode } from "./nodes";

/**
 * The network pins of one node, each read by the component named:
 * - VLLM_HOST_IP: vLLM's own address (vllm.utils get_ip), what its workers and mp ranks advertise;
 *   Ray's address is pinned by `ray start --node-ip-address` (Ray reads no variable for it).
 * - NCCL_SOCKET_IFNAME: NCCL's bootstrap and, without RoCE, its TCP transport.
 * - GLOO_SOCKET_IFNAME: torch.distributed's Gloo groups (vLLM's CPU-side process groups).
 * - NCCL_IB_HCA: the RoCE devices of the fabric port only (facts.ts fabricHcas), never those of
 *   ports cabled elsewhere; with none, NCCL_IB_DISABLE keeps NCCL off every other port's devices.
 * - NCCL_DEBUG=INFO for INIT,NET: NCCL's start-up lines, where each rank names the transport it
 *   chose (`Using network IB|Socket`), which the fabric check reads (vllmService.ts).
 */
export function networkEnv(fabric: FabricFacts): Record<string, string> {
    const env: Record<string, string> = {
        VLLM_HOST_IP: fabric.ip,
        NCCL_SOCKET_IFNAME: fabric.interface,
        GLOO_SOCKET_IFNAME: fabric.interface,
        NCCL_DEBUG: "INFO",
        NCCL_DEBUG_SUBSYS: "INIT,NET",
        // Ray's memory monitor kills workers while a large model loads into unified memory.
        RAY_memory_monitor_refresh_ms: "0",
        RAY_USAGE_STATS_ENABLED: "0",
        VLLM_NO_USAGE_STATS: "1",
    };
    if (fabric.hcas.length > 0) {
        env.NCCL_IB_HCA = fabric.hcas.join(",");
    } else {
        env.NCCL_IB_DISABLE = "1";
    }
    return env;
}

/**
 * The variables of {@link networkEnv} that differ from node to node. vLLM's Ray executor copies the
 * driver's VLLM_*, NCCL_* and UCX_* variables (newer versions: nearly all) to its workers on every
 * node, overwriting theirs, unless they are listed in `$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json`
 * (vllm/ray/ray_env.py): the Ray head lists these there (vllm-start.sh), so each rank keeps its own.
 */
export const NODE_LOCAL_ENV = ["VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE"] as const;

/**
 * What the fabric check does when a node's NCCL chose TCP sockets: `refuse` or `warn`. By default
 * (fabric.socketTransport auto) it refuses where the fabric port has RoCE devices, which NCCL should
 * have used, and warns where it has none (a plain Ethernet fabric).
 */
export function transportPolicy(config: Pick<FleetConfig, "fabric">, node: PlannedNode): "refuse" | "warn" {
    const policy = config.fabric.socketTransport;
    if (policy !== "auto") {
        return policy;
    }
    return node.fabric.hcas.length > 0 ? "refuse" : "warn";
}

/** Why a node's NCCL may have fallen back to TCP, from its facts, for the fabric check's message. */
export function transportHint(config: Pick<FleetConfig, "container">, node: PlannedNode): string {
    const { fabric } = node;
    if (fabric.hcas.length === 0) {
        return `the fabric interface ${fabric.interface} has no RoCE device (ibdev2netdev shows none Up on its port)`;
    }
    if (config.container.privileged) {
        return `the containers run privileged with NCCL_IB_HCA=${fabric.hcas.join(",")}; check the RoCE link with ibv_devinfo on the node`;
    }
    if (fabric.rdmaDevices.length === 0) {
        return `the node shows RoCE devices (${fabric.hcas.join(", ")}) but no RDMA device nodes in /dev/infiniband, so the containers got none; load the ib_uverbs and rdma_ucm modules (rdma-core)`;
    }
    return `the containers have ${fabric.rdmaDevices.join(", ")}, CAP_IPC_LOCK and NCCL_IB_HCA=${fabric.hcas.join(",")}; check the RoCE link with ibv_devinfo on the node`;
}
