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
import { PlannedNode, RAY_HEAD_SPEC_LABEL, rayContainerSpec } from "../../infra/plan";
import { sparkDuo } from "./stacks";

const config = parseFleetConfig(sparkDuo);
const planned: PlannedNode[] = [
    { name: "spark1", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.12", hcas: ["rocep1s0f1", "roceP2p1s0f1"] }, gpus: 1 },
    { name: "spark2", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.13", hcas: ["rocep1s0f1"] }, gpus: 1 },
];

const specs: [string, ContainerSpec][] = [
    ["the Ray head", rayContainerSpec(config, "spark-duo", planned, 0)],
    ["a Ray worker", rayContainerSpec(config, "spark-duo", planned, 1)],
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
    it("clear the entrypoint and run Ray as the only process, as the seeds did", () => {
        const args = toDockerRunArgs(specs[0][1]);
        const image = args.indexOf("hellohal2064/vllm-qwen3.5-gb10:latest");
        expect(args[image - 1]).toBe("--entrypoint=");
        expect(args.slice(image + 1, image + 4)).toEqual(["ray", "start", "--block"]);
        expect(args).toEqual(expect.arrayContaining(["--shm-size", `${Math.round(10.24 * 1024 ** 3)}b`]));
        expect(args).toEqual(expect.arrayContaining(["--label", "vllm-fleet.stack=spark-duo", "--label", "vllm-fleet.role=ray-head"]));
    });

    it("put every HCA of a node into NCCL_IB_HCA", () => {
        expect(toDockerRunArgs(specs[0][1])).toContain("NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1");
    });
});

describe("Ray workers follow their head", () => {
    const trio: PlannedNode[] = [...planned, { name: "spark3", fabric: { interface: "enp1s0f1np1", ip: "192.168.200.14", hcas: [] }, gpus: 1 }];
    const label = (nodes: PlannedNode[], index: number) => rayContainerSpec(config, "spark-duo", nodes, index).labels[RAY_HEAD_SPEC_LABEL];

    it("carry a digest of the head's spec, the same on every worker; the head carries none", () => {
        expect(label(trio, 0)).toBeUndefined();
        expect(label(trio, 1)).toMatch(/^[0-9a-f]{16}$/);
        expect(label(trio, 2)).toBe(label(trio, 1));
    });

    it("get a new spec (so are replaced) when the head's spec changes, and only then", () => {
        const headWithTwoGpus = [{ ...trio[0], gpus: 2 }, trio[1], trio[2]];
        expect(label(headWithTwoGpus, 1)).not.toBe(label(trio, 1));
        const otherWorkerChanged = [trio[0], trio[1], { ...trio[2], gpus: 2 }];
        expect(rayContainerSpec(config, "spark-duo", otherWorkerChanged, 1)).toEqual(rayContainerSpec(config, "spark-duo", trio, 1));
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
