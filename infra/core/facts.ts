/**
 * Node facts: parsing what the probe (components/scripts/probe.sh) prints on a host, and the
 * preflight checks that refuse to go on, each naming the node and the fact, what was expected and
 * the config key to change (or that the fix is on the node), as the config errors do.
 *
 * Pure and tested against outputs of real DGX Sparks (test/fixtures). Facts, not guesses: the fabric
 * interface is the one holding an address in the configured fabric subnet, never the default route.
 */
import { Cidr, cidrContains, parseCidr } from "./net";
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

/**
 * Finds the interface holding an address in `subnet`; refuses none or several, and a fabric interface
 * that is down, each refusal saying what was expected and what to change (`vllm-fleet:fabric.subnet`,
 * or the node).
 */
export function findFabric(node: string, facts: NodeFacts, subnet: string): FabricFacts {
    const block: Cidr | undefined = parseCidr(subnet);
    if (!block) {
        throw new PreflightError(
            `fabric subnet ${subnet} is not an IPv4 CIDR block; expected one such as 192.168.200.0/24 (no host bits set): set vllm-fleet:fabric.subnet`,
        );
    }
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

/** What preflight compares the nodes' facts with: the config they were read for. */
export interface PreflightOptions {
    /** vllm-fleet:image.name */
    readonly image: string;
    /** vllm-fleet:image.source; default `present`. */
    readonly imageSource?: "present" | "pull" | "copy";
    /** vllm-fleet:model.path */
    readonly modelPath: string;
    /** vllm-fleet:model.sync; default `none`. */
    readonly modelSync?: "none" | "rsync";
    /** TP×PP (vllm-fleet:parallelism.tensor × vllm-fleet:parallelism.pipeline). */
    readonly gpusNeeded: number;
}

/**
 * What to do when TP×PP needs more GPUs than the nodes have: the keys to lower, or nodes to add (and a
 * node that shows no GPU at all named: its driver is the suspect). Shared by preflight and the fit
 * planner, which refuse the same thing.
 */
export function gpuShortageRemedy(gpus: number, nodes: readonly { readonly name: string; readonly gpus: number }[]): string {
    const blind = nodes.filter((node) => node.gpus === 0).map((node) => node.name);
    return (
        `expected at most ${gpus} (the GPUs of the nodes): set vllm-fleet:parallelism.tensor × vllm-fleet:parallelism.pipeline to ${gpus} or less, ` +
        `or add nodes to vllm-fleet:nodes` +
        (blind.length > 0 ? ` (${blind.join(", ")} ${blind.length === 1 ? "shows" : "show"} no GPU: check the driver there, nvidia-smi)` : "")
    );
}

/**
 * Cross-node checks: Docker answering, the image present with one id everywhere, the model directory
 * present and the same everywhere, enough GPUs for TP×PP, and matching driver / CUDA major versions.
 * Throws naming node and fact, what was expected and the config key to change (or that the fix is on
 * the node), one line per problem.
 */
export function preflight(nodes: readonly PreflightInput[], options: PreflightOptions): void {
    const imageSource = options.imageSource ?? "present";
    const modelSync = options.modelSync ?? "none";
    const problems: string[] = [];
    nodes.forEach(({ name, facts }, index) => {
        if (!facts.dockerVersion) {
            problems.push(
                `node ${name}: Docker does not answer (is the user in the docker group?); the fix is on the node: start Docker there (systemctl start docker), or add the SSH user to the docker group`,
            );
        }
        if (!facts.imageId) {
            const remedy =
                imageSource === "present"
                    ? `expected it there with vllm-fleet:image.source present: pull or load it on the node, or set vllm-fleet:image.source to pull (every node pulls vllm-fleet:image.name) or copy (the first node's, to the others)`
                    : imageSource === "copy" && index === 0
                      ? `expected it on the first node, which vllm-fleet:image.source copy copies from: pull or load it there, or set vllm-fleet:image.source to pull`
                      : `expected it delivered by vllm-fleet:image.source ${imageSource}: check vllm-fleet:image.name`;
            problems.push(`node ${name}: image ${options.image} is not present (docker image inspect found nothing); ${remedy}`);
        }
        if (!facts.model.exists) {
            const remedy =
                index === 0
                    ? `expected the model's directory there: set vllm-fleet:model.path to where its config.json and *.safetensors are`
                    : modelSync === "rsync"
                      ? `expected vllm-fleet:model.sync rsync to have copied ${nodes[0].name}'s there: run up again`
                      : `expected a copy on every node with vllm-fleet:model.sync none: copy it there, or set vllm-fleet:model.sync to rsync (${nodes[0].name}'s, over the fabric), or correct vllm-fleet:model.path`;
            problems.push(`node ${name}: model directory ${options.modelPath} does not exist; ${remedy}`);
        } else if (!facts.model.files.some((file) => file.name === "config.json")) {
            problems.push(
                `node ${name}: model directory ${options.modelPath} has no config.json; expected a Hugging Face model's directory (config.json and *.safetensors): set vllm-fleet:model.path to it`,
            );
        }
    });
    const reference = nodes[0];
    for (const { name, facts } of nodes.slice(1)) {
        if (reference && reference.facts.model.exists && facts.model.exists) {
            const difference = firstModelDifference(reference.facts.model, facts.model);
            if (difference) {
                const remedy =
                    modelSync === "none"
                        ? `set vllm-fleet:model.sync to rsync (${reference.name}'s copied to the others), or make the copies equal`
                        : `run up again (vllm-fleet:model.sync rsync copies ${reference.name}'s again)`;
                problems.push(`node ${name}: model directory ${options.modelPath} differs from ${reference.name}'s: ${difference}; expected the same files as ${reference.name}'s: ${remedy}`);
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
        const remedy =
            imageSource === "pull"
                ? `pin vllm-fleet:image.name by digest (name@sha256:...) so that every node pulls the same image, or set vllm-fleet:image.source to copy (the first node's, to the others)`
                : imageSource === "copy"
                  ? `run up again (vllm-fleet:image.source copy copies the first node's where the id differs)`
                  : `set vllm-fleet:image.source to copy (the first node's, to the others), or to pull with vllm-fleet:image.name pinned by digest (name@sha256:...)`;
        problems.push(
            `image ${options.image} differs across nodes: ${[...ids.entries()]
                .map(([id, names]) => `${names.join(", ")} have ${id.replace(/^sha256:/, "").slice(0, 12)}`)
                .join("; ")}; expected one image id on every node: ${remedy}`,
        );
    }
    const gpus = nodes.reduce((sum, node) => sum + node.facts.gpus.length, 0);
    if (gpus < options.gpusNeeded) {
        const counts = nodes.map((node) => ({ name: node.name, gpus: node.facts.gpus.length }));
        problems.push(
            `TP×PP needs ${options.gpusNeeded} GPUs but the nodes have ${gpus} (${counts.map((node) => `${node.name}: ${node.gpus}`).join(", ")}); ` +
                gpuShortageRemedy(gpus, counts),
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
            problems.push(
                `${label} major versions differ across nodes: ${[...majors.values()].flat().join(", ")}; expected one on every node; the fix is on the nodes: install the same NVIDIA driver release on each${label === "CUDA" ? " (nvidia-smi shows the CUDA version of the driver)" : ""}`,
            );
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
