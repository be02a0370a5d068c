/**
 * The stacks shipped in stacks/: every Pulumi.<stack>.yaml read as Pulumi gives its values to the
 * program (structured values as JSON, through rawConfigValues, like infra/stackConfig.ts) and checked
 * by the program's config validation; the shape of spark-quad (122B on two Sparks, a coder on two
 * more); and a broken spark-quad refused at preview, naming the key, before any host is read.
 */
import * as fs from "fs";
import { createRequire } from "module";
import * as path from "path";
import { describe, expect, it, vi } from "vitest";
import { CONFIG_KEYS, CONFIG_NAMESPACE, FleetConfig, parseFleetConfig } from "../../infra/core/config";
import { rawConfigValues } from "../../infra/core/config/stackValues";
import { findProjectRoot } from "../../infra/core/project";
import { configProblems } from "./configErrors";
import { runProgram } from "./mocks";

const ROOT = findProjectRoot(__dirname);
const STACKS_DIR = path.join(ROOT, "stacks");
// The YAML parser the Pulumi SDK reads stack settings with (LocalWorkspace.stackSettings), taken
// from @pulumi/pulumi's own dependencies rather than added to the project's.
const yaml = createRequire(require.resolve("@pulumi/pulumi/package.json"))("js-yaml") as { load(text: string): unknown };

const stackFiles = fs
    .readdirSync(STACKS_DIR)
    .filter((file) => /^Pulumi\.[a-z0-9-]+\.yaml$/.test(file))
    .sort();

/** A stack file's `vllm-fleet:*` values, keys without the namespace, as the program reads them. */
function stackValues(file: string): Record<string, unknown> {
    const settings = yaml.load(fs.readFileSync(path.join(STACKS_DIR, file), "utf8")) as { config?: Record<string, unknown> };
    const prefix = `${CONFIG_NAMESPACE}:`;
    const entries = Object.entries(settings.config ?? {});
    // Pulumi hands the program a structured value as JSON text and a plain one as text.
    const text = new Map(entries.filter(([key]) => key.startsWith(prefix)).map(([key, value]) => [key.slice(prefix.length), typeof value === "string" ? value : JSON.stringify(value)]));
    expect(entries.filter(([key]) => !key.startsWith(prefix)).map(([key]) => key), `${file}: keys outside ${prefix}`).toEqual([]);
    return rawConfigValues((key) => text.get(key), [...CONFIG_KEYS, ...text.keys()]);
}

describe("the stacks in stacks/", () => {
    it("are the ones docs/architecture.md names", () => {
        const architecture = fs.readFileSync(path.join(ROOT, "docs/architecture.md"), "utf8");
        const line = architecture.split("\n- ").find((item) => item.startsWith("`stacks/`:")) ?? "";
        const named = [...line.matchAll(/`([a-z][a-z-]*)`/g)].map((match) => `Pulumi.${match[1]}.yaml`).sort();
        expect(named).toEqual(["Pulumi.sim-real.yaml", "Pulumi.sim.yaml", "Pulumi.spark-duo.yaml", "Pulumi.spark-quad.yaml", "Pulumi.spark-solo.yaml"]);
        expect(stackFiles).toEqual(named);
    });

    it("README.md shows spark-duo whole, as stacks/ has it", () => {
        const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
        expect(readme).toContain("```yaml\n" + fs.readFileSync(path.join(STACKS_DIR, "Pulumi.spark-duo.yaml"), "utf8") + "```\n");
    });

    it.each(stackFiles)("%s parses and passes the program's config validation", (file) => {
        const config = parseFleetConfig(stackValues(file));
        expect(config.nodes.length).toBeGreaterThan(0);
        expect(config.services.length).toBeGreaterThan(0);
        for (const service of config.services) {
            expect(service.nodes.length, `${file}: service ${service.name}`).toBeGreaterThan(0);
            expect(service.parallelism.tensor * service.parallelism.pipeline, `${file}: service ${service.name}`).toBeLessThanOrEqual(service.nodes.length);
        }
    });
});

describe("spark-quad: 122B on two Sparks, a coder model on two more", () => {
    const raw = stackValues("Pulumi.spark-quad.yaml");
    const config: FleetConfig = parseFleetConfig(raw);
    const byName = Object.fromEntries(config.services.map((service) => [service.name, service]));

    it("serves Qwen3.5-122B-A10B-FP8 with Ray, TP 2, on spark1-2 and the coder with mp, TP 2, on spark3-4", () => {
        expect(config.nodes.map((node) => node.name)).toEqual(["spark1", "spark2", "spark3", "spark4"]);
        expect(config.services.map((service) => service.name)).toEqual(["qwen122b", "coder"]);
        const { qwen122b, coder } = byName;
        expect(qwen122b.nodes.map((node) => node.name)).toEqual(["spark1", "spark2"]);
        expect(qwen122b).toMatchObject({ executor: "ray", parallelism: { tensor: 2, pipeline: 1 }, keyPrefix: "services[0]." });
        expect(qwen122b.model.path).toMatch(/\/Qwen3\.5-122B-A10B-FP8$/);
        expect(qwen122b.model.servedName).toBe("Qwen3.5-122B-A10B-FP8");
        expect(coder.nodes.map((node) => node.name)).toEqual(["spark3", "spark4"]);
        expect(coder).toMatchObject({ executor: "mp", parallelism: { tensor: 2, pipeline: 1 }, keyPrefix: "services[1]." });
        expect(coder.model.servedName).toMatch(/Coder/);
    });

    it("gives each service its settings: the same port on nodes apart, no node shared", () => {
        const { qwen122b, coder } = byName;
        expect(qwen122b.vllm.port).toBe(coder.vllm.port);
        const shared = qwen122b.nodes.filter((node) => coder.nodes.some((other) => other.name === node.name));
        expect(shared).toEqual([]);
        expect(qwen122b.vllm).toMatchObject({ maxModelLen: 32768, reasoningParser: "qwen3", toolCallParser: "qwen3_coder", enableAutoToolChoice: true });
        expect(coder.vllm).toMatchObject({ toolCallParser: "qwen3_coder", enableAutoToolChoice: true });
    });

    it("puts the gateway on spark3, on a port neither service uses there", () => {
        expect(config.gateway).toMatchObject({ node: "spark3", port: 4000 });
        expect([byName.coder.vllm.port, byName.coder.vllm.masterPort]).not.toContain(config.gateway?.port);
    });

    const broken = () => {
        const services = (raw.services as Record<string, unknown>[]).map((service) => ({ ...service }));
        // The coder moved onto spark2, beside the 122B model, with the port they both use.
        services[1] = { ...services[1], nodes: ["spark2", "spark3"] };
        return { ...raw, services };
    };

    it("refuses the coder moved onto spark2 with the same port, naming services[1].vllm.port", () => {
        const lines = configProblems(broken());
        expect(lines).toEqual([
            "  - vllm-fleet:services[1].vllm.port: got 30000; expected a port other than vllm-fleet:services[0].vllm.port, on node spark2 that vllm-fleet:services[0] (qwen122b) shares (the serving containers use the host's network)",
        ]);
    });

    it("refuses it at preview, the program's first step, before any host is read", async () => {
        const probe = vi.fn((node: string): string => {
            throw new Error(`node ${node} was read`);
        });
        const message = await runProgram(broken(), probe).then(
            () => "no error",
            (error: Error) => error.message,
        );
        expect(message).toMatch(/^invalid stack configuration \(1 problem\); nothing was run on any host:\n/);
        expect(message).toContain("vllm-fleet:services[1].vllm.port");
        expect(probe).not.toHaveBeenCalled();
    });
});
