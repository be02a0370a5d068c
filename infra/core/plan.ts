/**
 * Planning, pure: from the validated config and the facts of each node, everything the components
 * put on the hosts: per-node network pins, the Ray containers, the `vllm serve` command line.
 * No Pulumi here, so it is tested directly, table-driven.
 */
import * as path from "path";
import { ContainerSpec } from "./containerSpec";
import { FleetConfig } from "./config";
import { FabricFacts } from "./facts";

/** Label on every serving container: its revision (see infra/core/observe.ts). */
export const REVISION_LABEL = "vllm-fleet.revision";

/** Where the model directory is mounted inside the containers (read-only). */
export function containerModelPath(config: FleetConfig): string {
    return `/models/${path.posix.basename(config.model.path)}`;
}

/** Labels on everything vllm-fleet starts, so it can be found (and proven gone) later. */
export function fleetLabels(stack: string, role: string): Record<string, string> {
    return { "vllm-fleet.stack": stack, "vllm-fleet.role": role };
}

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

/** VLLM_CONFIG_ROOT in the Ray head container: where vllm-start.sh writes the non-carry-over list. */
export const RAY_HEAD_VLLM_CONFIG_ROOT = "/etc/vllm-fleet/vllm";

/**
 * What the fabric check does when a node's NCCL chose TCP sockets: `refuse` or `warn`. By default
 * (fabric.socketTransport auto) it refuses where the fabric port has RoCE devices, which NCCL should
 * have used, and warns where it has none (a plain Ethernet fabric).
 */
export function transportPolicy(config: FleetConfig, node: PlannedNode): "refuse" | "warn" {
    const policy = config.fabric.socketTransport;
    if (policy !== "auto") {
        return policy;
    }
    return node.fabric.hcas.length > 0 ? "refuse" : "warn";
}

/** Why a node's NCCL may have fallen back to TCP, from its facts, for the fabric check's message. */
export function transportHint(config: FleetConfig, node: PlannedNode): string {
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

/** One node as the plan sees it. */
export interface PlannedNode {
    readonly name: string;
    readonly fabric: FabricFacts;
    readonly gpus: number;
}

/** The container that runs Ray (and, on the head, `vllm serve`) on every node (`ray` executor). */
export const RAY_CONTAINER = "vllm-fleet-ray";

/** The container that runs one node's vLLM ranks (`mp` executor). */
export const VLLM_CONTAINER = "vllm-fleet-vllm";

/** The serving containers of both executors: starting one kind first removes the other. */
export const SERVING_CONTAINERS = [RAY_CONTAINER, VLLM_CONTAINER] as const;

/** The container of the watchdog on the first node (components/scripts/watchdog.py). */
export const WATCHDOG_CONTAINER = "vllm-fleet-watchdog";

/** Where `vllm serve` writes its log inside the Ray head container (ray executor). */
export const RAY_SERVE_LOG = "/tmp/vllm-fleet-serve.log";
/** Where vllm-start.sh keeps the arguments of `vllm` in the Ray head container, for the watchdog. */
export const RAY_SERVE_ARGS_FILE = "/tmp/vllm-fleet-serve.args";

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
 * Limits, mounts, labels and the restart policy shared by every container that runs vLLM or Ray.
 * `revision` is the reconciliation label (infra/core/observe.ts): a new one replaces the container.
 */
function servingContainer(config: FleetConfig, stack: string, node: PlannedNode, role: string, revision: string): Omit<ContainerSpec, "name" | "command" | "entrypoint"> {
    return {
        image: config.image.name,
        env: networkEnv(node.fabric),
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
        labels: { ...fleetLabels(stack, role), [REVISION_LABEL]: revision },
    };
}

/** Label on each Ray worker: the id of the head container it joined. */
export const RAY_HEAD_LABEL = "vllm-fleet.ray-head";

/**
 * The Ray container of a node: head on node 0, workers on the others. A worker carries the id of
 * the head container it joins (`headContainerId`, required for workers): a new head is a new Ray
 * cluster that old workers can never rejoin, so a new head id means new workers, and since the id
 * exists only once the head does, every worker starts after its head's `docker run` (its
 * `ray start --address` then retries the head while it boots, so the two still boot side by side).
 */
export function rayContainerSpec(
    config: FleetConfig,
    stack: string,
    nodes: readonly PlannedNode[],
    index: number,
    revision: string,
    rayToken: string,
    headContainerId?: string,
): ContainerSpec {
    const node = nodes[index];
    const head = nodes[0];
    // Ray token authentication (Ray 2.52+): every RPC to the GCS and the raylets, from the nodes and
    // from drivers (the readiness gate, `vllm serve`, both `docker exec`s that inherit this
    // environment), must carry the token. The value is a secret (SECRET_ENV: never on a command line).
    const auth = { RAY_AUTH_MODE: "token", RAY_AUTH_TOKEN: rayToken };
    const common = ["--node-ip-address", node.fabric.ip, "--num-gpus", String(node.gpus), "--disable-usage-stats"];
    if (index === 0) {
        const base = servingContainer(config, stack, node, "ray-head", revision);
        // The first Ray driver on the head is always the readiness gate (ray-ready.sh), a job that
        // ends a second later: Ray's prestart of idle workers for it would only cost the head CPU
        // and memory. vLLM's own workers are started for vLLM's job either way.
        return {
            name: RAY_CONTAINER,
            ...runs(["ray", "start", "--block", "--head", "--port", String(config.ray.port), "--include-dashboard=false", ...common]),
            ...base,
            env: { ...base.env, ...auth, RAY_prestart_worker_first_driver: "0", VLLM_CONFIG_ROOT: RAY_HEAD_VLLM_CONFIG_ROOT },
        };
    }
    if (!headContainerId) {
        throw new Error(`the Ray worker on ${node.name} needs the id of its head container`);
    }
    const base = servingContainer(config, stack, node, "ray-worker", revision);
    return {
        name: RAY_CONTAINER,
        ...runs(["ray", "start", "--block", "--address", `${head.fabric.ip}:${config.ray.port}`, ...common]),
        ...base,
        // A worker whose head is gone for 20 s (Ray's default: 60 s) exits, and its restart policy
        // brings it back to join the head that Docker restarted meanwhile: vLLM's engine died with
        // the old head anyway, and the group is back sooner.
        env: { ...base.env, ...auth, RAY_gcs_rpc_server_reconnect_timeout_s: "20" },
        labels: { ...base.labels, [RAY_HEAD_LABEL]: headContainerId },
    };
}

/**
 * The vLLM container of a node with the `mp` executor: rank 0 on node 0 serves the API, the other
 * nodes run headless ranks that rendezvous with it over the fabric. The API key, if any, is added
 * by the caller (it is a secret).
 */
export function mpRankSpec(config: FleetConfig, stack: string, nodes: readonly PlannedNode[], index: number, revision: string): ContainerSpec {
    const program = [
        "vllm",
        ...vllmServeArgs(config, apiBindAddress(config, nodes[0])),
        "--nnodes",
        String(nodes.length),
        "--node-rank",
        String(index),
        "--master-addr",
        nodes[0].fabric.ip,
        "--master-port",
        String(config.vllm.masterPort),
        ...(index === 0 ? [] : ["--headless"]),
    ];
    return { name: VLLM_CONTAINER, ...runs(program), ...servingContainer(config, stack, nodes[index], index === 0 ? "vllm-rank0" : "vllm-headless", revision) };
}

/** The address vLLM's API binds on the first node (`head`): every address, or its fabric address (vllm.host). */
export function apiBindAddress(config: FleetConfig, head: PlannedNode): string {
    return config.vllm.host === "fabric" ? head.fabric.ip : "0.0.0.0";
}

/** The address on the first node where the probes (readiness gate, watchdog) reach the API. */
export function apiProbeAddress(config: FleetConfig, head: PlannedNode): string {
    return config.vllm.host === "fabric" ? head.fabric.ip : "127.0.0.1";
}

/**
 * The arguments of `vllm serve`, listening on `host` ({@link apiBindAddress}). The API key travels
 * as VLLM_API_KEY, never on the command line.
 */
export function vllmServeArgs(config: FleetConfig, host: string): string[] {
    const args = [
        "serve",
        containerModelPath(config),
        "--served-model-name",
        config.model.servedName,
        "--host",
        host,
        "--port",
        String(config.vllm.port),
        "--tensor-parallel-size",
        String(config.parallelism.tensor),
        "--pipeline-parallel-size",
        String(config.parallelism.pipeline),
        "--distributed-executor-backend",
        config.executor,
        "--gpu-memory-utilization",
        String(config.vllm.gpuMemoryUtilization),
    ];
    if (config.vllm.maxModelLen !== undefined) {
        args.push("--max-model-len", String(config.vllm.maxModelLen));
    }
    if (config.vllm.reasoningParser) {
        args.push("--reasoning-parser", config.vllm.reasoningParser);
    }
    if (config.vllm.toolCallParser) {
        args.push("--tool-call-parser", config.vllm.toolCallParser);
    }
    if (config.vllm.enableAutoToolChoice) {
        args.push("--enable-auto-tool-choice");
    }
    if (config.vllm.trustRemoteCode) {
        args.push("--trust-remote-code");
    }
    args.push(...config.vllm.extraArgs);
    return args;
}

/**
 * The watchdog's container on the first node (components/scripts/watchdog.py, given as `script`):
 * it probes a completion and restarts vLLM when it stops serving, rationed (config `supervision`).
 * Host network (it probes the API where it listens), the Docker socket, its own process namespace (it finds
 * `vllm serve` with pgrep in the serving container, and its own command line holds those words).
 * The API key, if any, is added by the caller (a secret).
 */
export function watchdogSpec(config: FleetConfig, stack: string, script: string, revision: string, head: PlannedNode): ContainerSpec {
    const { supervision } = config;
    const env: Record<string, string> = {
        WATCHDOG_EXECUTOR: config.executor,
        WATCHDOG_CONTAINER: config.executor === "ray" ? RAY_CONTAINER : VLLM_CONTAINER,
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
    }
    return {
        name: WATCHDOG_CONTAINER,
        image: config.image.name,
        ...runs(["python3", "-c", script]),
        env,
        mounts: [{ source: "/var/run/docker.sock", target: "/var/run/docker.sock", readOnly: false }],
        networkHost: true,
        ipcHost: false,
        ulimits: [],
        // Unlike the serving containers it restarts without bound: it is small, and it is what
        // bounds the restarts of vLLM.
        restart: "unless-stopped",
        labels: { ...fleetLabels(stack, "watchdog"), [REVISION_LABEL]: revision },
    };
}

/** GPUs needed by the parallelism: TP × PP. */
export function gpusNeeded(config: FleetConfig): number {
    return config.parallelism.tensor * config.parallelism.pipeline;
}
