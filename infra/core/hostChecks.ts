/**
 * Host checks: what the read of the nodes at the start of every run (probe.sh, facts.ts) says about
 * a host that would make a deployment slow, stall or wedge, though it starts: the fabric's MTU, the
 * RoCE rails of its cable, a driver known bad for the GPU, memory held by others or by the page
 * cache before a load on unified memory, and no guard against a wedged host (no userspace OOM
 * killer, no swap). Each finding names the node, what was found, what is expected and why, and the
 * key that silences it (`vllm-fleet:hostChecks.<check>`: warn, refuse or off). Refusals stop the
 * run in the plan, before anything reaches a host. Pure.
 */
import { FleetConfig, HostCheckName, HostCheckPolicy } from "./config";
import { PreflightError } from "./errors";
import { portSignature } from "./fabric";
import { HcaFacts, NodeFacts } from "./facts";
import { formatGiB } from "./fit";

/** The MTU the fabric is expected to run (jumbo frames). */
export const FABRIC_MTU = 9000;

/** A driver release known bad for a GPU, and why. */
export interface KnownBadDriver {
    /** The driver's major version (`590` for 590.44.01). */
    readonly major: string;
    /** A text the GPU's name contains (`GB10`). */
    readonly gpu: string;
    readonly reason: string;
    /** What to install instead. */
    readonly instead: string;
}

/** Drivers known bad, by GPU. */
export const KNOWN_BAD_DRIVERS: readonly KnownBadDriver[] = [
    {
        major: "590",
        gpu: "GB10",
        reason: "GB10 users report vLLM deadlocking during CUDA-graph capture on 590 drivers (the load never ends)",
        instead: "580 (the release GB10 users stay on)",
    },
];

/** A node as the host checks see it. */
export interface HostCheckNode {
    readonly name: string;
    readonly facts: NodeFacts;
    /** Its fabric interface (fabric.ts). */
    readonly fabricInterface: string;
    /** This stack's serving container is alive there: the memory in use is its own (reconcile.ts). */
    readonly servingAlive: boolean;
    /**
     * What the services placed on it take of its memory together (the sum of their
     * gpu-memory-utilization); vllm.gpuMemoryUtilization when not given.
     */
    readonly gpuMemoryUtilization?: number;
}

/** One finding of a check on a node. */
export interface HostCheckFinding {
    readonly check: HostCheckName;
    readonly node: string;
    readonly policy: Exclude<HostCheckPolicy, "off">;
    readonly message: string;
}

type Settings = Pick<FleetConfig, "hostChecks" | "hostPrep" | "vllm">;

/** The key that sets a check, and how to silence it. */
function silence(check: HostCheckName, policy: HostCheckPolicy): string {
    return `or set vllm-fleet:hostChecks.${check} to ${policy === "refuse" ? "warn or off" : "off"}`;
}

/** The RoCE devices of the fabric interface's port: its own and its twin's (the same port behind the other PCIe link). */
export function fabricRails(hcas: readonly HcaFacts[], fabricInterface: string): HcaFacts[] {
    const signature = portSignature(fabricInterface);
    return hcas.filter((hca) => hca.netdev === fabricInterface || (signature !== undefined && portSignature(hca.netdev) === signature));
}

/** The MTU of an interface: /sys/class/net's (links), else the one `ip addr` shows. */
function mtuOf(facts: NodeFacts, name: string): number | undefined {
    return facts.links?.find((link) => link.name === name)?.mtu ?? facts.interfaces.find((iface) => iface.name === name)?.mtu;
}

function mtuFindings(node: HostCheckNode): string[] {
    const rails = fabricRails(node.facts.hcas, node.fabricInterface).filter((hca) => hca.up && hca.netdev !== node.fabricInterface);
    const names = [node.fabricInterface, ...new Set(rails.map((hca) => hca.netdev))];
    const low = names.flatMap((name) => {
        const mtu = mtuOf(node.facts, name);
        return mtu !== undefined && mtu < FABRIC_MTU ? [`${name} has MTU ${mtu}`] : [];
    });
    if (low.length === 0) {
        return [];
    }
    const set = names.map((name) => `ip link set ${name} mtu ${FABRIC_MTU}`).join("; ");
    return [
        `fabric ${low.join(", ")}; expected ${FABRIC_MTU} on the fabric (both ends of the cable): NCCL's all_gather reaches about 24 GB/s of bus bandwidth between two Sparks at MTU 9000 against 19-21 GB/s at 1500; ` +
            `the fix is on the nodes: ${set} (and in the interface's netplan, so it survives a reboot)`,
    ];
}

function railFindings(node: HostCheckNode): string[] {
    const down = fabricRails(node.facts.hcas, node.fabricInterface).filter((hca) => !hca.up);
    if (down.length === 0) {
        return [];
    }
    const listed = down.map((hca) => `${hca.device} (${hca.netdev})`).join(", ");
    return [
        `RoCE rail ${listed} of the fabric port is Down (ibdev2netdev); expected every rail of the cabled port Up: a GB10 reaches its ConnectX-7 over two PCIe links, so one cable shows as two ports, and NCCL spreads its traffic over the rails that are up (NCCL_IB_HCA); ` +
            `with one down it runs on half the links; the fix is on the node: bring the interface up (ip link set ${down[0].netdev} up, and in its netplan) and check the cable`,
    ];
}

function driverFindings(node: HostCheckNode): string[] {
    const version = node.facts.driverVersion;
    if (!version) {
        return [];
    }
    const major = version.split(".")[0];
    return node.facts.gpus.flatMap((gpu) =>
        KNOWN_BAD_DRIVERS.filter((bad) => bad.major === major && gpu.name.includes(bad.gpu))
            .slice(0, 1)
            .map(
                (bad) =>
                    `NVIDIA driver ${version} on ${gpu.name} is known bad: ${bad.reason}; expected a driver outside ${bad.major}.x: the fix is on the node: install ${bad.instead}`,
            ),
    ).slice(0, 1);
}

/**
 * What vLLM asks for at its start on a unified-memory node, and the words that say so; undefined where
 * the check does not apply: a GPU with memory of its own (not the host's), or a node where this
 * stack's serving container already runs (the memory is its own).
 */
function unifiedMemoryAsk(node: HostCheckNode, settings: Settings): { need: number; takes: string } | undefined {
    const { facts } = node;
    if (node.servingAlive || facts.gpus.length === 0 || facts.gpus[0].memoryMiB !== undefined || facts.memTotalBytes === 0) {
        return undefined;
    }
    const utilization = node.gpuMemoryUtilization ?? settings.vllm.gpuMemoryUtilization;
    // vLLM's own test at its start (v1/worker/utils.py request_memory; cpu_worker.py on its CPU build):
    // that fraction of the device's WHOLE memory (on GB10 CUDA's total is MemTotal) must be free.
    const need = Math.ceil(utilization * facts.memTotalBytes);
    const key = node.gpuMemoryUtilization === undefined ? "vllm-fleet:vllm.gpuMemoryUtilization" : "the services' gpu-memory-utilization together";
    return { need, takes: `the ${formatGiB(need)} vLLM asks for at its start (${key} ${utilization} × MemTotal ${formatGiB(facts.memTotalBytes)})` };
}

function memoryFindings(node: HostCheckNode, settings: Settings): string[] {
    const ask = unifiedMemoryAsk(node, settings);
    const { memAvailableBytes, memTotalBytes } = node.facts;
    if (ask === undefined || memAvailableBytes >= ask.need) {
        return [];
    }
    const fits = Math.floor((memAvailableBytes / memTotalBytes) * 100) / 100;
    return [
        `MemAvailable is ${formatGiB(memAvailableBytes)}, below ${ask.takes}; expected that much available before vLLM loads: on unified memory what other processes hold is gone for the GPU, ` +
            `so vLLM refuses to start ("Free memory on device (...) on startup is less than desired GPU memory utilization"; its CPU build: "Available memory on node ...") or the load runs into the OOM killer; ` +
            `stop what holds the memory there, or lower vllm-fleet:vllm.gpuMemoryUtilization${fits > 0 ? ` (at most ${fits} fits what is available now)` : ""}`,
    ];
}

function pageCacheFindings(node: HostCheckNode, settings: Settings): string[] {
    const ask = unifiedMemoryAsk(node, settings);
    const { memAvailableBytes, memFreeBytes, cachedBytes } = node.facts;
    // Below MemAvailable the memory check speaks; with the caches dropped before the start, nothing to say.
    if (ask === undefined || memAvailableBytes < ask.need || settings.hostPrep.dropCaches || memFreeBytes === undefined || memFreeBytes >= ask.need || !cachedBytes) {
        return [];
    }
    return [
        `the page cache holds ${formatGiB(cachedBytes)} and ${formatGiB(memFreeBytes)} are free, below ${ask.takes}; expected that much free before vLLM loads: on GB10's unified memory CUDA's free memory leaves out the page cache ` +
            `the kernel could reclaim, so vLLM may find too little at start; NVIDIA's DGX Spark playbook drops the caches before a load: set vllm-fleet:hostPrep.dropCaches to true (the drop before the serving containers start)`,
    ];
}

function oomGuardFindings(node: HostCheckNode): string[] {
    const { oomGuards, swapTotalBytes } = node.facts;
    // Not read (an older probe, or /proc/meminfo without SwapTotal): nothing to judge.
    if (oomGuards === undefined || swapTotalBytes === undefined || oomGuards.length > 0 || swapTotalBytes > 0) {
        return [];
    }
    return [
        `no userspace OOM killer runs (earlyoom, systemd-oomd or nohang) and there is no swap (SwapTotal 0); expected one of them: a load that overruns unified memory can wedge the whole host ` +
            `(SSH included) before the kernel's OOM killer acts; the fix is on the node: install and enable earlyoom (apt install earlyoom), or add swap`,
    ];
}

const CHECKS: readonly [HostCheckName, (node: HostCheckNode, settings: Settings) => string[]][] = [
    ["mtu", mtuFindings],
    ["rails", railFindings],
    ["driver", driverFindings],
    ["memory", memoryFindings],
    ["pageCache", pageCacheFindings],
    ["oomGuard", oomGuardFindings],
];

/** Every check that is not off, on every node: the findings, in node order then check order. */
export function hostChecks(settings: Settings, nodes: readonly HostCheckNode[]): HostCheckFinding[] {
    return nodes.flatMap((node) =>
        CHECKS.flatMap(([check, run]) => {
            const policy = settings.hostChecks[check];
            if (policy === "off") {
                return [];
            }
            return run(node, settings).map((text) => ({
                check,
                node: node.name,
                policy,
                message: `host check ${check}: node ${node.name}: ${text}; ${silence(check, policy)}`,
            }));
        }),
    );
}

/** A host check set to refuse fired: nothing starts. */
export class HostCheckError extends PreflightError {}

/**
 * Runs the host checks: returns the warnings (one line each), and throws {@link HostCheckError} with
 * every refusal, one line each, when a check set to refuse fired.
 */
export function enforceHostChecks(settings: Settings, nodes: readonly HostCheckNode[]): string[] {
    const findings = hostChecks(settings, nodes);
    const refusals = findings.filter((finding) => finding.policy === "refuse");
    if (refusals.length > 0) {
        throw new HostCheckError(`host checks refuse the nodes:\n  - ${refusals.map((finding) => finding.message).join("\n  - ")}`);
    }
    return findings.map((finding) => finding.message);
}
