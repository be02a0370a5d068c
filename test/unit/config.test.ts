import { describe, expect, it } from "vitest";
import { ConfigError, cidrContains, parseCidr, parseFleetConfig } from "../../infra/config";
import { sparkDuo } from "./stacks";

const duo = sparkDuo;

function issuesOf(raw: object): string[] {
    try {
        parseFleetConfig(raw);
    } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).issues.map((issue) => issue.key);
    }
    throw new Error("expected a ConfigError");
}

describe("parseFleetConfig defaults", () => {
    const config = parseFleetConfig(duo);

    it("fills the defaults a Spark user expects", () => {
        expect(config.containerDriver).toBe("docker");
        expect(config.commandRunner).toBe("pulumi-command");
        expect(config.parallelism).toEqual({ tensor: 2, pipeline: 1 });
        expect(config.vllm.port).toBe(8000);
        expect(config.vllm.gpuMemoryUtilization).toBe(0.9);
        expect(config.ray.port).toBe(6379);
        expect(config.timeouts).toEqual({ sshConnectSeconds: 20, rayReadySeconds: 300, vllmReadySeconds: 1800 });
    });

    it("resolves SSH settings per node and names the model after its directory", () => {
        expect(config.nodes).toEqual([
            { name: "spark1", host: "10.1.230.180", user: "aurora", port: 22, hostKey: undefined },
            { name: "spark2", host: "10.1.230.181", user: "aurora", port: 22, hostKey: undefined },
        ]);
        expect(config.model).toEqual({ path: "/home/aurora/models/Qwen3.5-122B-A10B-FP8", servedName: "Qwen3.5-122B-A10B-FP8", sync: "none" });
    });

    it("lets a node override the cluster-wide SSH user and port", () => {
        const custom = parseFleetConfig({ ...duo, nodes: [{ name: "a", host: "h1", user: "root", port: 2222 }] });
        expect(custom.nodes[0]).toMatchObject({ user: "root", port: 2222 });
        expect(custom.parallelism.tensor).toBe(1);
    });
});

describe("parseFleetConfig errors name the key, the value and what was expected", () => {
    it.each([
        ["a fraction above 1", { vllm: { gpuMemoryUtilization: 1.5 } }, "vllm-fleet:vllm.gpuMemoryUtilization", /got 1\.5; expected a fraction in \(0, 1\]/],
        ["a subnet with host bits", { fabric: { subnet: "192.168.200.7/24" } }, "vllm-fleet:fabric.subnet", /got "192\.168\.200\.7\/24"; expected an IPv4 CIDR block/],
        ["a relative model path", { model: { path: "models/q" } }, "vllm-fleet:model.path", /expected an absolute path/],
        ["an unknown driver", { containerDriver: "podman" }, "vllm-fleet:containerDriver", /got "podman"; expected one of "docker", "ssh"/],
        ["an image with shell syntax", { image: { name: "x;rm -rf /" } }, "vllm-fleet:image.name", /expected a Docker image reference/],
        ["a misspelled field", { vllm: { maxModelLength: 4096 } }, "vllm-fleet:vllm", /unknown: maxModelLength/],
        ["a port as a string", { ray: { port: "6379" } }, "vllm-fleet:ray.port", /got "6379"; expected a number/],
    ])("rejects %s", (_label, patch, key, message) => {
        let error: unknown;
        try {
            parseFleetConfig({ ...duo, ...patch });
        } catch (caught) {
            error = caught;
        }
        expect(error).toBeInstanceOf(ConfigError);
        const text = (error as Error).message;
        expect(text).toContain(`${key}:`);
        expect(text).toMatch(message);
        expect(text).toMatch(/nothing was run on any host/);
    });

    it("reports every problem at once", () => {
        expect(issuesOf({ ...duo, fabric: { subnet: "nope" }, vllm: { port: 0 } })).toEqual([
            "vllm-fleet:fabric.subnet",
            "vllm-fleet:vllm.port",
        ]);
    });

    it("requires nodes, fabric, image and model", () => {
        expect(issuesOf({})).toEqual(["vllm-fleet:nodes", "vllm-fleet:fabric", "vllm-fleet:image", "vllm-fleet:model"]);
    });

    it("needs an SSH user for every node", () => {
        expect(issuesOf({ ...duo, ssh: undefined })).toEqual(["vllm-fleet:nodes[0].user", "vllm-fleet:nodes[1].user"]);
    });

    it("refuses duplicate node names and hosts", () => {
        const nodes = [
            { name: "spark1", host: "h1" },
            { name: "spark1", host: "h1" },
        ];
        expect(issuesOf({ ...duo, nodes })).toEqual(["vllm-fleet:nodes[1].name", "vllm-fleet:nodes[1].host"]);
    });

    it("refuses extra args that vllm-fleet sets itself", () => {
        const error = (() => {
            try {
                parseFleetConfig({ ...duo, vllm: { extraArgs: ["--enforce-eager", "--tensor-parallel-size=4"] } });
            } catch (caught) {
                return caught as ConfigError;
            }
            throw new Error("expected a ConfigError");
        })();
        expect(error.issues).toHaveLength(1);
        expect(error.issues[0].key).toBe("vllm-fleet:vllm.extraArgs[1]");
        expect(error.message).toContain("--tensor-parallel-size comes from another vllm-fleet key");
    });

    it("needs a tool-call parser for auto tool choice, as vLLM does", () => {
        expect(issuesOf({ ...duo, vllm: { enableAutoToolChoice: true } })).toEqual(["vllm-fleet:vllm.toolCallParser"]);
    });

    it("needs TP×PP divisible by the node count with the mp executor", () => {
        expect(issuesOf({ ...duo, executor: "mp", parallelism: { tensor: 3 } })).toEqual(["vllm-fleet:parallelism"]);
        expect(parseFleetConfig({ ...duo, executor: "mp", parallelism: { tensor: 4 } }).executor).toBe("mp");
    });

    it("keeps the Ray and vLLM ports apart", () => {
        expect(issuesOf({ ...duo, vllm: { port: 6379 } })).toEqual(["vllm-fleet:ray.port"]);
    });
});

describe("CIDR helpers", () => {
    it.each([
        ["192.168.200.0/24", "192.168.200.12", true],
        ["192.168.200.0/24", "192.168.201.12", false],
        ["10.0.0.0/8", "10.255.1.1", true],
        ["0.0.0.0/0", "8.8.8.8", true],
        ["192.168.200.12/32", "192.168.200.12", true],
        ["192.168.200.0/24", "not-an-ip", false],
    ])("%s contains %s: %s", (cidr, ip, inside) => {
        const block = parseCidr(cidr);
        expect(block).toBeDefined();
        expect(cidrContains(block!, ip)).toBe(inside);
    });

    it.each(["192.168.200.1/24", "300.1.1.0/24", "10.0.0.0/33", "10.0.0.0", "fe80::/64"])("rejects %s", (cidr) => {
        expect(parseCidr(cidr)).toBeUndefined();
    });
});
