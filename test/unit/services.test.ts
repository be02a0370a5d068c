/**
 * `vllm-fleet:services`: several models per stack. The single-model form as its one service, the
 * services form resolved over the stack's nodes, the refusals (each one issue naming its key), and
 * the stack's config as one service sees it.
 */
import { describe, expect, it } from "vitest";
import { FleetConfig, ServiceConfig, inServiceKeys, parseFleetConfig, serviceConfig } from "../../infra/core/config";
import { DEFAULT_SERVICE } from "../../infra/core/names";
import { sparkDuo } from "./stacks";
import { configErrorOf } from "./configErrors";

const SHA = "0123456789abcdef0123456789abcdef01234567";

/** Four Sparks, no model keys: a services stack adds `services`. */
const quad = {
    nodes: [1, 2, 3, 4].map((index) => ({ name: `spark${index}`, host: `10.1.230.${179 + index}` })),
    ssh: { user: "aurora" },
    fabric: { subnet: "192.168.200.0/24" },
};

/** A service entry with the keys it requires. */
function service(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return { name, image: { name: "nvcr.io/nvidia/vllm:25.11-py3" }, model: { path: `/models/${name}` }, ...extra };
}

/** The 3-service stack of docs/services-and-gateway.md: A (ray) on spark1-2, B (mp) on spark3-4, a small C (mp) beside A on spark1. */
const threeServices = [
    service("big", { nodes: ["spark2", "spark1"] }),
    service("coder", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8001, masterPort: 29502, maxModelLen: 32768 } }),
    service("small", { nodes: ["spark1"], executor: "mp", vllm: { port: 8002, masterPort: 29503, gpuMemoryUtilization: 0.15 } }),
];

function parseServices(services: readonly unknown[], extra: Record<string, unknown> = {}): FleetConfig {
    return parseFleetConfig({ ...quad, services, ...extra });
}

/** The problem lines of a stack with `services`. */
function problems(services: readonly unknown[], extra: Record<string, unknown> = {}): string[] {
    return configErrorOf({ ...quad, services, ...extra }).message.split("\n").slice(1);
}

describe("the single-model form", () => {
    const config = parseFleetConfig(sparkDuo);

    it("is one service named vllm on every node, with the top-level keys", () => {
        expect(config.services).toHaveLength(1);
        const [only] = config.services;
        expect(only.name).toBe(DEFAULT_SERVICE);
        expect(only.nodes).toEqual(config.nodes);
        expect(only).toMatchObject({ image: config.image, executor: config.executor, model: config.model, parallelism: config.parallelism, ray: config.ray });
        expect(only.vllm).toEqual(config.vllm);
        expect(only.vllm.gpuMemoryUtilization).toBe(0.9);
        expect(only.gpuMemoryUtilizationSet).toBe(true);
    });

    it("keeps the top-level values as given (utilization, API key, executor)", () => {
        const custom = parseFleetConfig({ ...sparkDuo, executor: "mp", vllm: { gpuMemoryUtilization: 0.7, apiKey: "none" } });
        expect(custom.services[0]).toMatchObject({ executor: "mp", vllm: { gpuMemoryUtilization: 0.7, apiKey: "none" }, gpuMemoryUtilizationSet: true });
        expect(custom.vllm.gpuMemoryUtilization).toBe(0.7);
    });

    it("sees itself through serviceConfig as the stack's config", () => {
        const view = serviceConfig(config, config.services[0]);
        expect(view).toEqual(config);
    });

    it("still requires image and model, said as before", () => {
        const { image: _image, model: _model, ...rest } = sparkDuo;
        expect(configErrorOf(rest).message.split("\n").slice(1)).toEqual([
            "  - vllm-fleet:image: missing; expected an object",
            "  - vllm-fleet:model: missing; expected an object",
        ]);
    });
});

describe("the services form", () => {
    const config = parseServices(threeServices);

    it("resolves each service's nodes in the stack's order", () => {
        expect(config.services.map((entry) => [entry.name, entry.nodes.map((node) => node.name)])).toEqual([
            ["big", ["spark1", "spark2"]],
            ["coder", ["spark3", "spark4"]],
            ["small", ["spark1"]],
        ]);
        expect(config.services[0].nodes[0]).toEqual({ name: "spark1", host: "10.1.230.180", user: "aurora", port: 22, hostKey: undefined });
    });

    it("defaults the parallelism over each service's own nodes", () => {
        expect(config.services.map((entry) => entry.parallelism)).toEqual([
            { tensor: 2, pipeline: 1 },
            { tensor: 2, pipeline: 1 },
            { tensor: 1, pipeline: 1 },
        ]);
    });

    it("leaves an unset memory share to the planner, and says which were set", () => {
        expect(config.services.map((entry) => [entry.vllm.gpuMemoryUtilization, entry.gpuMemoryUtilizationSet])).toEqual([
            [undefined, false],
            [undefined, false],
            [0.15, true],
        ]);
    });

    it("puts every node in a service that names none", () => {
        const all = parseServices([service("one", { executor: "mp" })]);
        expect(all.services[0].nodes.map((node) => node.name)).toEqual(["spark1", "spark2", "spark3", "spark4"]);
        expect(all.services[0].parallelism).toEqual({ tensor: 4, pipeline: 1 });
    });

    it("fills the single-model fields with the first service's values, its share defaulting to 0.9", () => {
        expect(config.image).toEqual(config.services[0].image);
        expect(config.executor).toBe("ray");
        expect(config.model).toEqual({ path: "/models/big", servedName: "big", sync: "none" });
        expect(config.parallelism).toEqual({ tensor: 2, pipeline: 1 });
        expect(config.vllm).toMatchObject({ port: 8000, gpuMemoryUtilization: 0.9 });
        expect(config.vllm.apiKey).toBeUndefined();
        expect(config.ray).toEqual({ port: 6379 });
    });

    it("takes the model from the Hub per service", () => {
        const hub = parseServices([service("a", { model: { path: "/models/a", source: "hub", repo: "Qwen/Qwen3-8B", revision: SHA } })]);
        expect(hub.services[0].model).toEqual({ path: "/models/a", servedName: "Qwen/Qwen3-8B", sync: "rsync", hub: { repo: "Qwen/Qwen3-8B", revision: SHA } });
    });

    it("does not require the top-level image and model", () => {
        expect(() => parseServices([service("a")])).not.toThrow();
    });
});

describe("serviceConfig: the stack's config as one service sees it", () => {
    const config = parseServices(threeServices);
    const coder = config.services[1] as ServiceConfig;

    it("has the service's nodes, image, executor, model, parallelism, vLLM and Ray settings, and only that service", () => {
        const view = serviceConfig(config, coder, 0.3);
        expect(view.nodes.map((node) => node.name)).toEqual(["spark3", "spark4"]);
        expect(view.image).toEqual(coder.image);
        expect(view.executor).toBe("mp");
        expect(view.model.path).toBe("/models/coder");
        expect(view.parallelism).toEqual({ tensor: 2, pipeline: 1 });
        expect(view.vllm).toMatchObject({ port: 8001, masterPort: 29502, maxModelLen: 32768, gpuMemoryUtilization: 0.3 });
        expect(view.ray).toEqual(coder.ray);
        expect(view.services).toEqual([coder]);
    });

    it("keeps the stack's own keys", () => {
        const view = serviceConfig(config, coder);
        expect(view.fabric).toEqual(config.fabric);
        expect(view.cache).toEqual(config.cache);
        expect(view.supervision).toEqual(config.supervision);
    });

    it("takes the share given in the service over the planner's, and 0.9 when neither is given", () => {
        expect(serviceConfig(config, config.services[2], 0.5).vllm.gpuMemoryUtilization).toBe(0.15);
        expect(serviceConfig(config, coder).vllm.gpuMemoryUtilization).toBe(0.9);
    });

    it("carries the stack's API key setting to each service", () => {
        const single = parseFleetConfig({ ...sparkDuo, vllm: { apiKey: "none" } });
        expect(serviceConfig(single, single.services[0]).vllm.apiKey).toBe("none");
    });
});

describe("refusals, each one issue naming its key", () => {
    it.each([
        ["duplicate service names", [service("a", { executor: "mp" }), service("a", { executor: "mp", vllm: { port: 8001, masterPort: 29502 } })], "services[1].name", /got "a"; expected a name not already used by vllm-fleet:services\[0\]/],
        ["a node not in nodes", [service("a", { nodes: ["spark9"] })], "services[0].nodes[0]", /got "spark9"; expected the name of a node in vllm-fleet:nodes \(spark1, spark2, spark3, spark4\)/],
        ["a node listed twice", [service("a", { nodes: ["spark1", "spark1"] })], "services[0].nodes[1]", /expected a node not already listed at vllm-fleet:services\[0\]\.nodes\[0\]/],
        ["an empty node list", [service("a", { nodes: [] })], "services[0].nodes", /expected at least one node name/],
        ["no services", [], "services", /got \[\]; expected at least one service/],
        ["a name in capitals", [service("Big")], "services[0].name", /expected a lowercase name/],
        ["a service without an image", [{ name: "a", model: { path: "/models/a" } }], "services[0].image", /missing; expected an object/],
        ["a service without a model", [{ name: "a", image: { name: "img:1" } }], "services[0].model", /missing; expected an object/],
        ["TP×PP beyond the service's GPUs", [service("a", { nodes: ["spark1", "spark2"], parallelism: { tensor: 2, pipeline: 2 } })], "services[0].parallelism", /TP×PP \(4\) at most the GPUs of service a's nodes \(2: one per DGX Spark\)/],
        ["the mp layout", [service("a", { nodes: ["spark1", "spark2"], executor: "mp", parallelism: { tensor: 1 } })], "services[0].parallelism", /TP×PP \(1\) divisible by the number of the service's nodes \(2\) with the mp executor/],
        ["a tool choice without a parser", [service("a", { vllm: { enableAutoToolChoice: true } })], "services[0].vllm.toolCallParser", /a tool-call parser when vllm\.enableAutoToolChoice is true/],
        ["sshd's port", [service("a", { vllm: { port: 22 } })], "services[0].vllm.port", /got 22; expected a port other than the SSH port of spark1, spark2, spark3, spark4/],
        ["a port Ray takes, with the ray executor", [service("a", { vllm: { port: 10001 } })], "services[0].vllm.port", /Ray's client server port/],
        ["a model path in a system directory", [service("a", { model: { path: "/usr" } })], "services[0].model.path", /a model directory, not the system directory \/usr/],
        ["a Hub model without a repo", [service("a", { model: { path: "/models/a", source: "hub", revision: SHA } })], "services[0].model.repo", /with the service's model\.source hub/],
        ["an API key in a service (the stack has one)", [service("a", { vllm: { apiKey: "none" } })], "services[0].vllm.apiKey", /unknown key; expected a key of vllm-fleet:services\[0\]\.vllm/],
        ["a share above 1", [service("a", { vllm: { gpuMemoryUtilization: 1.5 } })], "services[0].vllm.gpuMemoryUtilization", /got 1\.5; expected a fraction in \(0, 1\]/],
        [
            "two Ray clusters on one node",
            [service("a", { nodes: ["spark1", "spark2"] }), service("b", { nodes: ["spark2", "spark3"], vllm: { port: 8001 } })],
            "services[1].executor",
            /got "ray"; expected mp, or nodes apart from vllm-fleet:services\[0\] \(a\), which runs Ray on node spark2 too: two Ray clusters on one node: Ray's internal ports \(10001-19999, 52365\) and its object store would collide/,
        ],
        [
            "one vLLM port for two services on a node",
            [service("a", { nodes: ["spark1"], executor: "mp" }), service("b", { nodes: ["spark1", "spark2"], executor: "mp", vllm: { masterPort: 29502 } })],
            "services[1].vllm.port",
            /got 8000; expected a port other than vllm-fleet:services\[0\]\.vllm\.port, on node spark1 that vllm-fleet:services\[0\] \(a\) shares/,
        ],
        [
            "one rendezvous port for two mp services on a node",
            [service("a", { executor: "mp" }), service("b", { executor: "mp", vllm: { port: 8001 } })],
            "services[1].vllm.masterPort",
            /got 29501; expected a port other than vllm-fleet:services\[0\]\.vllm\.masterPort, on nodes spark1, spark2, spark3, spark4/,
        ],
        [
            "a vLLM port equal to the Ray port of a service on the node",
            [service("a", { nodes: ["spark1", "spark2"], ray: { port: 6390 } }), service("b", { nodes: ["spark2"], executor: "mp", vllm: { port: 6390 } })],
            "services[1].vllm.port",
            /got 6390; expected a port other than vllm-fleet:services\[0\]\.ray\.port, on node spark2/,
        ],
        [
            "an mp service's port among Ray's worker ports on a node it shares with a Ray service",
            [service("a", { nodes: ["spark1", "spark2"] }), service("b", { nodes: ["spark1"], executor: "mp", vllm: { port: 12000 } })],
            "services[1].vllm.port",
            /got 12000; expected a port other than Ray's worker ports \(10002-19999\) of vllm-fleet:services\[0\] \(a\)'s Ray/,
        ],
        [
            "a Ray service after an mp service whose port Ray's workers would take",
            [service("a", { nodes: ["spark1"], executor: "mp", vllm: { port: 12000 } }), service("b", { nodes: ["spark1", "spark2"], vllm: { port: 8001 } })],
            "services[1].executor",
            /expected mp, or nodes apart from vllm-fleet:services\[0\] \(a\), whose vllm\.port \(12000\) is among Ray's worker ports/,
        ],
    ])("%s", (_label, services, key, message) => {
        const lines = problems(services);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(new RegExp(`^  - vllm-fleet:${key.replace(/[[\].]/g, "\\$&")}: `));
        expect(lines[0]).toMatch(message);
    });

    it("compares the cache directory with each service's model path", () => {
        const lines = problems([service("a"), service("b", { executor: "mp", nodes: ["spark1"], model: { path: "/var/cache/vllm-fleet/models/b" }, vllm: { port: 8001 } })]);
        expect(lines).toEqual([
            '  - vllm-fleet:cache.dir: got "/var/cache/vllm-fleet"; expected a directory apart from vllm-fleet:services[1].model.path (/var/cache/vllm-fleet/models/b): neither inside the other',
        ]);
    });

    it("lets services share a node on ports of their own, one of them Ray", () => {
        const config = parseServices(threeServices);
        expect(config.services.map((entry) => entry.name)).toEqual(["big", "coder", "small"]);
    });

    it("suggests the nearest key of a service, said once when it is the required one", () => {
        const lines = problems([service("a"), { name: "b", nodes: ["spark3"], image: { name: "img:1" }, modle: { path: "/models/b" } }]);
        expect(lines).toEqual([
            "  - vllm-fleet:services[1].modle: unknown key; expected a key of vllm-fleet:services[1]; did you mean vllm-fleet:services[1].model? (it is required and missing)",
        ]);
    });

    it("refuses the two forms mixed, in one issue naming the single-model keys found", () => {
        const lines = configErrorOf({ ...sparkDuo, vllm: { port: 8000 }, services: [service("a")] }).message.split("\n").slice(1);
        expect(lines).toEqual([
            "  - vllm-fleet:services: set together with vllm-fleet:image, vllm-fleet:model, vllm-fleet:vllm; expected one form: the single-model keys (image, model, vllm) and services do not mix; move them into a service (each entry of services has its own image, model, executor, parallelism, vllm, ray)",
        ]);
    });

    it("says the mix once even when the single-model keys are malformed too", () => {
        const lines = problems([service("a")], { executor: "slurm" });
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^  - vllm-fleet:services: set together with vllm-fleet:executor; expected one form/);
    });
});

describe("a service's keys in messages", () => {
    it("spells the keys of a service's settings as its form does", () => {
        const text = "expected at most 8192: set vllm-fleet:vllm.maxModelLen to 8192 or less, or add ranks (vllm-fleet:parallelism.tensor); vllm-fleet:fabric.subnet stays";
        expect(inServiceKeys(text, { keyPrefix: "services[2]." })).toBe(
            "expected at most 8192: set vllm-fleet:services[2].vllm.maxModelLen to 8192 or less, or add ranks (vllm-fleet:services[2].parallelism.tensor); vllm-fleet:fabric.subnet stays",
        );
        expect(inServiceKeys(text, { keyPrefix: "" })).toBe(text);
    });
});
