import { describe, expect, it } from "vitest";
import {
    ContainerSpec,
    parseDockerSize,
    specFromDockerContainerInputs,
    specFromDockerRunArgs,
    toDockerContainerInputs,
    toDockerRunArgs,
} from "../../components/containerSpec";
import { parseFleetConfig } from "../../infra/config";
import { PlannedNode, RAY_HEAD_LABEL, rayContainerSpec } from "../../infra/plan";
import { sparkDuo } from "./stacks";

const config = parseFleetConfig(sparkDuo);
const planned: PlannedNode[] = [
    { name: "spark1", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.12", hcas: ["rocep1s0f1", "roceP2p1s0f1"] }, gpus: 1 },
    { name: "spark2", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.13", hcas: ["rocep1s0f1"] }, gpus: 1 },
];

const specs: [string, ContainerSpec][] = [
    ["the Ray head", rayContainerSpec(config, "spark-duo", planned, 0, "r1")],
    ["a Ray worker", rayContainerSpec(config, "spark-duo", planned, 1, "r1", "f00d")],
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

    it("put every HCA of a node into NCCL_IB_HCA", () => {
        expect(toDockerRunArgs(specs[0][1])).toContain("NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1");
    });
});

describe("Ray workers follow their head", () => {
    it("carry the id of the head container they join; the head carries none", () => {
        expect(rayContainerSpec(config, "spark-duo", planned, 0, "r1").labels[RAY_HEAD_LABEL]).toBeUndefined();
        expect(rayContainerSpec(config, "spark-duo", planned, 1, "r1", "c0ffee").labels[RAY_HEAD_LABEL]).toBe("c0ffee");
    });

    it("get a new spec (so are replaced) with a new head container, and cannot be planned without one", () => {
        expect(rayContainerSpec(config, "spark-duo", planned, 1, "r1", "new")).not.toEqual(rayContainerSpec(config, "spark-duo", planned, 1, "r1", "old"));
        expect(() => rayContainerSpec(config, "spark-duo", planned, 1, "r1")).toThrow(/needs the id of its head container/);
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
