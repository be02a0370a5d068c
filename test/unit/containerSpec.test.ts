import * as path from "path";
import { describe, expect, it } from "vitest";
import {
    ContainerSpec,
    parseDockerSize,
    specFromDockerContainerInputs,
    specFromDockerRunArgs,
    toDockerContainerInputs,
    toDockerRunArgs,
} from "../../infra/core/containerSpec";
import { parseFleetConfig } from "../../infra/core/config";
import { DEFAULT_CONTAINERS, DEFAULT_SERVICE, RANK0_LABEL, RAY_HEAD_LABEL, RAY_HEAD_VLLM_CONFIG_ROOT } from "../../infra/core/names";
import { FleetConfig } from "../../infra/core/config";
import {
    CACHE_ENV,
    CONTAINER_CACHE_DIR,
    NODE_LOCAL_ENV,
    PlannedNode,
    cacheKey,
    joinedTo,
    joinedToRank0,
    RANK_KEEPER_PATH,
    mpRankSpec,
    mpServeProgram,
    planGateway,
    networkEnv,
    planCache,
    rayContainerSpec,
    transportHint,
    transportPolicy,
    withCompileCache,
    withEnv,
} from "../../infra/core/plan";
import { sparkDuo } from "./stacks";

const config = parseFleetConfig(sparkDuo);
const TOKEN = "0123456789abcdef0123456789abcdef";
/** A rank keeper's text (components/scripts/vllm-rank.py in the program). */
const KEEPER = "# the rank keeper\n";

/** Node `index`'s Ray container as a component realizes it: the plan's, with the token and (a worker) its head. */
function raySpec(config: FleetConfig, stack: string, nodes: readonly PlannedNode[], index: number, revision: string, token: string, headId?: string): ContainerSpec {
    const spec = withEnv(rayContainerSpec({ config, stack, service: DEFAULT_SERVICE, containers: DEFAULT_CONTAINERS }, nodes, index, revision), { RAY_AUTH_TOKEN: token });
    return index === 0 ? spec : joinedTo(spec, nodes[index].name, headId);
}
const planned: PlannedNode[] = [
    { name: "spark1", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.12", hcas: ["rocep1s0f1", "roceP2p1s0f1"], rdmaDevices: ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"] }, gpus: 1 },
    { name: "spark2", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.13", hcas: ["rocep1s0f1"], rdmaDevices: [] }, gpus: 1 },
];

/** The gateway of spark-duo on spark2, and its watchdog, as planned (with the key the component adds). */
const gateway = planGateway(
    parseFleetConfig({ ...sparkDuo, gateway: { node: "spark2", image: { name: "vllm-router:0.1.17" } } }),
    "spark-duo",
    planned,
    [{ name: DEFAULT_SERVICE, servedNames: ["Qwen3.5-122B-A10B-FP8"], apiAddress: planned[0].fabric.ip, port: 30000 }],
    { launcher: "print('the launcher')", watchdog: "print('the watchdog')" },
)!;

const specs: [string, ContainerSpec][] = [
    ["the Ray head", raySpec(config, "spark-duo", planned, 0, "r1", TOKEN)],
    ["a Ray worker", raySpec(config, "spark-duo", planned, 1, "r1", TOKEN, "f00d")],
    [
        "a container keeping its image's entrypoint, on a bridge network",
        {
            name: "plain",
            image: "debian:bookworm",
            command: ["sleep", "infinity"],
            env: { A: "x=y", EMPTY: "" },
            mounts: [{ source: "/data", target: "/data", readOnly: false }],
            networkHost: false,
            ipcHost: false,
            ulimits: [],
            restart: "unless-stopped",
            labels: {},
        },
    ],
    ["the gateway", withEnv(gateway.spec, { VLLM_API_KEY: TOKEN })],
    ["the gateway's watchdog", gateway.watchdog!],
];

describe("both container drivers express the same container", () => {
    it.each(specs)("%s: docker run arguments read back into the spec", (_label, spec) => {
        expect(specFromDockerRunArgs(toDockerRunArgs(spec))).toEqual(spec);
    });

    it.each(specs)("%s: Docker provider inputs read back into the spec", (_label, spec) => {
        expect(specFromDockerContainerInputs(toDockerContainerInputs(spec))).toEqual(spec);
    });

    it.each(specs)("%s: the two realizations agree with each other", (_label, spec) => {
        expect(specFromDockerRunArgs(toDockerRunArgs(spec))).toEqual(specFromDockerContainerInputs(toDockerContainerInputs(spec)));
    });
});

describe("docker run arguments", () => {
    it("replace the image's entrypoint with Ray itself, the only process, and a shm of whole MiB", () => {
        const args = toDockerRunArgs(specs[0][1]);
        const image = args.indexOf("hellohal2064/vllm-qwen3.5-gb10:latest");
        expect(args[image - 1]).toBe("--entrypoint=ray");
        expect(args.slice(image + 1, image + 3)).toEqual(["start", "--block"]);
        // 10.24 GiB, as the seeds' --shm-size 10.24g, in whole MiB (10486).
        expect(args).toEqual(expect.arrayContaining(["--shm-size", `${10486 * 1024 ** 2}b`]));
        expect(args).toEqual(expect.arrayContaining(["--label", "vllm-fleet.stack=spark-duo", "--label", "vllm-fleet.role=ray-head"]));
    });

    it("put the fabric port's HCAs into NCCL_IB_HCA", () => {
        expect(toDockerRunArgs(specs[0][1])).toContain("NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1");
    });

    it("give the containers the node's RDMA devices, IPC_LOCK and unlimited memlock, not --privileged", () => {
        const args = toDockerRunArgs(specs[0][1]);
        expect(args).toEqual(expect.arrayContaining(["--device", "/dev/infiniband/rdma_cm", "--device", "/dev/infiniband/uverbs0"]));
        expect(args).toEqual(expect.arrayContaining(["--cap-add", "CAP_IPC_LOCK", "--ulimit", "memlock=-1:-1"]));
        expect(args).not.toContain("--privileged");
        // A node without device nodes gets no --device (Docker would refuse a missing path).
        expect(toDockerRunArgs(specs[1][1])).not.toContain("--device");
    });

    it("run privileged, with no device list, only when the config asks for it", () => {
        const privileged = parseFleetConfig({ ...sparkDuo, container: { privileged: true } });
        const args = toDockerRunArgs(raySpec(privileged, "spark-duo", planned, 0, "r1", TOKEN));
        expect(args).toContain("--privileged");
        expect(args).not.toContain("--device");
        expect(args).not.toContain("--cap-add");
    });
});

describe("the network pins", () => {
    it("set only variables something reads: no RAY_*_IP_ADDRESS (Ray reads none), no TP_SOCKET_IFNAME or UCX_NET_DEVICES", () => {
        const env = networkEnv(planned[0].fabric);
        expect(Object.keys(env).sort()).toEqual(
            [
                "GLOO_SOCKET_IFNAME",
                "NCCL_DEBUG",
                "NCCL_DEBUG_SUBSYS",
                "NCCL_IB_HCA",
                "NCCL_SOCKET_IFNAME",
                "RAY_USAGE_STATS_ENABLED",
                "RAY_memory_monitor_refresh_ms",
                "VLLM_HOST_IP",
                "VLLM_NO_USAGE_STATS",
            ].sort(),
        );
        expect(env).toMatchObject({ NCCL_DEBUG: "INFO", NCCL_DEBUG_SUBSYS: "INIT,NET" });
    });

    it("keep NCCL off other ports' RoCE devices when the fabric port has none", () => {
        const env = networkEnv({ interface: "eth1", ip: "10.0.0.2", hcas: [], rdmaDevices: [] });
        expect(env.NCCL_IB_HCA).toBeUndefined();
        expect(env.NCCL_IB_DISABLE).toBe("1");
    });

    it("list every node-specific pin as not to be carried over by vLLM's Ray executor, in the head's config root", () => {
        const differing = Object.keys(networkEnv(planned[0].fabric)).filter((key) => networkEnv(planned[0].fabric)[key] !== networkEnv({ ...planned[1].fabric, interface: "enP2p1s0f1np1", hcas: ["roceP2p1s0f1"] })[key]);
        expect(differing.every((key) => (NODE_LOCAL_ENV as readonly string[]).includes(key))).toBe(true);
        expect(NODE_LOCAL_ENV).toEqual(expect.arrayContaining(["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "VLLM_HOST_IP"]));
        expect(raySpec(config, "spark-duo", planned, 0, "r1", TOKEN).env.VLLM_CONFIG_ROOT).toBe(RAY_HEAD_VLLM_CONFIG_ROOT);
    });
});

describe("vLLM's own wait for its engine", () => {
    it("follows timeouts.vllmReadySeconds in every serving container, both executors, as both drivers realize them", () => {
        const slow = parseFleetConfig({ ...sparkDuo, timeouts: { vllmReadySeconds: 2400 } });
        const context = { config: slow, stack: "spark-duo", service: DEFAULT_SERVICE, containers: DEFAULT_CONTAINERS };
        const serving = [
            raySpec(slow, "spark-duo", planned, 0, "r1", TOKEN),
            raySpec(slow, "spark-duo", planned, 1, "r1", TOKEN, "f00d"),
            mpRankSpec(context, planned, 0, "r1", KEEPER),
            mpRankSpec(context, planned, 1, "r1", KEEPER),
        ];
        for (const spec of serving) {
            expect(spec.env.VLLM_ENGINE_READY_TIMEOUT_S).toBe("2400");
            expect(toDockerRunArgs(spec)).toContain("VLLM_ENGINE_READY_TIMEOUT_S=2400");
            expect(toDockerContainerInputs(spec).envs).toContain("VLLM_ENGINE_READY_TIMEOUT_S=2400");
        }
        // The default: the gate's 1800 s, not vLLM's 600 s.
        expect(raySpec(config, "spark-duo", planned, 0, "r1", TOKEN).env.VLLM_ENGINE_READY_TIMEOUT_S).toBe("1800");
    });
});

describe("the fabric check's policy", () => {
    const withPolicy = (socketTransport: string) => parseFleetConfig({ ...sparkDuo, fabric: { ...(sparkDuo.fabric as object), socketTransport } });
    const plain: PlannedNode = { name: "spark3", fabric: { interface: "eth1", ip: "192.168.200.14", hcas: [], rdmaDevices: [] }, gpus: 1 };

    it("by default refuses TCP where the fabric port has RoCE devices and warns where it has none", () => {
        expect(transportPolicy(config, planned[0])).toBe("refuse");
        expect(transportPolicy(config, plain)).toBe("warn");
    });

    it("refuses or warns everywhere when the config says so", () => {
        expect(transportPolicy(withPolicy("warn"), planned[0])).toBe("warn");
        expect(transportPolicy(withPolicy("refuse"), plain)).toBe("refuse");
    });

    it("says why a node may be on TCP, from its facts", () => {
        expect(transportHint(config, planned[1])).toMatch(/RoCE devices \(rocep1s0f1\) but no RDMA device nodes in \/dev\/infiniband.*ib_uverbs/);
        expect(transportHint(config, planned[0])).toMatch(/\/dev\/infiniband\/rdma_cm, \/dev\/infiniband\/uverbs0, CAP_IPC_LOCK and NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1/);
        expect(transportHint(config, plain)).toMatch(/eth1 has no RoCE device/);
    });
});

describe("Ray workers follow their head", () => {
    it("carry the id of the head container they join; the head carries none", () => {
        expect(raySpec(config, "spark-duo", planned, 0, "r1", TOKEN).labels[RAY_HEAD_LABEL]).toBeUndefined();
        expect(raySpec(config, "spark-duo", planned, 1, "r1", TOKEN, "c0ffee").labels[RAY_HEAD_LABEL]).toBe("c0ffee");
    });

    it("get a new spec (so are replaced) with a new head container, and cannot be planned without one", () => {
        expect(raySpec(config, "spark-duo", planned, 1, "r1", TOKEN, "new")).not.toEqual(raySpec(config, "spark-duo", planned, 1, "r1", TOKEN, "old"));
        expect(() => raySpec(config, "spark-duo", planned, 1, "r1", TOKEN)).toThrow(/needs the id of its head container/);
    });
});

describe("headless vLLM ranks follow rank 0", () => {
    it("carry the id of the rank 0 container they join, a new one with a new rank 0, and cannot be planned without one", () => {
        const rank = specs[2][1];
        expect(joinedToRank0(rank, "spark2", "c0ffee").labels[RANK0_LABEL]).toBe("c0ffee");
        expect(joinedToRank0(rank, "spark2", "new")).not.toEqual(joinedToRank0(rank, "spark2", "old"));
        expect(() => joinedToRank0(rank, "spark2", undefined)).toThrow(/headless vLLM rank on spark2 needs the id of rank 0's container/);
    });
});

describe("each vLLM rank's keeper (mp executor)", () => {
    const context = { config: parseFleetConfig({ ...sparkDuo, executor: "mp" }), stack: "spark-duo", service: DEFAULT_SERVICE, containers: DEFAULT_CONTAINERS };

    it("is the first process of every rank, with vLLM's program after it and its text as a file of the container", () => {
        for (const index of [0, 1]) {
            const spec = mpRankSpec(context, planned, index, "r1", KEEPER);
            expect(spec.entrypoint).toEqual(["python3"]);
            expect(spec.command).toEqual([RANK_KEEPER_PATH, ...mpServeProgram(context.config, planned, index)]);
            expect(spec.files).toEqual([{ path: RANK_KEEPER_PATH, content: KEEPER }]);
            // Docker's policy restarts what the keeper turns into a failure.
            expect(spec.restart).toBe("on-failure");
        }
    });

    it("of a headless rank watches rank 0 at the first node's fabric address; rank 0's watches no one", () => {
        expect(mpRankSpec(context, planned, 1, "r1", KEEPER).env).toMatchObject({
            VLLM_FLEET_RANK0_ADDRESS: "192.168.200.12",
            VLLM_FLEET_RANK0_HEALTH: "http://192.168.200.12:8000/health",
        });
        expect(Object.keys(mpRankSpec(context, planned, 0, "r1", KEEPER).env).filter((name) => name.startsWith("VLLM_FLEET_RANK0"))).toEqual([]);
    });

    it("travels with the rank through both container drivers", () => {
        const spec = mpRankSpec(context, planned, 1, "r1", KEEPER);
        expect(specFromDockerRunArgs(toDockerRunArgs(spec), spec.files)).toEqual(spec);
        expect(specFromDockerContainerInputs(toDockerContainerInputs(spec))).toEqual(spec);
    });
});

describe("Docker provider inputs", () => {
    it("refuse what the provider cannot keep: a cleared entrypoint, a shm size of a fraction of a MiB", () => {
        const spec = specs[2][1];
        expect(() => toDockerContainerInputs({ ...spec, entrypoint: [] })).toThrow(/cleared entrypoint/);
        expect(() => toDockerContainerInputs({ ...spec, entrypoint: [""] })).toThrow(/cleared entrypoint/);
        expect(() => toDockerContainerInputs({ ...spec, shmSizeBytes: Math.round(10.24 * 1024 ** 3) })).toThrow(/whole MiB/);
    });
});

describe("parseDockerSize", () => {
    it.each([
        ["1024", 1024],
        ["1024b", 1024],
        ["64m", 64 * 1024 ** 2],
        ["10g", 10 * 1024 ** 3],
        ["1.5k", 1536],
    ])("%s is %d bytes", (text, bytes) => {
        expect(parseDockerSize(text)).toBe(bytes);
    });

    it("refuses what is not a size", () => {
        expect(() => parseDockerSize("ten gigs")).toThrow(/not a docker size/);
    });
});

const IMAGE_A = `sha256:${"0123456789abcdef".repeat(4)}`;
const IMAGE_B = `sha256:${"fedcba9876543210".repeat(4)}`;

describe("the serving containers mount the cache of their image", () => {
    const config = parseFleetConfig(sparkDuo);
    const cache = planCache(config, "spark-duo");
    const context = { config, stack: "spark-duo", service: DEFAULT_SERVICE, containers: DEFAULT_CONTAINERS };
    const head = rayContainerSpec(context, planned, 0, "r1");

    it("keys the directory by the image's content identity: <dir>/<stack>/image-<16 hex digits>", () => {
        expect(cache).toEqual({ stackDir: "/var/cache/vllm-fleet/spark-duo", removeOnDestroy: false, image: config.image.name });
        expect(cacheKey(IMAGE_A)).toBe("image-0123456789abcdef");
        expect(cacheKey(IMAGE_B)).toBe("image-fedcba9876543210");
        expect(() => cacheKey("not-an-id")).toThrow(/content identity "not-an-id" is not sha256:<64 hex>/);
    });

    it("mounts it read-write at one path and points every library's cache into it", () => {
        const spec = withCompileCache(head, cache, IMAGE_A);
        expect(spec.mounts).toEqual([...head.mounts, { source: "/var/cache/vllm-fleet/spark-duo/image-0123456789abcdef", target: CONTAINER_CACHE_DIR, readOnly: false }]);
        expect(spec.env).toEqual({ ...head.env, ...CACHE_ENV });
        expect(CACHE_ENV).toEqual({
            VLLM_CACHE_ROOT: "/vllm-fleet-cache/vllm",
            TORCHINDUCTOR_CACHE_DIR: "/vllm-fleet-cache/inductor",
            TRITON_CACHE_DIR: "/vllm-fleet-cache/triton",
            FLASHINFER_WORKSPACE_BASE: "/vllm-fleet-cache/flashinfer",
            CUDA_CACHE_PATH: "/vllm-fleet-cache/cuda",
        });
        // Nothing else of the container changes.
        expect({ ...spec, env: head.env, mounts: head.mounts }).toEqual(head);
    });

    it("gives another image another directory, so a stale cache is never read", () => {
        const a = withCompileCache(head, cache, IMAGE_A).mounts.at(-1)!.source;
        const b = withCompileCache(head, cache, IMAGE_B).mounts.at(-1)!.source;
        expect(a).not.toBe(b);
        expect(path.posix.dirname(a)).toBe(path.posix.dirname(b));
    });

    it("is the same for the mp executor's ranks, and absent with cache.enabled false", () => {
        const mp = parseFleetConfig({ ...sparkDuo, executor: "mp" });
        const rank = mpRankSpec({ ...context, config: mp }, planned, 1, "r1", KEEPER);
        expect(withCompileCache(rank, planCache(mp, "spark-duo"), IMAGE_A).env.VLLM_CACHE_ROOT).toBe("/vllm-fleet-cache/vllm");
        const off = parseFleetConfig({ ...sparkDuo, cache: { enabled: false } });
        expect(planCache(off, "spark-duo")).toBeUndefined();
        expect(withCompileCache(head, planCache(off, "spark-duo"), IMAGE_A)).toBe(head);
    });

    it("refuses an unknown image identity and a stack name that is no directory name", () => {
        expect(() => withCompileCache(head, cache, undefined)).toThrow(/the image's content identity is unknown/);
        expect(() => planCache(config, "..")).toThrow(/cannot name a directory under vllm-fleet:cache.dir/);
    });

    it.each([
        ["docker run arguments", (spec: ContainerSpec) => specFromDockerRunArgs(toDockerRunArgs(spec))],
        ["Docker provider inputs", (spec: ContainerSpec) => specFromDockerContainerInputs(toDockerContainerInputs(spec))],
    ])("is expressed alike by %s", (_label, roundTrip) => {
        const spec = withCompileCache(head, cache, IMAGE_A);
        expect(roundTrip(spec)).toEqual(spec);
    });
});
