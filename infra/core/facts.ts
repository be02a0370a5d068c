/**
 * Node facts: parsing what the probe (components/scripts/probe.sh) prints on a host. Pure and tested
 * against outputs of real DGX Sparks (test/fixtures). What follows from them: the fabric attachment
 * (fabric.ts), the comparison of the nodes (preflight.ts), the fit of the model (fit/).
 */

/** One network interface and its IPv4 addresses. */
export interface InterfaceFacts {
    readonly name: string;
    readonly up: boolean;
    /** The MTU `ip addr` shows on the interface's line, when it shows one. */
    readonly mtu?: number;
    readonly addresses: readonly { readonly ip: string; readonly prefix: number }[];
}

/** A network interface as /sys/class/net shows it: its MTU and operstate (`up`, `down`, `lowerlayerdown`, ...). */
export interface LinkFacts {
    readonly name: string;
    readonly mtu: number;
    readonly operstate: string;
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

/** Where Docker keeps images on a node (`docker info`). */
export interface ImageStoreFacts {
    /**
     * `containerd`: the containerd image store (snapshotters; the default of fresh Docker 29 installs),
     * where an image's id is its manifest's or index's digest; `classic`: the graph drivers (overlay2),
     * where it is its config's digest.
     */
    readonly kind: "classic" | "containerd";
    /** Docker's storage driver as `docker info` names it: overlay2, overlayfs, ... */
    readonly driver: string;
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
    /** MemFree, Cached (the page cache) and SwapTotal of /proc/meminfo, bytes, when the probe read them. */
    readonly memFreeBytes?: number;
    readonly cachedBytes?: number;
    readonly swapTotalBytes?: number;
    /** Every network interface of /sys/class/net with its MTU and operstate (the host checks: infra/core/hostChecks.ts). */
    readonly links?: readonly LinkFacts[];
    /** The userspace OOM killers running (earlyoom, systemd-oomd, nohang); undefined when the probe did not look. */
    readonly oomGuards?: readonly string[];
    readonly interfaces: readonly InterfaceFacts[];
    readonly hcas: readonly HcaFacts[];
    /** The RDMA device nodes (/dev/infiniband/*: uverbsN, rdma_cm, ...) a container needs for RoCE. */
    readonly rdmaDevices: readonly string[];
    readonly dockerVersion?: string;
    /** Docker's image store on this node, when Docker answered. */
    readonly imageStore?: ImageStoreFacts;
    /**
     * The content identity of the configured image on this node (components/scripts/image-identity.sh),
     * if present: the same on either image store and across save/load. What the nodes are compared by.
     */
    readonly imageIdentity?: string;
    /** Docker's own id of the image on this node (`.Id`; depends on the store): for messages only. */
    readonly imageId?: string;
    /** The registry digests this node knows the image by (`.RepoDigests`: `name@sha256:...`). */
    readonly imageRepoDigests?: readonly string[];
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

/** Parses the text form of `ip addr` / `ip -4 addr show` (IPv4 addresses only). */
export function parseIpAddr(text: string): InterfaceFacts[] {
    const interfaces: { name: string; up: boolean; mtu?: number; addresses: { ip: string; prefix: number }[] }[] = [];
    for (const line of text.split("\n")) {
        const link = /^\d+:\s+([^:@\s]+)(@\S+)?:\s+<([^>]*)>(?:.*\smtu (\d+))?/.exec(line);
        if (link) {
            interfaces.push({ name: link[1], up: link[3].split(",").includes("UP"), ...(link[4] ? { mtu: Number(link[4]) } : {}), addresses: [] });
            continue;
        }
        const inet = /^\s+inet\s+([0-9.]+)\/(\d+)/.exec(line);
        if (inet && interfaces.length > 0) {
            interfaces[interfaces.length - 1].addresses.push({ ip: inet[1], prefix: Number(inet[2]) });
        }
    }
    return interfaces;
}

/**
 * Reads /proc/meminfo's lines (kB) in bytes: `MemTotal` and `MemAvailable` (0 when missing), and
 * `MemFree`, `Cached` and `SwapTotal` where present.
 */
export function parseMeminfo(text: string): {
    memTotalBytes: number;
    memAvailableBytes: number;
    memFreeBytes?: number;
    cachedBytes?: number;
    swapTotalBytes?: number;
} {
    const field = (name: string) => {
        const match = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text);
        return match ? Number(match[1]) * 1024 : undefined;
    };
    const optional = (key: string, value: number | undefined) => (value === undefined ? {} : { [key]: value });
    return {
        memTotalBytes: field("MemTotal") ?? 0,
        memAvailableBytes: field("MemAvailable") ?? 0,
        ...optional("memFreeBytes", field("MemFree")),
        ...optional("cachedBytes", field("Cached")),
        ...optional("swapTotalBytes", field("SwapTotal")),
    };
}

/** Parses the probe's `links` section: `<name> <mtu> <operstate>` per line. */
export function parseLinks(text: string): LinkFacts[] {
    return text
        .split("\n")
        .map((line) => /^(\S+) (\d+) (\S+)$/.exec(line.trim()))
        .filter((match): match is RegExpExecArray => match !== null)
        .map((match) => ({ name: match[1], mtu: Number(match[2]), operstate: match[3] }));
}

/** The userspace OOM killers the probe's `oom-guard` section names (one process name a line). */
export const OOM_GUARDS = ["earlyoom", "systemd-oomd", "nohang"] as const;

/** Parses the probe's `oom-guard` section: the names of {@link OOM_GUARDS} found running, sorted. */
export function parseOomGuards(text: string): string[] {
    const found = text.split("\n").map((line) => line.trim());
    return OOM_GUARDS.filter((name) => found.includes(name));
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

/**
 * Parses the probe's `image` section (image-identity.sh image_facts): `identity <sha256:...>`,
 * `id <Docker's id>`, `repo-digest <name@sha256:...>` lines; nothing when the image is not there.
 */
export function parseImageFacts(text: string): Pick<NodeFacts, "imageIdentity" | "imageId" | "imageRepoDigests"> {
    const lines = text.split("\n").map((line) => line.trim());
    const value = (key: string) => lines.filter((line) => line.startsWith(`${key} `)).map((line) => line.slice(key.length + 1).trim());
    const identity = value("identity")[0];
    if (!identity) {
        return {};
    }
    const id = value("id")[0];
    return { imageIdentity: identity, ...(id ? { imageId: id } : {}), imageRepoDigests: value("repo-digest") };
}

/**
 * Parses the probe's `docker-store` section (image-identity.sh image_store): Docker's storage driver,
 * then its `key=value` status lines; the containerd image store reports
 * `driver-type=io.containerd.snapshotter.v1`. Undefined when Docker did not answer.
 */
export function parseImageStore(text: string): ImageStoreFacts | undefined {
    const [driver, ...status] = text.split("\n").map((line) => line.trim());
    if (!driver) {
        return undefined;
    }
    const containerd = status.some((line) => line === "driver-type=io.containerd.snapshotter.v1");
    return { kind: containerd ? "containerd" : "classic", driver };
}

/** Turns the whole probe output of a node into {@link NodeFacts}. */
export function parseProbeOutput(output: string): NodeFacts {
    const sections = splitSections(output);
    const get = (name: string) => sections.get(name) ?? "";
    const { driverVersion, cudaVersion } = parseSmiHeader(get("nvidia-smi"));
    const meminfo = parseMeminfo(get("meminfo"));
    const imageStore = parseImageStore(get("docker-store"));
    return {
        hostname: get("hostname"),
        gpus: parseGpuQuery(get("nvidia-smi-query")),
        driverVersion,
        cudaVersion,
        ...meminfo,
        interfaces: parseIpAddr(get("ip-addr")),
        ...(sections.has("links") ? { links: parseLinks(get("links")) } : {}),
        ...(sections.has("oom-guard") ? { oomGuards: parseOomGuards(get("oom-guard")) } : {}),
        hcas: parseIbdev2netdev(get("ibdev2netdev")),
        rdmaDevices: parseRdmaDevices(get("rdma-devices")),
        dockerVersion: get("docker") || undefined,
        ...(imageStore ? { imageStore } : {}),
        ...parseImageFacts(get("image")),
        model: { ...parseModelDir(get("model")), configJson: get("model-config") || undefined },
    };
}
