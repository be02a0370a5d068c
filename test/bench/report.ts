/** The benchmark's readable report, report.md (pure; ./writeReport.ts writes it with the other files). */
import { formatLoadtestTable } from "../../tools/loadtest/report";
import { LoadtestReport } from "../../tools/loadtest/run";
import { FabricThroughput, renderFabric } from "./fabricTargets";
import { Check, CpuUse, OPERATIONS, OPERATION_LABELS, Operation, Sample, TargetResult, median, mediansByNodes } from "./targets";

/** What the timeline of an up says (the median run of its kind), per node count. */
export interface UpTimeline {
    readonly nodes: number;
    readonly run: number;
    readonly operation: Operation;
    readonly wallSeconds: number;
    readonly criticalSeconds: number;
    readonly outsideShare: number;
    /** Share of the machine's CPU that was busy meanwhile (all processes). */
    readonly cpuBusyShare: number;
    /** CPU seconds of the up: the machine's, and inside the simulated nodes. */
    readonly cpu: CpuUse;
    /**
     * For a `--parallel 1` run: the time with unlimited parallelism that the dependency graph allows,
     * its longest chain weighted by these (uncontended) step durations, plus the same start-up and end.
     */
    readonly graphBound?: { readonly seconds: number; readonly chainSeconds: number; readonly steps: readonly string[] };
    /** The SVG's file name in the report directory. */
    readonly svg: string;
    readonly summary: string;
}

/** report.md: the table of medians, the targets, where the time went, the checks, the copies over the fabric and the load test. */
export function renderMarkdown(report: {
    readonly runs: number;
    readonly nodeCounts: readonly number[];
    readonly samples: readonly Sample[];
    readonly targets: readonly TargetResult[];
    readonly checks: readonly Check[];
    readonly timelines: readonly UpTimeline[];
    readonly sshRoundTripSeconds: Record<number, number>;
    readonly environment: string;
    /** Targets no longer judged, and why (see droppedTargets in ./targets.ts). */
    readonly dropped?: readonly string[];
    /** The copies over the fabric, when measured: their section follows the checks. */
    readonly fabric?: FabricThroughput;
    /** `npm run loadtest` after a cold up, by node count, with its chart's file name: the last section. */
    readonly loadtests?: readonly { readonly nodes: number; readonly report: LoadtestReport; readonly svg: string }[];
}): string {
    const medians = mediansByNodes(report.samples);
    const counts = [...report.nodeCounts].sort((a, b) => a - b);
    const cell = (nodes: number, operation: Operation) => {
        const values = report.samples.filter((sample) => sample.nodes === nodes && sample.operation === operation).map((sample) => sample.seconds);
        if (values.length === 0) {
            return "–";
        }
        return `${medians[nodes][operation]!.toFixed(1)} s (${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)})`;
    };
    const apiMedian = (nodes: number, operation: Operation) => {
        const values = report.samples
            .filter((sample) => sample.nodes === nodes && sample.operation === operation && sample.apiSeconds !== undefined)
            .map((sample) => sample.apiSeconds!);
        return values.length === 0 ? "–" : `${median(values).toFixed(1)} s`;
    };
    const lines: string[] = [
        "# vllm-fleet benchmark",
        "",
        `${report.environment}`,
        "",
        `Wall time of each operation: median of ${report.runs} runs (min–max), simulated Sparks, ssh container driver, builtin SSH runner.`,
        "",
        `| operation | ${counts.map((nodes) => `${nodes} nodes`).join(" | ")} |`,
        `|---|${counts.map(() => "---:").join("|")}|`,
        ...OPERATIONS.filter((operation) => counts.some((nodes) => medians[nodes]?.[operation] !== undefined)).map(
            (operation) => `| ${OPERATION_LABELS[operation]} | ${counts.map((nodes) => cell(nodes, operation)).join(" | ")} |`,
        ),
        `| one SSH round trip (\`ssh node true\`) | ${counts.map((nodes) => (report.sshRoundTripSeconds[nodes] === undefined ? "–" : `${report.sshRoundTripSeconds[nodes].toFixed(2)} s`)).join(" | ")} |`,
        "",
        "Times are those of the `pulumi` command (from its start to its last output line). The Automation API call around it",
        "runs more commands afterwards (`pulumi stack output` twice and `pulumi stack history` after up and destroy); its medians:",
        `${OPERATIONS.filter((operation) => report.samples.some((sample) => sample.operation === operation && sample.apiSeconds !== undefined))
            .map((operation) => `${OPERATION_LABELS[operation]} ${counts.map((nodes) => apiMedian(nodes, operation)).join(" / ")}`)
            .join("; ")} (${counts.map((nodes) => `${nodes} nodes`).join(" / ")}).`,
        "",
        "## Targets (ratios of the medians above)",
        "",
        "| target | value | limit | result | detail |",
        "|---|---:|---:|---|---|",
        ...report.targets.map(
            (result) =>
                `| ${result.target} | ${result.value === undefined ? "–" : result.value.toFixed(2)} | ${result.limit} | ${result.passed ? "pass" : "**FAIL**"} | ${result.detail.replace(/\|/g, "\\|")} |`,
        ),
        "",
        ...(report.dropped && report.dropped.length > 0 ? ["Targets no longer judged, and why:", "", ...report.dropped, ""] : []),
        "## Where the time goes (timelines of the median runs)",
        "",
    ];
    for (const timeline of report.timelines) {
        lines.push(
            `### ${OPERATION_LABELS[timeline.operation]}, ${timeline.nodes} nodes (run ${timeline.run}): [${timeline.svg}](${timeline.svg})`,
            "",
            `The machine's CPU was ${(100 * timeline.cpuBusyShare).toFixed(0)}% busy meanwhile (every process on its cores, other runs' too).`,
            cpuSentence(timeline.cpu, timeline.wallSeconds),
            "",
            ...(timeline.graphBound
                ? [
                      `With these step durations (each step alone) and unlimited parallelism, the dependency graph allows ` +
                          `${timeline.graphBound.seconds.toFixed(1)} s (${(timeline.graphBound.seconds / timeline.wallSeconds).toFixed(2)} of this run): ` +
                          `start-up and end plus the longest chain, ${timeline.graphBound.chainSeconds.toFixed(1)} s: ${timeline.graphBound.steps.join(" → ")}.`,
                      "",
                  ]
                : []),
            "```",
            timeline.summary,
            "```",
            "",
        );
    }
    const failedChecks = report.checks.filter((check) => !check.passed);
    lines.push(
        "## Checks on the hosts and the engine's summaries",
        "",
        `${report.checks.length - failedChecks.length} of ${report.checks.length} passed.`,
        ...failedChecks.map((check) => `- FAILED (${check.nodes} nodes, run ${check.run}) ${check.name}: ${check.detail}`),
        "",
    );
    const text = lines.join("\n");
    const withFabric = report.fabric ? `${text.trimEnd()}\n\n${renderFabric(report.fabric).join("\n")}` : text;
    const loadtests = (report.loadtests ?? []).map(({ nodes, report: loadtest, svg }) =>
        [
            `### Serving after a cold up, ${nodes} nodes (\`npm run loadtest\`; the vLLM stand-in's numbers, not vLLM's)`,
            "",
            "```",
            formatLoadtestTable(loadtest).trimEnd(),
            "```",
            "",
            `![load test, ${nodes} nodes](${svg})`,
        ].join("\n"),
    );
    return loadtests.length > 0 ? `${withFabric.trimEnd()}\n\n## The endpoint's own speed\n\n${loadtests.join("\n\n")}\n` : withFabric;
}

/**
 * What the CPU time of an up says: busy CPU seconds over the machine's cores is the least wall time
 * any schedule of the same work needs here; and how much of it ran inside the simulated nodes.
 */
export function cpuSentence(cpu: CpuUse, wallSeconds: number): string {
    const floor = cpu.machineSeconds / cpu.cores;
    const inside =
        cpu.nodesSeconds === undefined
            ? ""
            : ` Inside the simulated nodes ${cpu.nodesSeconds.toFixed(1)} CPU-s` +
              (cpu.workloadSeconds === undefined ? "" : `, ${cpu.workloadSeconds.toFixed(1)} of them in their containers (Ray, the vLLM stand-in)`) +
              `; outside them (Pulumi engine, the program, SSH clients) ${Math.max(0, cpu.machineSeconds - cpu.nodesSeconds).toFixed(1)}.`;
    return (
        `It cost ${cpu.machineSeconds.toFixed(1)} CPU-seconds: on ${cpu.cores} cores no schedule of that work ends before ` +
        `${floor.toFixed(1)} s (${(floor / wallSeconds).toFixed(2)} of this run's ${wallSeconds.toFixed(1)} s).${inside}`
    );
}
