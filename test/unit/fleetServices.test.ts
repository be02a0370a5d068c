/**
 * A stack of several services (issue 23), through the whole program on mocks: each service its own
 * components, containers and labels; adding, changing or removing one service leaves every resource
 * of the others as it was (their inputs, so Pulumi keeps them); services sharing a node get memory
 * budgets that fit together, or are refused with the numbers.
 */
import { describe, expect, it } from "vitest";
import { SERVICE_LABEL, STACK_LABEL } from "../../infra/core/names";
import { BIG, CODER, SMALL, fabricIps, fleet, image, probe } from "./fleetFixtures";
import { MockRun, liveAfter, runProgram, unsecret } from "./mocks";


/** Each service's watchdog is on its first node. */
const watchdogNode = (resource: string) => (resource.startsWith("coder-") ? "spark3" : "spark1");

/** The inputs of every resource, by name, as plain JSON. */
function inputsByName(run: MockRun): Map<string, string> {
    return new Map(run.resources.map((resource) => [`${resource.type} ${resource.name}`, JSON.stringify(unsecret(resource.inputs))]));
}

/** The names of the resources whose inputs differ between two runs, or that only one of them has. */
function changed(before: MockRun, after: MockRun): { added: string[]; removed: string[]; changed: string[] } {
    const a = inputsByName(before);
    const b = inputsByName(after);
    return {
        added: [...b.keys()].filter((name) => !a.has(name)).sort(),
        removed: [...a.keys()].filter((name) => !b.has(name)).sort(),
        changed: [...b.keys()].filter((name) => a.has(name) && a.get(name) !== b.get(name)).sort(),
    };
}

/** The `docker run` labels of a container step (the ssh driver), from its program. */
function labelsOf(run: MockRun, name: string): Record<string, string> {
    const program = String(unsecret(run.byName(name).inputs.create));
    return Object.fromEntries([...program.matchAll(/'--label' '([^=']+)=([^']*)'/g)].map((match) => [match[1], match[2]]));
}

describe("a stack of services (mocks)", async () => {
    const two = await runProgram(fleet([BIG, CODER]), probe);
    const three = await runProgram(fleet([BIG, CODER, SMALL]), probe, undefined, liveAfter(two, watchdogNode));

    it("gives each service its own components, named after it", () => {
        const components = three.resources.filter((resource) => /^vllm-fleet:(ray|vllm):/.test(resource.type)).map((resource) => `${resource.type} ${resource.name}`);
        expect(components.sort()).toEqual([
            "vllm-fleet:ray:RayCluster big-ray",
            "vllm-fleet:vllm:ServeArgsCheck big-vllm-args-check",
            "vllm-fleet:vllm:ServeArgsCheck coder-vllm-args-check",
            "vllm-fleet:vllm:ServeArgsCheck small-vllm-args-check",
            "vllm-fleet:vllm:VllmService big-vllm",
            "vllm-fleet:vllm:VllmService coder-vllm",
            "vllm-fleet:vllm:VllmService small-vllm",
        ]);
        // One Ray token per Ray cluster: only big has one.
        expect(three.resources.filter((resource) => resource.type.endsWith("FleetSecret")).map((resource) => resource.name).sort()).toEqual(["big-ray-token", "vllm-api-key"]);
    });

    it("names each service's containers and labels them with the stack and the service", () => {
        const labels = labelsOf(three, "small-vllm-spark1-rank0");
        expect(labels[STACK_LABEL]).toBe("unit");
        expect(labels[SERVICE_LABEL]).toBe("small");
        expect(String(unsecret(three.byName("small-vllm-spark1-rank0").inputs.create))).toContain("NAME='vllm-fleet-small-vllm'");
        expect(String(unsecret(three.byName("big-ray-spark1-ray-head").inputs.create))).toContain("NAME='vllm-fleet-big-ray'");
        expect(String(unsecret(three.byName("coder-vllm-spark3-rank0").inputs.create))).toContain("NAME='vllm-fleet-coder-vllm'");
    });

    it("puts out each service's endpoint on its own first node and port", () => {
        const services = three.outputs.services as Record<string, { endpoint: string; model: string; nodes: string[]; executor: string }>;
        expect(Object.fromEntries(Object.entries(services).map(([name, service]) => [name, [service.endpoint, service.model, service.nodes.join(","), service.executor]]))).toEqual({
            big: ["http://10.1.230.180:8000/v1", "big", "spark1,spark2", "ray"],
            coder: ["http://10.1.230.182:8001/v1", "coder", "spark3,spark4", "mp"],
            small: ["http://10.1.230.180:8002/v1", "small", "spark1", "mp"],
        });
    });

    it("adds a service as its own resources only: every resource of the others keeps its inputs", () => {
        const diff = changed(two, three);
        expect(diff.removed).toEqual([]);
        expect(diff.changed.filter((name) => !name.endsWith(" default"))).toEqual([]);
        expect(diff.added.length).toBeGreaterThan(0);
        expect(diff.added.filter((name) => !/ small-/.test(name))).toEqual([]);
    });

    it("changes one service's settings without touching another's resources", async () => {
        const longer = await runProgram(fleet([BIG, { ...CODER, vllm: { ...CODER.vllm, maxModelLen: 16384 } }, SMALL]), probe, undefined, liveAfter(three, watchdogNode));
        const diff = changed(three, longer);
        expect(diff.added).toEqual([]);
        expect(diff.removed).toEqual([]);
        expect(diff.changed.length).toBeGreaterThan(0);
        expect(diff.changed.filter((name) => !/ coder-/.test(name))).toEqual([]);
    });

    it("removes a service as its own resources only", async () => {
        const back = await runProgram(fleet([BIG, CODER]), probe, undefined, liveAfter(three, watchdogNode));
        const diff = changed(three, back);
        expect(diff.added).toEqual([]);
        expect(diff.changed.filter((name) => !name.endsWith(" default"))).toEqual([]);
        expect(diff.removed.filter((name) => !/ small-/.test(name))).toEqual([]);
    });

    it("gives a service without a utilization of its own the share its node has left, and keeps a given one", () => {
        const args = (name: string) => String(unsecret(three.byName(name).inputs.create));
        // big gave 0.6; small, beside it on spark1, gets what is left of 0.9.
        expect(args("small-vllm-spark1-rank0")).toMatch(/'--gpu-memory-utilization' '0\.3'/);
        expect(args("big-vllm-serve")).toContain("0.6");
        // coder is alone on its nodes: today's default.
        expect(args("coder-vllm-spark3-rank0")).toMatch(/'--gpu-memory-utilization' '0\.9'/);
    });

    it("refuses services that cannot share a node, with the numbers per service, before anything is registered", async () => {
        const greedy = { ...SMALL, vllm: { ...SMALL.vllm, gpuMemoryUtilization: 0.5 } };
        await expect(runProgram(fleet([BIG, CODER, greedy]), probe)).rejects.toThrow(/spark1 .*big.*small/s);
    });
});

describe("a swap through the program (mocks): coder's model name moves to coder2", async () => {
    /** coder running on spark3-4 as live.sh reads it: its ranks' arguments say what it serves and holds. */
    const coderLive = (node: string): string => {
        const labels = (role: string) => ({ [STACK_LABEL]: "unit", [SERVICE_LABEL]: "coder", "vllm-fleet.role": role, "vllm-fleet.revision": "r1" });
        const rank = (index: number) => [
            // The keeper runs vLLM (containers.ts): `.Args` hold its path and `vllm` first.
            "/opt/vllm-fleet/vllm-rank.py",
            "vllm",
            ..."serve /models/m --served-model-name coder --host 0.0.0.0 --port 8001 --gpu-memory-utilization 0.4".split(" "),
            ..."--nnodes 2 --node-rank".split(" "),
            String(index),
            ...`--master-addr ${fabricIps.spark3} --master-port 29501`.split(" "),
        ];
        const container = (name: string, role: string, args: string[]) =>
            JSON.stringify({ name: `/${name}`, id: `${name}-${node}`, status: "running", running: true, restarting: false, exitCode: 0, restartCount: 0, startedAt: "", labels: labels(role), image: image.name, args });
        const containers =
            node === "spark3"
                ? [container("vllm-fleet-coder-vllm", "vllm-rank0", rank(0)), container("vllm-fleet-coder-watchdog", "watchdog", ["-c", "..."])]
                : node === "spark4"
                  ? [container("vllm-fleet-coder-vllm", "vllm-headless", rank(1))]
                  : [];
        return ["### containers", ...containers, ""].join("\n");
    };
    const roomy = await runProgram(fleet([BIG, { ...CODER, name: "coder2", vllm: { port: 8003, masterPort: 29503, maxModelLen: 32768, gpuMemoryUtilization: 0.4 } }]), probe, undefined, coderLive);
    const samePort = await runProgram(fleet([BIG, { ...CODER, name: "coder2", vllm: { port: 8001, maxModelLen: 32768, gpuMemoryUtilization: 0.4 } }]), probe, undefined, coderLive);
    const stepsOf = (run: MockRun) => run.resources.filter((resource) => resource.name.endsWith("-swap-stop") && !resource.type.startsWith("vllm-fleet:"));

    it("blue/green where both fit: no stop step, coder2's containers wait for nothing of coder's", () => {
        expect(stepsOf(roomy)).toEqual([]);
        expect(roomy.byName("coder2-vllm-spark3-rank0").dependencies.some((urn) => urn.includes("swap-stop"))).toBe(false);
    });

    it("on coder's port: a stop step on each of coder's nodes (rank 0's node first), which coder2's containers wait for", () => {
        const steps = stepsOf(samePort);
        expect(steps.map((step) => step.name).sort()).toEqual(["spark3-coder-swap-stop", "spark4-coder-swap-stop"]);
        const spark3 = samePort.byName("spark3-coder-swap-stop");
        const spark4 = samePort.byName("spark4-coder-swap-stop");
        expect(String(unsecret(spark3.inputs.create))).toContain("NAMES=('vllm-fleet-coder-watchdog' 'vllm-fleet-coder-vllm')");
        expect(String(unsecret(spark4.inputs.create))).toContain("NAMES=('vllm-fleet-coder-vllm')");
        expect(spark4.dependencies).toContain(spark3.urn);
        for (const rank of ["coder2-vllm-spark3-rank0", "coder2-vllm-spark4-rank1"]) {
            expect(samePort.byName(rank).dependencies, rank).toEqual(expect.arrayContaining([spark3.urn, spark4.urn]));
        }
        // big, which shares no node with coder, waits for none of it.
        expect(samePort.byName("big-ray-spark1-ray-head").dependencies.some((urn) => urn.includes("swap-stop"))).toBe(false);
    });
});
