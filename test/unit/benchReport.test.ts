import { describe, expect, it } from "vitest";
import { FabricThroughput, fabricTargets, renderFabric } from "../bench/fabricTargets";
import { cpuSentence } from "../bench/report";
import { Check, droppedTargets, evaluateTargets, median, mediansByNodes, Sample } from "../bench/targets";

describe("the benchmark's targets", () => {
    const samples: Sample[] = [
        ...[20, 21, 19].map((seconds, run) => ({ nodes: 2, run, operation: "coldUp" as const, seconds })),
        ...[27, 30, 26].map((seconds, run) => ({ nodes: 4, run, operation: "coldUp" as const, seconds })),
        ...[40, 41, 39].map((seconds, run) => ({ nodes: 4, run, operation: "coldUpParallel1" as const, seconds })),
        ...[2, 2.5, 2.2].map((seconds, run) => ({ nodes: 2, run, operation: "upNoChange" as const, seconds })),
        ...[2.4, 2.6, 2.5].map((seconds, run) => ({ nodes: 4, run, operation: "upNoChange" as const, seconds })),
        ...[7, 8, 9].map((seconds, run) => ({ nodes: 2, run, operation: "vllmChange" as const, seconds })),
        ...[7, 8, 9].map((seconds, run) => ({ nodes: 4, run, operation: "vllmChange" as const, seconds })),
    ];
    const checks = (passed: boolean): Check[] =>
        [2, 4].flatMap((nodes) => [
            { nodes, run: 1, name: "no-op up reads each node once and changes nothing", passed, detail: passed ? "" : "ssh logins 3,3 -> 5,4" },
            { nodes, run: 1, name: "vLLM-only change restarts no Ray container", passed: true, detail: "" },
        ]);
    // 2 nodes: CPU 36 CPU-s on 2 cores = 18 s, graph 17 s: floor 18 s (cold up 20 s: 1.11).
    // 4 nodes: CPU 40 CPU-s = 20 s, graph 22 s: floor 22 s (cold up 27 s: 1.23).
    const floors = { 2: { cpuSeconds: 36, cores: 2, graphSeconds: 17 }, 4: { cpuSeconds: 40, cores: 2, graphSeconds: 22 } };
    const inputs = (passed: boolean) => ({ medians: mediansByNodes(samples), floors, outsideShares: { 2: 0.13, 4: 0.3 }, checks: checks(passed), nodeCounts: [4, 2] });
    const evaluate = (passed: boolean) => evaluateTargets(inputs(passed));

    it("takes ratios between medians of the same run, a cold up against its floor", () => {
        const results = evaluate(true);
        expect(median([3, 1, 2])).toBe(2);
        expect(results[0].target).toMatch(/^cold up 2 nodes \/ its floor/);
        expect(results[0]).toMatchObject({ value: 20 / 18, limit: 1.15, passed: true });
        expect(results[0].detail).toBe("20.0 s / 18.0 s (CPU 36.0 CPU-s ÷ 2 = 18.0 s; graph 17.0 s)");
        expect(results[1]).toMatchObject({ value: 27 / 22, passed: false });
        expect(results.some((result) => result.target.includes("/ 2 nodes") || result.target.includes("--parallel 1"))).toBe(false);
        expect(results.find((result) => result.target.startsWith("no-op up / cold up, 2"))).toMatchObject({ value: 2.2 / 20, passed: true });
        expect(results.find((result) => result.target.startsWith("vLLM-only change / cold up, 4"))).toMatchObject({ value: 8 / 27, passed: true });
    });

    it("fails a ratio that is met when its host check failed, and a share over the limit", () => {
        const results = evaluate(false);
        const noop = results.find((result) => result.target.startsWith("no-op up / cold up, 2"));
        expect(noop).toMatchObject({ passed: false });
        expect(noop?.detail).toContain("NO in 1 of 1 runs");
        expect(results.find((result) => result.target === "wall time outside the critical path, cold up 4 nodes")).toMatchObject({ value: 0.3, passed: false });
    });

    it("says what a no-op up spent before its first step, as a share of the cold up", () => {
        const results = evaluateTargets({ ...inputs(true), noopStartUps: { 2: 1.5, 4: 1.8 } });
        expect(results.find((result) => result.target.startsWith("no-op up / cold up, 4"))?.detail).toMatch(
            /; before its first step \(CLI, engine, program, the read of the nodes\) it spent 1\.8 s, 0\.07 of the cold up$/,
        );
        expect(evaluate(true).find((result) => result.target.startsWith("no-op up / cold up, 2"))?.detail).not.toContain("before its first step");
    });

    it("cannot judge a cold up without the solo step times of a --parallel 1 run", () => {
        const results = evaluateTargets({ ...inputs(true), floors: { 2: { cpuSeconds: 36, cores: 2 }, 4: floors[4] } });
        expect(results[0]).toMatchObject({ value: undefined, passed: false });
        expect(results[0].detail).toContain("graph not measured (no --parallel 1 run)");
    });

    it("says why issue 6's machine-bound targets are gone, with the run's numbers", () => {
        const [parallel1, scaling] = droppedTargets(inputs(true));
        // 0.5 × 40 s = 20 s is below the 4-node floor of 22 s: no schedule could meet it.
        expect(parallel1).toContain("no schedule could meet it here: 0.5 × 40.0 s is 20.0 s, below the floor of the default cold up, 22.0 s");
        expect(scaling).toContain("1.35 in this run");
        expect(scaling).toContain("did 1.11 × the CPU work of 2 (40.0 / 36.0 CPU-s) on the same 2 cores");
        const roomy = droppedTargets({ ...inputs(true), floors: { ...floors, 4: { cpuSeconds: 30, cores: 2, graphSeconds: 12 } } });
        expect(roomy[0]).toContain("would allow it in this run");
    });
});

describe("cpuSentence", () => {
    it("states the floor that the CPU time sets on the cores, and where the time was spent", () => {
        const sentence = cpuSentence({ machineSeconds: 44, cores: 2, nodesSeconds: 36, workloadSeconds: 30 }, 25);
        expect(sentence).toContain("It cost 44.0 CPU-seconds: on 2 cores no schedule of that work ends before 22.0 s (0.88 of this run's 25.0 s).");
        expect(sentence).toContain("Inside the simulated nodes 36.0 CPU-s, 30.0 of them in their containers (Ray, the vLLM stand-in); outside them");
        expect(sentence).toContain("8.0.");
    });

    it("says only what it measured when the nodes' cgroups were not found", () => {
        expect(cpuSentence({ machineSeconds: 10, cores: 4 }, 5)).toBe(
            "It cost 10.0 CPU-seconds: on 4 cores no schedule of that work ends before 2.5 s (0.50 of this run's 5.0 s).",
        );
    });
});

describe("the fabric targets", () => {
    const mib = 2 ** 20;
    const fabric: FabricThroughput = {
        raw: { bytes: 2048 * mib, seconds: 1 }, // 2048 MiB/s
        save: { bytes: 400 * mib, seconds: 4 }, // 100 MiB/s
        load: { bytes: 400 * mib, seconds: 1 }, // 400 MiB/s
        viaOperator: { bytes: 400 * mib, seconds: 8 }, // 50 MiB/s
        image: { bytes: 400 * mib, seconds: 5 }, // 80 MiB/s
        weights: { bytes: 2048 * mib, seconds: 1.25, streams: 4 }, // 1638 MiB/s
        operatorBytes: 100 * 1024,
        sourceInterfaceBytes: { mgmt: 10_000, fabric: 401 * mib },
    };

    it("judges the image copy against raw TCP and against its slowest stage alone, and the weights against raw TCP", () => {
        const [againstRaw, againstStage, weights, operator] = fabricTargets(fabric);
        expect(againstRaw).toMatchObject({ passed: false, limit: 0.7 });
        expect(againstRaw.value).toBeCloseTo(80 / 2048, 5);
        expect(againstRaw.detail).toContain("1.6× the copy through this machine (50 MiB/s");
        expect(againstStage).toMatchObject({ passed: true });
        expect(againstStage.value).toBeCloseTo(0.8, 5);
        expect(againstStage.detail).toContain("80 / 100 MiB/s (docker save)");
        expect(weights).toMatchObject({ passed: true });
        expect(weights.value).toBeCloseTo(0.8, 5);
        expect(operator).toMatchObject({ passed: true });
        const slow = fabricTargets({ ...fabric, image: { bytes: 400 * mib, seconds: 8 }, weights: { bytes: 2048 * mib, seconds: 2, streams: 4 } });
        expect(slow.map((result) => result.passed)).toEqual([false, false, false, true]);
    });

    it("says why no copy through Docker's save and load reaches raw TCP, naming the stage", () => {
        const markdown = renderFabric(fabric).join("\n");
        expect(markdown).toContain("`docker save` alone runs at 0.05 of it, `docker load` alone runs at 0.20 of it");
        const fastDocker = renderFabric({ ...fabric, save: { bytes: 2000 * mib, seconds: 1 }, load: { bytes: 2000 * mib, seconds: 1 } }).join("\n");
        expect(fastDocker).not.toContain("No image copy");
    });
});
