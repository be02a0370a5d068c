/**
 * One description of a container, two realizations: `docker run` arguments for the `ssh` driver and
 * the inputs of an `@pulumi/docker` Container for the `docker` driver. Both are derived from the same
 * {@link ContainerSpec}, and each can be read back into one, which is how the tests prove that the two
 * drivers express the same container.
 */

/** A bind mount. */
export interface Mount {
    readonly source: string;
    readonly target: string;
    readonly readOnly: boolean;
}

/** A resource limit (`--ulimit name=soft:hard`). */
export interface Ulimit {
    readonly name: string;
    readonly soft: number;
    readonly hard: number;
}

/**
 * A file the container carries in its own filesystem from its creation on (written before it starts):
 * a program vLLM loads, for instance. Text, mode 0644, owned by root; its directories are made.
 */
export interface ContainerFile {
    /** An absolute path inside the container. */
    readonly path: string;
    readonly content: string;
}

/** The single source of truth for a container vllm-fleet runs. */
export interface ContainerSpec {
    readonly name: string;
    readonly image: string;
    /**
     * The entrypoint; undefined keeps the image's own. Never `[]` (a cleared entrypoint): Docker stores
     * that as no entrypoint at all, so the Docker provider would see a change on every read; replace
     * the image's entrypoint with the program to run instead (plan.ts `runs`).
     */
    readonly entrypoint?: readonly string[];
    readonly command: readonly string[];
    readonly env: Readonly<Record<string, string>>;
    readonly mounts: readonly Mount[];
    readonly networkHost: boolean;
    readonly ipcHost: boolean;
    readonly shmSizeBytes?: number;
    readonly ulimits: readonly Ulimit[];
    /** `all` requests every GPU (`--gpus all`). */
    readonly gpus?: "all";
    /** Host device nodes given to the container at the same path (`--device`), e.g. /dev/infiniband/uverbs0. */
    readonly devices?: readonly string[];
    /** Capabilities added, as Docker stores them (`CAP_IPC_LOCK`, not `IPC_LOCK`). */
    readonly capAdd?: readonly string[];
    /** Every device and capability (`--privileged`): only when the user asks for it. */
    readonly privileged?: boolean;
    readonly restart: "no" | "on-failure" | "unless-stopped" | "always";
    /** With `on-failure`: how many times Docker restarts the container (its delay doubles each time). */
    readonly restartRetries?: number;
    /** The signal `docker stop` (and a stopping Docker engine) sends first; undefined: the image's. */
    readonly stopSignal?: string;
    readonly labels: Readonly<Record<string, string>>;
    /** Files written into the container before it starts (`docker create`, `docker cp`; the provider's uploads). */
    readonly files?: readonly ContainerFile[];
}

function sortedEntries(record: Readonly<Record<string, string>>): [string, string][] {
    return Object.keys(record)
        .sort()
        .map((key) => [key, record[key]]);
}

/**
 * `docker run` arguments (after `docker`) that create the container detached. The spec's files are
 * not among them (`docker run` cannot write one): container-run.sh creates the container from these
 * arguments, copies the files in, then starts it. The variables named
 * in `valuesFromEnvironment` are passed by name only (`--env NAME`): docker takes their values from
 * its own environment, so secrets stay off the command line.
 */
export function toDockerRunArgs(spec: ContainerSpec, options: { readonly valuesFromEnvironment?: readonly string[] } = {}): string[] {
    const args = ["run", "--detach", "--name", spec.name];
    if (spec.networkHost) {
        args.push("--network", "host");
    }
    if (spec.ipcHost) {
        args.push("--ipc", "host");
    }
    if (spec.shmSizeBytes !== undefined) {
        args.push("--shm-size", `${spec.shmSizeBytes}b`);
    }
    if (spec.gpus) {
        args.push("--gpus", spec.gpus);
    }
    if (spec.privileged) {
        args.push("--privileged");
    }
    for (const device of spec.devices ?? []) {
        args.push("--device", device);
    }
    for (const capability of spec.capAdd ?? []) {
        args.push("--cap-add", capability);
    }
    for (const ulimit of spec.ulimits) {
        args.push("--ulimit", `${ulimit.name}=${ulimit.soft}:${ulimit.hard}`);
    }
    for (const mount of spec.mounts) {
        args.push("--volume", `${mount.source}:${mount.target}${mount.readOnly ? ":ro" : ""}`);
    }
    for (const [key, value] of sortedEntries(spec.env)) {
        args.push("--env", options.valuesFromEnvironment?.includes(key) ? key : `${key}=${value}`);
    }
    for (const [key, value] of sortedEntries(spec.labels)) {
        args.push("--label", `${key}=${value}`);
    }
    args.push("--restart", spec.restart === "on-failure" && spec.restartRetries !== undefined ? `on-failure:${spec.restartRetries}` : spec.restart);
    if (spec.stopSignal !== undefined) {
        args.push("--stop-signal", spec.stopSignal);
    }
    if (spec.entrypoint !== undefined) {
        // `--entrypoint` takes one word; the rest of a longer entrypoint goes before the command.
        args.push(`--entrypoint=${spec.entrypoint[0] ?? ""}`);
    }
    args.push(spec.image, ...(spec.entrypoint?.slice(1) ?? []), ...spec.command);
    return args;
}

const SIZE_SUFFIX: Record<string, number> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** Parses a docker size (`10g`, `512m`, `1024b`, `1024`) into bytes. */
export function parseDockerSize(text: string): number {
    const match = /^([0-9]+(?:\.[0-9]+)?)([bkmg]?)$/i.exec(text.trim());
    if (!match) {
        throw new Error(`not a docker size: ${JSON.stringify(text)}`);
    }
    return Math.round(Number(match[1]) * SIZE_SUFFIX[(match[2] || "b").toLowerCase()]);
}

/**
 * Reads `docker run` arguments, and the files container-run.sh copies in, back into a spec (the
 * inverse of {@link toDockerRunArgs}).
 */
export function specFromDockerRunArgs(args: readonly string[], files: readonly ContainerFile[] = []): ContainerSpec {
    if (args[0] !== "run") {
        throw new Error("not a docker run command");
    }
    const env: Record<string, string> = {};
    const labels: Record<string, string> = {};
    const mounts: Mount[] = [];
    const ulimits: Ulimit[] = [];
    let name = "";
    let networkHost = false;
    let ipcHost = false;
    let shmSizeBytes: number | undefined;
    let gpus: "all" | undefined;
    const devices: string[] = [];
    const capAdd: string[] = [];
    let privileged = false;
    let restart: ContainerSpec["restart"] = "no";
    let restartRetries: number | undefined;
    let stopSignal: string | undefined;
    let entrypointHead: string | undefined;
    let index = 1;
    const value = () => {
        index += 1;
        return args[index];
    };
    for (; index < args.length && args[index].startsWith("-"); index++) {
        const arg = args[index];
        if (arg.startsWith("--entrypoint=")) {
            entrypointHead = arg.slice("--entrypoint=".length);
            continue;
        }
        switch (arg) {
            case "--detach":
                break;
            case "--name":
                name = value();
                break;
            case "--network":
                networkHost = value() === "host";
                break;
            case "--ipc":
                ipcHost = value() === "host";
                break;
            case "--shm-size":
                shmSizeBytes = parseDockerSize(value());
                break;
            case "--gpus":
                gpus = value() === "all" ? "all" : undefined;
                break;
            case "--privileged":
                privileged = true;
                break;
            case "--device":
                devices.push(value());
                break;
            case "--cap-add":
                capAdd.push(value());
                break;
            case "--ulimit": {
                const [ulimitName, limits] = value().split("=");
                const [soft, hard] = limits.split(":").map(Number);
                ulimits.push({ name: ulimitName, soft, hard: hard ?? soft });
                break;
            }
            case "--volume": {
                const [source, target, mode] = value().split(":");
                mounts.push({ source, target, readOnly: mode === "ro" });
                break;
            }
            case "--env": {
                const pair = value();
                env[pair.slice(0, pair.indexOf("="))] = pair.slice(pair.indexOf("=") + 1);
                break;
            }
            case "--label": {
                const pair = value();
                labels[pair.slice(0, pair.indexOf("="))] = pair.slice(pair.indexOf("=") + 1);
                break;
            }
            case "--stop-signal":
                stopSignal = value();
                break;
            case "--restart": {
                const [policy, retries] = value().split(":");
                restart = policy as ContainerSpec["restart"];
                restartRetries = retries === undefined ? undefined : Number(retries);
                break;
            }
            default:
                throw new Error(`unexpected docker run flag ${arg}`);
        }
    }
    const image = args[index];
    const rest = args.slice(index + 1);
    // The words of a multi-word entrypoint cannot be told from the command here; the specs this
    // project writes have entrypoints of at most one word.
    const entrypoint = entrypointHead === undefined ? undefined : entrypointHead === "" ? [] : [entrypointHead];
    return {
        name,
        image,
        entrypoint,
        command: rest,
        env,
        mounts,
        networkHost,
        ipcHost,
        shmSizeBytes,
        ulimits,
        gpus,
        ...(devices.length > 0 ? { devices } : {}),
        ...(capAdd.length > 0 ? { capAdd } : {}),
        ...(privileged ? { privileged } : {}),
        restart,
        ...(restartRetries === undefined ? {} : { restartRetries }),
        ...(stopSignal === undefined ? {} : { stopSignal }),
        labels,
        ...(files.length > 0 ? { files } : {}),
    };
}

/**
 * The inputs of an `@pulumi/docker` Container for this spec (plain values; the `docker` driver adds
 * the per-node provider). Field names are those of docker.ContainerArgs.
 */
export interface DockerContainerInputs {
    readonly name: string;
    readonly image: string;
    readonly entrypoints?: string[];
    readonly command: string[];
    readonly envs: string[];
    readonly volumes: { hostPath: string; containerPath: string; readOnly: boolean }[];
    readonly networkMode?: string;
    readonly ipcMode?: string;
    readonly shmSize?: number;
    readonly ulimits: { name: string; soft: number; hard: number }[];
    readonly gpus?: string;
    readonly devices?: { hostPath: string; containerPath: string; permissions: string }[];
    readonly capabilities?: { adds: string[] };
    readonly privileged?: boolean;
    readonly restart: string;
    readonly maxRetryCount?: number;
    readonly stopSignal?: string;
    readonly labels: { label: string; value: string }[];
    readonly mustRun: boolean;
    readonly wait: boolean;
    /** Files the provider writes into the container before it starts it. */
    readonly uploads?: { file: string; content: string }[];
}

/** `docker.Container` inputs for the spec (the inverse is {@link specFromDockerContainerInputs}). */
export function toDockerContainerInputs(spec: ContainerSpec): DockerContainerInputs {
    if (spec.entrypoint !== undefined && spec.entrypoint.filter((word) => word !== "").length === 0) {
        throw new Error(`container ${spec.name}: a cleared entrypoint cannot be kept by the Docker provider; give the program to run instead`);
    }
    if (spec.shmSizeBytes !== undefined && spec.shmSizeBytes % 1024 ** 2 !== 0) {
        throw new Error(`container ${spec.name}: the Docker provider keeps the shm size in whole MiB, not ${spec.shmSizeBytes} bytes`);
    }
    return {
        name: spec.name,
        image: spec.image,
        entrypoints: spec.entrypoint === undefined ? undefined : [...spec.entrypoint],
        command: [...spec.command],
        envs: sortedEntries(spec.env).map(([key, value]) => `${key}=${value}`),
        volumes: spec.mounts.map((mount) => ({ hostPath: mount.source, containerPath: mount.target, readOnly: mount.readOnly })),
        networkMode: spec.networkHost ? "host" : undefined,
        ipcMode: spec.ipcHost ? "host" : undefined,
        // docker.Container takes shmSize in MiB (whole: checked above).
        shmSize: spec.shmSizeBytes === undefined ? undefined : spec.shmSizeBytes / 1024 ** 2,
        ulimits: spec.ulimits.map((ulimit) => ({ ...ulimit })),
        gpus: spec.gpus,
        // All three fields of a device, as the provider reads them back (permissions default rwm).
        devices: spec.devices?.length ? spec.devices.map((device) => ({ hostPath: device, containerPath: device, permissions: "rwm" })) : undefined,
        capabilities: spec.capAdd?.length ? { adds: [...spec.capAdd] } : undefined,
        // Only when true: the provider reads back false for an unprivileged container either way.
        privileged: spec.privileged ? true : undefined,
        restart: spec.restart,
        maxRetryCount: spec.restart === "on-failure" ? spec.restartRetries : undefined,
        stopSignal: spec.stopSignal,
        labels: sortedEntries(spec.labels).map(([label, value]) => ({ label, value })),
        mustRun: true,
        wait: false,
        uploads: spec.files?.length ? spec.files.map((file) => ({ file: file.path, content: file.content })) : undefined,
    };
}

/** Reads `docker.Container` inputs back into a spec. */
export function specFromDockerContainerInputs(inputs: DockerContainerInputs): ContainerSpec {
    const env: Record<string, string> = {};
    for (const pair of inputs.envs) {
        env[pair.slice(0, pair.indexOf("="))] = pair.slice(pair.indexOf("=") + 1);
    }
    const labels: Record<string, string> = {};
    for (const { label, value } of inputs.labels) {
        labels[label] = value;
    }
    return {
        name: inputs.name,
        image: inputs.image,
        entrypoint: inputs.entrypoints,
        command: inputs.command,
        env,
        mounts: inputs.volumes.map((volume) => ({ source: volume.hostPath, target: volume.containerPath, readOnly: volume.readOnly })),
        networkHost: inputs.networkMode === "host",
        ipcHost: inputs.ipcMode === "host",
        shmSizeBytes: inputs.shmSize === undefined ? undefined : Math.round(inputs.shmSize * 1024 ** 2),
        ulimits: inputs.ulimits,
        gpus: inputs.gpus === "all" ? "all" : undefined,
        ...(inputs.devices?.length ? { devices: inputs.devices.map((device) => device.hostPath) } : {}),
        ...(inputs.capabilities?.adds.length ? { capAdd: inputs.capabilities.adds } : {}),
        ...(inputs.privileged ? { privileged: true } : {}),
        restart: inputs.restart as ContainerSpec["restart"],
        ...(inputs.maxRetryCount === undefined ? {} : { restartRetries: inputs.maxRetryCount }),
        ...(inputs.stopSignal === undefined ? {} : { stopSignal: inputs.stopSignal }),
        labels,
        ...(inputs.uploads?.length ? { files: inputs.uploads.map((upload) => ({ path: upload.file, content: upload.content })) } : {}),
    };
}
