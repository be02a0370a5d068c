/**
 * A node's fabric attachment, from its facts: the interface holding an address in the fabric
 * subnet, that address, the RoCE devices of its port and the node's RDMA device nodes. Found once
 * per node and run (plan/nodes.ts); never guessed. Pure.
 */
import { Cidr, cidrContains } from "./net";
import { PreflightError } from "./errors";
import { HcaFacts, InterfaceFacts, NodeFacts } from "./facts";

/**
 * The PCI signature of a netdev named by systemd's scheme, without its PCI domain: a GB10 reaches
 * its ConnectX-7 over two PCIe links, so each cabled port shows twice, `enp1s0f1np1` and
 * `enP2p1s0f1np1` (domain 2), with one RoCE device each (`rocep1s0f1`, `roceP2p1s0f1`).
 */
export function portSignature(netdev: string): string | undefined {
    return /^en(?:P\d+)?(p\d+s\d+f\d+(?:np\d+)?)$/.exec(netdev)?.[1];
}

/**
 * The RoCE devices of the fabric interface: its own, and its twin's on the same cable (the same port
 * behind the other PCIe link) when that one is Up. Devices of other ports are left out: they may be
 * cabled to another network.
 */
export function fabricHcas(hcas: readonly HcaFacts[], fabricInterface: string): string[] {
    const signature = portSignature(fabricInterface);
    return hcas
        .filter((hca) => hca.up)
        .filter((hca) => hca.netdev === fabricInterface || (signature !== undefined && portSignature(hca.netdev) === signature))
        .map((hca) => hca.device);
}


export interface FabricFacts {
    readonly interface: string;
    readonly ip: string;
    /** The RoCE devices of the fabric port (fabricHcas): NCCL_IB_HCA. */
    readonly hcas: readonly string[];
    /** The node's RDMA device nodes, given to the serving containers so NCCL can use RoCE. */
    readonly rdmaDevices: readonly string[];
}

function describeInterfaces(interfaces: readonly InterfaceFacts[]): string {
    const listed = interfaces
        .filter((iface) => iface.name !== "lo")
        .map((iface) => `${iface.name} ${iface.addresses.map((a) => `${a.ip}/${a.prefix}`).join(",") || "(no IPv4)"}`);
    return listed.length > 0 ? listed.join("; ") : "no interfaces";
}

/**
 * Finds the interface holding an address in `subnet`; refuses none or several, and a fabric interface
 * that is down, each refusal saying what was expected and what to change (`vllm-fleet:fabric.subnet`,
 * or the node).
 */
export function findFabric(node: string, facts: NodeFacts, block: Cidr): FabricFacts {
    const subnet = block.cidr;
    const matches = facts.interfaces.flatMap((iface) =>
        iface.addresses.filter((address) => cidrContains(block, address.ip)).map((address) => ({ iface, address })),
    );
    if (matches.length === 0) {
        throw new PreflightError(
            `node ${node}: no interface has an address in the fabric subnet ${subnet}; it has: ${describeInterfaces(facts.interfaces)}; ` +
                `expected one address in it on every node: set vllm-fleet:fabric.subnet to the subnet of the nodes' fabric link, or give this node's fabric interface an address in ${subnet}`,
        );
    }
    if (matches.length > 1) {
        throw new PreflightError(
            `node ${node}: more than one address in the fabric subnet ${subnet} (${matches
                .map((m) => `${m.iface.name} ${m.address.ip}`)
                .join(", ")}); NCCL and Ray need exactly one; ` +
                `expected one per node: remove the others on the node, or set vllm-fleet:fabric.subnet to a block that holds one address of each node`,
        );
    }
    const { iface, address } = matches[0];
    if (!iface.up) {
        throw new PreflightError(
            `node ${node}: fabric interface ${iface.name} (${address.ip}) is down; the fix is on the node: bring it up (ip link set ${iface.name} up) and check its cable`,
        );
    }
    return { interface: iface.name, ip: address.ip, hcas: fabricHcas(facts.hcas, iface.name), rdmaDevices: facts.rdmaDevices };
}

