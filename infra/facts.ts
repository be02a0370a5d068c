/**
 * Node facts: parsing what the probe (components/scripts/probe.sh) prints on a host, and the
 * preflight checks that refuse to go on, each naming the node and the fact.
 *
 * Pure and tested against outputs of real DGX Sparks (test/fixtures). Facts, not guesses: the fabric
 * interface is the one holding an address in the configured fabric subnet, never the default route.
 */
import { Cidr, cidrContains, parseCidr } from "./config";
import { FleetError } from "./errors";

/** One network interface and its IPv4 addresses. */
export interface InterfaceFacts {
    readonly name: string;
    readonly up: boolean;
    readonly addresses: readonly { readonly ip: string; readonly prefix: number }[];
}

/** A RoCE/InfiniBand device as `ibdev2netdev` shows it. */
export interface HcaFacts {
    readonly device: string;
    readonly port: number;
    readonly netdev: string;
    readonly up: boolean;
}

/** A GPU as `nvidia-smi --query-gpu` shows it. */
export interface GpuFacts {
    readonly index: number;
    readonly name: string;
    /** Undefined where the driver reports "[N/A]" / "Not Supported" (GB10's unified memory). */
    readonly memoryMiB?: number;
}

/** What the probe learned about one node. */
export interface NodeFacts {
    readonly hostname: string;
    readonly gpus: readonly GpuFacts[];
    readonly driverVersion?: string;
    readonly cudaVersion?: string;
    /** MemTotal and MemAvailable of /proc/meminfo, bytes. */
    readonly memTotalBytes: number;
    readonly memAvailableBytes: number;
    readonly interfaces: readonly InterfaceFacts[];
    readonly hcas: readonly HcaFacts[];
    /** The RDMA device nodes (/dev/infiniband/*: uverbsN, rdma_cm, ...) a container needs for RoCE. */
    readonly rdmaDevices: readonly string[];
    readonly dockerVersion?: string;
    /** `docker image inspect` id of the configured image on this node, if present. */
    readonly imageId?: string;
    readonly model: ModelDirFacts;
}

/** The model directory on a node. */
export interface ModelDirFacts {
    readonly exists: boolean;
    /** Regular files directly in the directory, sorted by name. */
    readonly files: readonly { readonly name: string; readonly bytes: number }[];
    readonly totalBytes: number;
    /** sha256 of config.json, when present. */
    readonly configSha256?: string;
    /** The text of config.json, when present (for the fit planner). */
    readonly configJson?: string;
}

/** Splits probe output into its `### section` blocks. */
export function splitSections(output: string): Map<string, string> {
    const sections = new Map<string, string>();
    let current: string | undefined;
    let lines: string[] = [];
    const flush = () => {
        if (current !== undefined) {
            sections.set(current, lines.join("\n").trim());
        }
    };
    for (const line of output.split("\n")) {
        const header = /^### ([a-z0-9-]+)$/.exec(line.trimEnd());
        if (header) {
            flush();
            current = header[1];
            lines = [];
        } else if (current !== undefined) {
            lines.push(line);
        }
    }
    flush();
    return sections;
}

function isNotAvailable(field: string): boolean {
    return /^\[?N\/A\]?$|^Not Supported$|^\[Not Supported\]$/i.test(field.trim());
}

/**
 * Parses `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`
 * (extra columns are ignored; `#` comment lines too).
 */
export function parseGpuQuery(csv: string): GpuFacts[] {
    return csv
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => line !== "" && !line.startsWith("#"))
        .map((line) => {
            const [index, name, memory] = line.split(",").map((field) => field.trim());
            const memoryMiB = memory === undefined || isNotAvailable(memory) ? undefined : Number(memory);
            return { index: Number(index), name, memoryMiB: Number.isFinite(memoryMiB) ? memoryMiB : undefined };
        })
        .filter((gpu) => Number.isInteger(gpu.index) && gpu.name !== undefined && gpu.name !== "");
}

/** Reads driver and CUDA versions from the header of plain `nvidia-smi`. */
export function parseSmiHeader(text: string): { driverVersion?: string; cudaVersion?: string } {
    return {
        driverVersion: /Driver Version:\s*([0-9][0-9.]*)/.exec(text)?.[1],
        cudaVersion: /CUDA Version:\s*([0-9][0-9.]*)/.exec(text)?.[1],
    };
}

/** Parses `ibdev2netdev` lines: `rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`. */
export function parseIbdev2netdev(text: string): HcaFacts[] {
    const hcas: HcaFacts[] = [];
    for (const line of text.split("\n")) {
        const match = /^(\S+) port (\d+) ==> (\S+) \((Up|Down)\)/.exec(line.trim());
        if (match) {
            hcas.push({ device: match[1], port: Number(match[2]), netdev: match[3], up: match[4] === "Up" });
        }
    }
    return hcas;
}

/** Parses the probe's list of RDMA device nodes: one absolute path under /dev/infiniband per line. */
export function parseRdmaDevices(text: string): string[] {
    return text
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => /^\/dev\/infiniband\/[A-Za-z0-9_.-]+$/.test(line))
        .sort();
}

/**
 * The PCI signature of a netdev named by systemd's scheme, without its PCI domain: a GB10 reaches
 * its ConnectX-7 over two PCIe links, so each cabled port shows twice, `enp1s0f1np1` and
 * `enP2p1s0f1np1` (domain 2), with one RoCE device each (`rocep1s0f1`, `roceP2p1s0f1`).
 */
function portSignature(netdev: string): string | undefined {
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

/** Parses the text form of `ip addr` / `ip -4 addr show` (IPv4 addresses only). */
export function parseIpAddr(text: string): InterfaceFacts[] {
    const interfaces: { name: string; up: boolean; addresses: { ip: string; prefix: number }[] }[] = [];
    for (const line of text.split("\n")) {
        const link = /^\d+:\s+([^:@\s]+)(@\S+)?:\s+<([^>]*)>/.exec(line);
        if (link) {
            interfaces.push({ name: link[1], up: link[3].split(",").includes("UP"), addresses: [] });
            continue;
        }
        const inet = /^\s+inet\s+([0-9.]+)\/(\d+)/.exec(line);
        if (inet && interfaces.length > 0) {
            interfaces[interfaces.length - 1].addresses.push({ ip: inet[1], prefix: Number(inet[2]) });
        }
    }
    return interfaces;
}

/** Reads `MemTotal` and `MemAvailable` (kB) from /proc/meminfo, in bytes. */
export function parseMeminfo(text: string): { memTotalBytes: number; memAvailableBytes: number } {
    const field = (name: string) => {
        const match = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text);
        return match ? Number(match[1]) * 1024 : 0;
    };
    return { memTotalBytes: field("MemTotal"), memAvailableBytes: field("MemAvailable") };
}

/** Parses the model section: `exists yes|no`, `config-sha256 <hex>`, then `<bytes> <name>` lines. */
export function parseModelDir(text: string): ModelDirFacts {
    const lines = text.split("\n").map((line) => line.trim());
    const exists = lines.includes("exists yes");
    const configSha256 = lines.find((line) => line.startsWith("config-sha256 "))?.split(" ")[1];
    const files = lines
        .map((line) => /^(\d+) (.+)$/.exec(line))
        .filter((match): match is RegExpExecArray => match !== null)
        .map((match) => ({ name: match[2], bytes: Number(match[1]) }))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { exists, files, totalBytes: files.reduce((sum, file) => sum + file.bytes, 0), configSha256 };
}

/** Turns the whole probe output of a node into {@link NodeFacts}. */
export function parseProbeOutput(output: string): NodeFacts {
    const sections = splitSections(output);
    const get = (name: string) => sections.get(name) ?? "";
    const { driverVersion, cudaVersion } = parseSmiHeader(get("nvidia-smi"));
    const meminfo = parseMeminfo(get("meminfo"));
    return {
        hostname: get("hostname"),
        gpus: parseGpuQuery(get("nvidia-smi-query")),
        driverVersion,
        cudaVersion,
        ...meminfo,
        interfaces: parseIpAddr(get("ip-addr")),
        hcas: parseIbdev2netdev(get("ibdev2netdev")),
        rdmaDevices: parseRdmaDevices(get("rdma-devices")),
        dockerVersion: get("docker") || undefined,
        imageId: get("image") || undefined,
        model: { ...parseModelDir(get("model")), configJson: get("model-config") || undefined },
    };
}

/** The fabric attachment of a node: the interface and address inside the fabric subnet, and its HCAs. */
export interface FabricFacts {
    readonly interface: string;
    readonly ip: string;
    /** The RoCE devices of the fabric port (fabricHcas): NCCL_IB_HCA. */
    readonly hcas: readonly string[];
    /** The node's RDMA device nodes, given to the serving containers so NCCL can use RoCE. */
    readonly rdmaDevices: readonly string[];
}

/** A preflight finding that stops the deployment. */
export class PreflightError extends FleetError {
    constructor(message: string) {
        super(message);
    }
}

function describeInterfaces(interfaces: readonly InterfaceFacts[]): string {
    const listed = interfaces
        .filter((iface) => iface.name !== "lo")
        .map((iface) => `${iface.name} ${iface.addresses.map((a) => `${a.ip}/${a.prefix}`).join(",") || "(no IPv4)"}`);
    return listed.length > 0 ? listed.join("; ") : "no interfaces";
}

/** Finds the interface holding an address in `subnet`; refuses none or several. */
export function findFabric(node: string, facts: NodeFacts, subnet: string): FabricFacts {
    const block: Cidr | undefined = parseCidr(subnet);
    if (!block) {
        throw new PreflightError(`fabric subnet ${subnet} is not an IPv4 CIDR block`);
    }
    const matches = facts.interfaces.flatMap((iface) =>
        iface.addresses.filter((address) => cidrContains(block, address.ip)).map((address) => ({ iface, address })),
    );
    if (matches.length === 0) {
        throw new PreflightError(
            `node ${node}: no interface has an address in the fabric subnet ${subnet}; it has: ${describeInterfaces(facts.interfaces)}`,
        );
    }
    if (matches.length > 1) {
        throw new PreflightError(
            `node ${node}: more than one address in the fabric subnet ${subnet} (${matches
                .map((m) => `${m.iface.name} ${m.address.ip}`)
                .join(", ")}); NCCL and Ray need exactly one`,
        );
    }
    const { iface, address } = matches[0];
    if (!iface.up) {
        throw new PreflightError(`node ${node}: fabric interface ${iface.name} (${address.ip}) is down`);
    }
    return { interface: iface.name, ip: address.ip, hcas: fabricHcas(facts.hcas, iface.name), rdmaDevices: facts.rdmaDevices };
}

/**
 * The first difference between two model directories (file names, sizes, config.json content), or
 * undefined when they match. Used to refuse nodes whose weights differ from node 0's.
 */
export function firstModelDifference(reference: ModelDirFacts, other: ModelDirFacts): string | undefined {
    const theirs = new Map(other.files.map((file) => [file.name, file.bytes]));
    const ours = new Map(reference.files.map((file) => [file.name, file.bytes]));
    const names = [...new Set([...ours.keys(), ...theirs.keys()])].sort();
    for (const name of names) {
        const want = ours.get(name);
        const have = theirs.get(name);
        if (have === undefined) {
            return `${name} is missing`;
        }
        if (want === undefined) {
            return `${name} is extra`;
        }
        if (want !== have) {
            return `${name} has ${have} bytes, not ${want}`;
        }
    }
    if (reference.configSha256 !== other.configSha256) {
        return "config.json has other content";
    }
    return undefined;
}

/** Everything preflight needs to compare across nodes. */
export interface PreflightInput {
    readonly name: string;
    readonly facts: NodeFacts;
}

/**
 * Cross-node checks: the image present with one id everywhere, the model directory present,
 * enough GPUs for TP×PP, and matching driver / CUDA major versions. Throws naming node and fact.
 */
export function preflight(
    nodes: readonly PreflightInput[],
    options: { readonly image: string; readonly modelPath: string; readonly gpusNeeded: number },
): void {
    const problems: string[] = [];
    for (const { name, facts } of nodes) {
        if (!facts.dockerVersion) {
            problems.push(`node ${name}: Docker does not answer (is the user in the docker group?)`);
        }
        if (!facts.imageId) {
            problems.push(`node ${name}: image ${options.image} is not present (docker image inspect found nothing)`);
        }
        if (!facts.model.exists) {
            problems.push(`node ${name}: model directory ${options.modelPath} does not exist`);
        } else if (!facts.model.files.some((file) => file.name === "config.json")) {
            problems.push(`node ${name}: model directory ${options.modelPath} has no config.json`);
        }
    }
    const reference = nodes[0];
    for (const { name, facts } of nodes.slice(1)) {
        if (reference && reference.facts.model.exists && facts.model.exists) {
            const difference = firstModelDifference(reference.facts.model, facts.model);
            if (difference) {
                problems.push(`node ${name}: model directory ${options.modelPath} differs from ${reference.name}'s: ${difference}`);
            }
        }
    }
    const ids = new Map<string, string[]>();
    for (const { name, facts } of nodes) {
        if (facts.imageId) {
            ids.set(facts.imageId, [...(ids.get(facts.imageId) ?? []), name]);
        }
    }
    if (ids.size > 1) {
        problems.push(
            `image ${options.image} differs across nodes: ${[...ids.entries()]
                .map(([id, names]) => `${names.join(", ")} have ${id.replace(/^sha256:/, "").slice(0, 12)}`)
                .join("; ")}`,
        );
    }
    const gpus = nodes.reduce((sum, node) => sum + node.facts.gpus.length, 0);
    if (gpus < options.gpusNeeded) {
        problems.push(
            `TP×PP needs ${options.gpusNeeded} GPUs but the nodes have ${gpus} (${nodes
                .map((node) => `${node.name}: ${node.facts.gpus.length}`)
                .join(", ")})`,
        );
    }
    for (const [label, pick] of [
        ["driver", (facts: NodeFacts) => facts.driverVersion],
        ["CUDA", (facts: NodeFacts) => facts.cudaVersion],
    ] as const) {
        const majors = new Map<string, string[]>();
        for (const { name, facts } of nodes) {
            const version = pick(facts);
            if (version) {
                const major = version.split(".")[0];
                majors.set(major, [...(majors.get(major) ?? []), `${name} ${version}`]);
            }
        }
        if (majors.size > 1) {
            problems.push(`${label} major versions differ across nodes: ${[...majors.values()].flat().join(", ")}`);
        }
    }
    if (problems.length > 0) {
        throw new PreflightError(`preflight failed:\n  - ${problems.join("\n  - ")}`);
    }
}

/**
 * Usable memory of a node for vLLM, bytes: the GPU's own memory where the driver reports it, else
 * (GB10 unified memory reports "Not Supported") MemTotal less a reserve for the OS.
 */
export function usableMemoryBytes(facts: NodeFacts, gpuMemoryUtilization: number, osReserveBytes = 8 * 1024 ** 3): number {
    const reported = facts.gpus[0]?.memoryMiB;
    const total = reported !== undefined ? reported * 1024 ** 2 : Math.max(0, facts.memTotalBytes - osReserveBytes);
    return Math.floor(total * gpuMemoryUtilization);
}
