/**
 * The containers a service runs, as container specs (one spec, two realizations: containerSpec.ts):
 * the Ray head and workers, the vLLM ranks of the mp executor, the watchdog. Their secrets (the Ray
 * token, the API key) and a worker's head are added where they are known ({@link withEnv},
 * {@link joinedTo}). Pure.
 */
import { FleetConfig } from "../config";
import { ContainerFile, ContainerSpec } from "../containerSpec";
import {
    RANK0_LABEL,
    RAY_HEAD_LABEL,
    RAY_HEAD_VLLM_CONFIG_ROOT,
    RAY_SERVE_ARGS_FILE,
    RAY_SERVE_LOG,
    REVISION_LABEL,
    ServiceContainers,
    fleetLabels,
    servingContainer,
} from "../names";
import { urlHost } from "../net";
import { networkEnv } from "./network";
import { PlannedNode } from "./nodes";
import { KEY_CHECK_DIR, apiBindAddress, apiProbeAddress, containerModelPath, vllmServeArgs } from "./serveArgs";

/** What every container of a service is planned from: the settings (as the service sees them), the stack, the service, the container names. */
export interface ServiceContext {
    readonly config: FleetConfig;
    readonly stack: string;
    readonly service: string;
    readonly containers: ServiceContainers;
}

const MIB = 1024 ** 2;

/**
 * What a serving container runs: `program` (e.g. `ray start ...`) as the entrypoint and its
 * arguments as the command. The image's own entrypoint may start a server of its own, so it is
 * replaced, never kept; and it is replaced by the program itself rather than cleared, because a
 * cleared entrypoint (`--entrypoint=`, `[""]`) is stored by Docker as none at all, which the Docker
 * provider then reads back as a change that forces a new container on every `pulumi up`.
 */
export function runs(program: readonly string[]): Pick<ContainerSpec, "entrypoint" | "command"> {
    return { entrypoint: [program[0]], command: program.slice(1) };
}

/**
 * The key check of every route of vLLM's API (components/scripts/vllm_fleet_key.py, loaded by vLLM
 * through --middleware): the file the container that runs the API server carries. None when the
 * stack serves without a key.
 */
export interface KeyCheckPlan {
    readonly file: ContainerFile;
}

/** The key check's plan from the module's text. */
export function planKeyCheck(moduleText: string): KeyCheckPlan {
    return { file: { path: `${KEY_CHECK_DIR}/vllm_fleet_key.py`, content: moduleText } };
}

/**
 * `spec` carrying the key check: the module's file, and its directory first on PYTHONPATH before the
 * image's own (`imagePythonPath`, as the argument check read it from the image: a variable set on a
 * container replaces the image's, it does not add to it). `spec` unchanged without a key check.
 */
export function withKeyCheck(spec: ContainerSpec, keyCheck: KeyCheckPlan | undefined, imagePythonPath: string): ContainerSpec {
    if (!keyCheck) {
        return spec;
    }
    return {
        ...spec,
        env: { ...spec.env, PYTHONPATH: imagePythonPath ? `${KEY_CHECK_DIR}:${imagePythonPath}` : KEY_CHECK_DIR },
        files: [...(spec.files ?? []), keyCheck.file],
    };
}

/** `spec` with `env` added (a secret's value: the realizations keep it off command lines). */
export function withEnv(spec: ContainerSpec, env: Readonly<Record<string, string>>): ContainerSpec {
    return { ...spec, env: { ...spec.env, ...env } };
}

/**
 * Limits, mounts, labels and the restart policy shared by every container that runs vLLM or Ray.
 * `revision` is the reconciliation label (observe.ts): a new one replaces the container.
 */
function servingBase({ config, stack, service }: ServiceContext, node: PlannedNode, role: string, revision: string): Omit<ContainerSpec, "name" | "command" | "entrypoint"> {
    return {
        image: config.image.name,
        // vLLM's own wait for its engine (600 s by default) must not end a long load before the
        // readiness gate does: it waits as long (every start of vLLM inherits this environment).
        env: { ...networkEnv(node.fabric), VLLM_ENGINE_READY_TIMEOUT_S: String(config.timeouts.vllmReadySeconds) },
        mounts: [{ source: config.model.path, target: containerModelPath(config), readOnly: true }],
        networkHost: true,
        ipcHost: true,
        // Whole MiB: the Docker provider keeps the size in MiB, and a fraction would differ on every read.
        shmSizeBytes: Math.round(config.container.shmSizeBytes / MIB) * MIB,
        // RoCE for NCCL: the node's RDMA device nodes and the right to pin memory for them, not a
        // blanket --privileged (unless the user asks for it: container.privileged).
        ...(config.container.privileged
            ? { privileged: true }
            : { ...(node.fabric.rdmaDevices.length > 0 ? { devices: node.fabric.rdmaDevices } : {}), capAdd: ["CAP_IPC_LOCK"] }),
        ulimits: [
            { name: "memlock", soft: config.container.memlockBytes, hard: config.container.memlockBytes },
            { name: "stack", soft: config.container.stackBytes, hard: config.container.stackBytes },
        ],
        gpus: "all",
        // Docker restarts a crashed container, also after the node reboots, a bounded number of
        // times with a doubling delay; a restart loop that never ends leaks GB10's unified memory.
        restart: "on-failure",
        restartRetries: config.supervision.restartRetries,
        // A Docker engine that stops (a reboot) stops its containers with this signal. vLLM exits 0
        // on SIGTERM, which on-failure takes for a finished job and does not restart at boot; killed,
        // the container counts as failed and comes back. (A stop by hand is never restarted.)
        stopSignal: "SIGKILL",
        labels: { ...fleetLabels(stack, role, service), [REVISION_LABEL]: revision },
    };
}

/**
 * The Ray container of node `index`: head on node 0, workers on the others, without the cluster's
 * token (added with {@link withEnv} as RAY_AUTH_TOKEN: Ray token authentication, Ray 2.52+, on
 * every RPC to the GCS and the raylets, from the nodes and from drivers — the readiness gate,
 * `vllm serve`, both `docker exec`s that inherit this environment) and, for a worker, without the
 * head it joins ({@link joinedTo}).
 */
export function rayContainerSpec(context: ServiceContext, nodes: readonly PlannedNode[], index: number, revision: string): ContainerSpec {
    const { config, containers } = context;
    const node = nodes[index];
    const head = nodes[0];
    const common = ["--node-ip-address", node.fabric.ip, "--num-gpus", String(node.gpus), "--disable-usage-stats"];
    if (index === 0) {
        const base = servingBase(context, node, "ray-head", revision);
        // The first Ray driver on the head is always the readiness gate (ray-ready.sh), a job that
        // ends a second later: Ray's prestart of idle workers for it would only cost the head CPU
        // and memory. vLLM's own workers are started for vLLM's job either way.
        return {
            name: containers.ray,
            ...runs(["ray", "start", "--block", "--head", "--port", String(config.ray.port), "--include-dashboard=false", ...common]),
            ...base,
            env: { ...base.env, RAY_AUTH_MODE: "token", RAY_prestart_worker_first_driver: "0", VLLM_CONFIG_ROOT: RAY_HEAD_VLLM_CONFIG_ROOT },
        };
    }
    const base = servingBase(context, node, "ray-worker", revision);
    return {
        name: containers.ray,
        ...runs(["ray", "start", "--block", "--address", `${head.fabric.ip}:${config.ray.port}`, ...common]),
        ...base,
        // A worker whose head is gone for 20 s (Ray's default: 60 s) exits, and its restart policy
        // brings it back to join the head that Docker restarted meanwhile: vLLM's engine died with
        // the old head anyway, and the group is back sooner.
        env: { ...base.env, RAY_AUTH_MODE: "token", RAY_gcs_rpc_server_reconnect_timeout_s: "20" },
    };
}

/**
 * A Ray worker's container with the id of the head container it joins: a new head is a new Ray
 * cluster that old workers can never rejoin, so a new head id means new workers, and since the id
 * exists only once the head does, every worker starts after its head's `docker run` (its
 * `ray start --address` then retries the head while it boots, so the two still boot side by side).
 */
export function joinedTo(worker: ContainerSpec, node: string, headContainerId: string | undefined): ContainerSpec {
    if (!headContainerId) {
        throw new Error(`the Ray worker on ${node} needs the id of its head container`);
    }
    return { ...worker, labels: { ...worker.labels, [RAY_HEAD_LABEL]: headContainerId } };
}

/**
 * A headless rank's container (mp executor) with the id of the rank 0 container it joins, for the
 * same reason as {@link joinedTo}: the group restarts as one. A new rank 0 means new headless ranks,
 * which start after it; and since the id is an output of rank 0, replacing rank 0 (delete before
 * replace) removes every old headless rank first, so none is left over, restarted by Docker's
 * policy, to join the new rank 0 and vanish under it.
 */
export function joinedToRank0(rank: ContainerSpec, node: string, rank0ContainerId: string | undefined): ContainerSpec {
    if (!rank0ContainerId) {
        throw new Error(`the headless vLLM rank on ${node} needs the id of rank 0's container`);
    }
    return { ...rank, labels: { ...rank.labels, [RANK0_LABEL]: rank0ContainerId } };
}

/** The program of node `index`'s vLLM rank with the `mp` executor: `vllm serve ...` with the group's rendezvous. */
export function mpServeProgram(config: FleetConfig, nodes: readonly PlannedNode[], index: number): string[] {
    const mp = { nnodes: nodes.length, nodeRank: index, masterAddr: nodes[0].fabric.ip, masterPort: config.vllm.masterPort };
    return ["vllm", ...vllmServeArgs(config, apiBindAddress(config, nodes[0]), mp)];
}

/** Where a rank's container carries its keeper (components/scripts/vllm-rank.py). */
export const RANK_KEEPER_PATH = "/opt/vllm-fleet/vllm-rank.py";

/**
 * The vLLM container of node `index` with the `mp` executor: rank 0 on node 0 serves the API, the
 * other nodes run headless ranks that rendezvous with it over the fabric. Its first process is the
 * rank's keeper (`keeper`, the text of components/scripts/vllm-rank.py, which it carries as a file):
 * vLLM ends itself with status 0 when a rank of its group dies, which Docker's on-failure policy
 * would take for a finished job, and a headless rank outlives its rank 0 silently; the keeper turns
 * both into a failure the policy restarts (a headless rank watches its vLLM's connections to rank 0's
 * fabric address, and rank 0's /health).
 * The API key, if any, is added with {@link withEnv} (it is a secret).
 */
export function mpRankSpec(context: ServiceContext, nodes: readonly PlannedNode[], index: number, revision: string, keeper: string): ContainerSpec {
    const { config, containers } = context;
    const base = servingBase(context, nodes[index], index === 0 ? "vllm-rank0" : "vllm-headless", revision);
    const rank0Health = `http://${urlHost(nodes[0].fabric.ip)}:${config.vllm.port}/health`;
    return {
        name: containers.vllm,
        ...runs(["python3", RANK_KEEPER_PATH, ...mpServeProgram(config, nodes, index)]),
        ...base,
        env: index === 0 ? base.env : { ...base.env, VLLM_FLEET_RANK0_ADDRESS: nodes[0].fabric.ip, VLLM_FLEET_RANK0_HEALTH: rank0Health },
        files: [{ path: RANK_KEEPER_PATH, content: keeper }],
    };
}

/** The programs of the watchdog's container: its own, and what it runs in the Ray head. */
export interface WatchdogScripts {
    /** components/scripts/watchdog.py. */
    readonly watchdog: string;
    /** components/scripts/vllm-lifecycle.sh: the ray executor's restart of `vllm serve`. */
    readonly lifecycle: string;
}

/**
 * The watchdog's container on the first node (components/scripts/watchdog.py): it probes a
 * completion and restarts vLLM when it stops serving, rationed (config `supervision`); with the ray
 * executor through the lifecycle that vllm-serve's start and stop run too (WATCHDOG_LIFECYCLE).
 * Host network (it probes the API where it listens), the Docker socket, its own process namespace (it finds
 * `vllm serve` with pgrep in the serving container, and its own command line holds those words).
 * The API key, if any, is added with {@link withEnv} (a secret).
 */
export function watchdogSpec(context: ServiceContext, scripts: WatchdogScripts, revision: string, head: PlannedNode): ContainerSpec {
    const { config, stack, service, containers } = context;
    const { supervision } = config;
    const env: Record<string, string> = {
        WATCHDOG_EXECUTOR: config.executor,
        WATCHDOG_CONTAINER: servingContainer(containers, config.executor),
        WATCHDOG_HOST: apiProbeAddress(config, head),
        WATCHDOG_PORT: String(config.vllm.port),
        WATCHDOG_MODEL: config.model.servedName,
        WATCHDOG_INTERVAL: String(supervision.probeIntervalSeconds),
        WATCHDOG_FAILURES: String(supervision.failuresBeforeRestart),
        // A (re)started server may take as long to serve as the readiness gate allows it.
        WATCHDOG_STARTUP_GRACE: String(config.timeouts.vllmReadySeconds),
        WATCHDOG_MAX_RESTARTS: String(supervision.maxRestarts),
        WATCHDOG_WINDOW: String(supervision.restartWindowSeconds),
    };
    if (config.executor === "ray") {
        // The arguments are read from the container at each start, not carried here: a change of
        // them alone restarts vllm serve and leaves the watchdog be.
        env.WATCHDOG_SERVE_ARGS_FILE = RAY_SERVE_ARGS_FILE;
        env.WATCHDOG_SERVE_LOG = RAY_SERVE_LOG;
        // The restart the start and the stop share, run in the Ray head through the Docker API.
        env.WATCHDOG_LIFECYCLE = scripts.lifecycle;
    }
    return {
        name: containers.watchdog,
        image: config.image.name,
        ...runs(["python3", "-c", scripts.watchdog]),
        env,
        mounts: [{ source: "/var/run/docker.sock", target: "/var/run/docker.sock", readOnly: false }],
        networkHost: true,
        ipcHost: false,
        ulimits: [],
        // Unlike the serving containers it restarts without bound: it is small, and it is what
        // bounds the restarts of vLLM.
        restart: "unless-stopped",
        labels: { ...fleetLabels(stack, "watchdog", service), [REVISION_LABEL]: revision },
    };
}
