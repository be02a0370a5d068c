/**
 * What the Docker provider (@pulumi/docker 5.x, a bridge of kreuzwerker/terraform-provider-docker)
 * keeps in the state of a `docker.Container`, modelled on its source, so that the unit tests can
 * compare the inputs the program sends with what the next `pulumi up` will diff them against.
 *
 * The chain, field by field, for the fields vllm-fleet sets (all of them force a new container):
 * 1. Create (resourceDockerContainerCreate): a field reaches Docker only when set (`d.GetOk`: an
 *    empty list, an empty string or 0 counts as unset); `shm_size` is an int of MiB.
 * 2. Docker (dockerd, checked with `docker create` + `docker inspect`): an entrypoint of `[""]`
 *    (`--entrypoint=`) is stored as none (`null`); without an entrypoint the image's is used, and
 *    without entrypoint and command the image's command too; an entrypoint given keeps the command
 *    as given.
 * 3. Read (resourceDockerContainerRead), which Create ends with: `entrypoint` and `command` from
 *    Config, `shm_size` = ShmSize / 1024 / 1024 (integer division), `network_mode`, `ipc_mode`,
 *    `restart` and `max_retry_count` from HostConfig, `stop_signal` from Config, `gpus` and `ulimit` only when configured. Env and labels are not
 *    read back (the image adds its own), so the state keeps what was sent. `devices` only when
 *    configured (host path, permissions, and the container path when it was given); `privileged`
 *    always; `capabilities` from HostConfig.CapAdd when not empty, as Docker stored them: Docker
 *    writes each one with its `CAP_` prefix (`--cap-add IPC_LOCK` is inspected as `CAP_IPC_LOCK`).
 * Simpler than the provider: only the fields vllm-fleet sets are modelled.
 */

/** The fields of docker.ContainerArgs that vllm-fleet sets, as the program passes them. */
export interface ContainerInputs {
    name: string;
    image: string;
    entrypoints?: string[];
    command?: string[];
    envs?: string[];
    labels?: { label: string; value: string }[];
    networkMode?: string;
    ipcMode?: string;
    shmSize?: number;
    gpus?: string;
    devices?: { hostPath: string; containerPath?: string; permissions?: string }[];
    capabilities?: { adds: string[] };
    privileged?: boolean;
    restart?: string;
    maxRetryCount?: number;
    stopSignal?: string;
    ulimits?: { name: string; soft: number; hard: number }[];
    volumes?: { hostPath: string; containerPath: string; readOnly: boolean }[];
    mustRun?: boolean;
    wait?: boolean;
}

/** What an image brings: its ENTRYPOINT and CMD. */
export interface ImageConfig {
    entrypoint: string[] | null;
    cmd: string[] | null;
}

const isSet = (value: unknown) =>
    value !== undefined && value !== null && value !== "" && value !== 0 && value !== false && !(Array.isArray(value) && value.length === 0);

const MIB = 1024 * 1024;

/** The state the provider keeps after creating a container from `inputs` on an image `image`. */
export function dockerProviderState(inputs: ContainerInputs, image: ImageConfig): ContainerInputs {
    // 1. Create: what reaches Docker.
    const entrypoint = isSet(inputs.entrypoints) ? inputs.entrypoints! : null;
    const cmd = isSet(inputs.command) ? inputs.command! : null;
    // The int attribute holds whole MiB only: a fraction is cut off on the way in.
    const shmBytes = isSet(inputs.shmSize) ? Math.trunc(inputs.shmSize!) * MIB : 64 * MIB;
    // 2. Docker.
    let storedEntrypoint: string[] | null = entrypoint;
    let storedCmd: string[] | null = cmd;
    if (storedEntrypoint !== null && storedEntrypoint.length === 1 && storedEntrypoint[0] === "") {
        storedEntrypoint = null;
    } else if (storedEntrypoint === null) {
        storedEntrypoint = image.entrypoint;
        if (storedCmd === null) {
            storedCmd = image.cmd;
        }
    }
    // 3. Read (a null list reads back as empty).
    return {
        ...inputs,
        entrypoints: storedEntrypoint ?? [],
        command: storedCmd ?? [],
        shmSize: Math.floor(shmBytes / MIB),
        networkMode: isSet(inputs.networkMode) ? inputs.networkMode : "bridge",
        ipcMode: isSet(inputs.ipcMode) ? inputs.ipcMode : "private",
        restart: isSet(inputs.restart) ? inputs.restart : "no",
        maxRetryCount: isSet(inputs.maxRetryCount) ? inputs.maxRetryCount : 0,
        stopSignal: isSet(inputs.stopSignal) ? inputs.stopSignal : "",
        devices: isSet(inputs.devices)
            ? inputs.devices!.map(({ containerPath, ...device }) => ({
                  ...device,
                  ...(containerPath ? { containerPath } : {}),
                  permissions: device.permissions || "rwm",
              }))
            : undefined,
        capabilities: isSet(inputs.capabilities?.adds) ? { adds: inputs.capabilities!.adds.map((cap) => (cap.startsWith("CAP_") ? cap : `CAP_${cap.toUpperCase()}`)) } : undefined,
        privileged: inputs.privileged === true,
    };
}

/** JSON with object keys sorted: the provider's attributes have no key order. */
function canonical(value: unknown): string {
    return JSON.stringify(value, (_key, inner) =>
        inner && typeof inner === "object" && !Array.isArray(inner) ? Object.fromEntries(Object.keys(inner).sort().map((key) => [key, inner[key]])) : inner,
    );
}

/** The fields of `inputs` whose stored value differs: each one replaces the container on the next `up`. */
export function fieldsThatWouldReplace(inputs: ContainerInputs, stored: ContainerInputs): string[] {
    return (Object.keys(inputs) as (keyof ContainerInputs)[])
        .filter((key) => inputs[key] !== undefined)
        .filter((key) => canonical(inputs[key]) !== canonical(stored[key]))
        .map(String);
}
