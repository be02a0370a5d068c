import { describe, expect, it } from "vitest";
import { Check, cpuSentence, evaluateTargets, median, mediansByNodes, Sample } from "../bench/report";

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
    const evaluate = (passed: boolean) =>
        evaluateTargets({ medians: mediansByNodes(samples), outsideShares: { 2: 0.13, 4: 0.3 }, checks: checks(passed), nodeCounts: [4, 2] });

    it("takes ratios between medians of the same run", () => {
        const results = evaluate(true);
        expect(median([3, 1, 2])).toBe(2);
        expect(results[0]).toMatchObject({ target: "cold up 4 nodes / 2 nodes", value: 27 / 20, passed: false });
        expect(results[1]).toMatchObject({ target: "cold up 4 nodes, default / --parallel 1", value: 27 / 40, passed: false });
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
