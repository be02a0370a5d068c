/**
 * Writes the benchmark's report directory: report.md (./report.ts), report.json (every sample and
 * check), timeline-<N>nodes{,-parallel1,-noop,-vllm-change}.svg (the median run of each),
 * timeline-<N>nodes{,-parallel1}-run<k>.svg (every cold up), events-*.jsonl + export-*.json of each
 * median run (input of `npm run timeline`), and the load test's loadtest-<N>nodes.{json,svg}.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { writeLoadtestOutputs } from "../../tools/loadtest/report";
import { longestChain } from "../../tools/timeline/criticalPath";
import { resourceGraphFromExport } from "../../tools/timeline/events";
import { formatTimelineSummary } from "../../tools/timeline/summary";
import { renderTimelineSvg } from "../../tools/timeline/svg";
import { BenchOptions } from "./args";
import { fabricTargets } from "./fabricTargets";
import { renderMarkdown, UpTimeline } from "./report";
import { Measurements, RecordedUp, UpOperation, parallelismFor } from "./rounds";
import { Floor, OPERATION_LABELS, TargetResult, droppedTargets, evaluateTargets, median, mediansByNodes } from "./targets";
import { writeUpRecord } from "./redact";

/** How each up's files are named: timeline-<N>nodes<suffix>.svg. */
const FILE_SUFFIX: Record<UpOperation, string> = { coldUp: "", coldUpParallel1: "-parallel1", upNoChange: "-noop", vllmChange: "-vllm-change" };

/** The up of `operation` on `nodes` whose wall time is the median (an odd count: the middle one). */
export function medianUp(ups: readonly RecordedUp[], nodes: number, operation: UpOperation): RecordedUp | undefined {
    const list = ups.filter((up) => up.nodes === nodes && up.operation === operation).sort((a, b) => a.seconds - b.seconds);
    return list[Math.floor((list.length - 1) / 2)];
}

/**
 * What the dependency graph allows with unlimited parallelism, from an up run one step at a time (no
 * step slowed another): the graph's longest chain of these step times, plus the same start-up and end.
 */
export function graphBoundOf(up: RecordedUp): NonNullable<UpTimeline["graphBound"]> {
    const chain = longestChain(up.timeline, resourceGraphFromExport(up.exported));
    return {
        seconds: (chain.ms + up.timeline.outside.beforeFirstMs + up.timeline.outside.afterLastMs) / 1000,
        chainSeconds: chain.ms / 1000,
        steps: chain.names,
    };
}

/** What report.json keeps of one timed up (both benches): its times, CPU and operations. */
export function upRecord(up: RecordedUp) {
    return {
        run: up.run,
        operation: up.operation,
        seconds: up.seconds,
        criticalSeconds: up.timeline.criticalMs / 1000,
        outsideShare: up.timeline.outsideShare,
        cpuBusyShare: up.cpuBusyShare,
        cpu: up.cpu,
        outside: { ...up.timeline.outside, intervals: undefined },
        opsByResource: up.opsByResource,
    };
}

/** Writes every file of the report directory (DIR, made when missing) and returns the targets as judged. */
export function writeReport(options: BenchOptions, measurements: Measurements, startedAt: Date, pulumiVersion: string, error?: Error): TargetResult[] {
    fs.mkdirSync(options.outDir, { recursive: true });
    const titleOf = (up: RecordedUp) => `${OPERATION_LABELS[up.operation].replace(/`/g, "")}, ${up.nodes} simulated Sparks (run ${up.run})`;
    for (const up of measurements.ups.filter((up) => up.operation === "coldUp" || up.operation === "coldUpParallel1")) {
        const file = `timeline-${up.nodes}nodes${FILE_SUFFIX[up.operation]}-run${up.run}.svg`;
        fs.writeFileSync(path.join(options.outDir, file), renderTimelineSvg(up.timeline, { title: titleOf(up) }));
    }
    const timelines: UpTimeline[] = [];
    for (const nodes of options.nodeCounts) {
        for (const operation of Object.keys(FILE_SUFFIX) as UpOperation[]) {
            const up = medianUp(measurements.ups, nodes, operation);
            if (!up) {
                continue;
            }
            const base = `${nodes}nodes${FILE_SUFFIX[operation]}`;
            const svg = `timeline-${base}.svg`;
            fs.writeFileSync(path.join(options.outDir, svg), renderTimelineSvg(up.timeline, { title: `${titleOf(up)}, the median of ${options.runs}` }));
            writeUpRecord(options.outDir, base, up);
            timelines.push({
                nodes,
                run: up.run,
                operation,
                graphBound: operation === "coldUpParallel1" ? graphBoundOf(up) : undefined,
                wallSeconds: up.seconds,
                criticalSeconds: up.timeline.criticalMs / 1000,
                outsideShare: up.timeline.outsideShare,
                cpuBusyShare: up.cpuBusyShare,
                cpu: up.cpu,
                svg,
                summary: formatTimelineSummary(up.timeline),
            });
        }
    }
    // By node count, the median over the runs of one operation of a figure of each run.
    const medianOfUps = (operation: UpOperation, figure: (up: RecordedUp) => number): Record<number, number> => {
        const result: Record<number, number> = {};
        for (const nodes of options.nodeCounts) {
            const values = measurements.ups.filter((up) => up.nodes === nodes && up.operation === operation).map(figure);
            if (values.length > 0) {
                result[nodes] = median(values);
            }
        }
        return result;
    };
    const outsideShares = medianOfUps("coldUp", (up) => up.timeline.outsideShare);
    // What a no-op up spends before its first step (the CLI, the engine, the program, the read of
    // the nodes): no no-op up is shorter.
    const noopStartUps = medianOfUps("upNoChange", (up) => up.timeline.outside.beforeFirstMs / 1000);
    // The floor of a cold up: its median run's CPU-seconds over the cores, and the graph's longest
    // chain of the solo step times of the `--parallel 1` median run.
    const floors: Record<number, Floor> = {};
    for (const nodes of options.nodeCounts) {
        const cold = medianUp(measurements.ups, nodes, "coldUp");
        if (cold) {
            const bound = timelines.find((timeline) => timeline.nodes === nodes && timeline.operation === "coldUpParallel1")?.graphBound;
            floors[nodes] = { cpuSeconds: cold.cpu.machineSeconds, cores: cold.cpu.cores, graphSeconds: bound?.seconds };
        }
    }
    const medians = mediansByNodes(measurements.samples);
    const targetInputs = { medians, floors, outsideShares, noopStartUps, checks: measurements.checks, nodeCounts: options.nodeCounts };
    const targets = evaluateTargets(targetInputs);
    const load = os.loadavg().map((value) => value.toFixed(2)).join(" ");
    const environment =
        `${startedAt.toISOString()} – ${new Date().toISOString()}; ${os.cpus().length} cores, load ${load}; ` +
        `Pulumi ${pulumiVersion}, Node.js ${process.version}; ${options.runs} runs of node counts ${options.nodeCounts.join(", ")} ` +
        `(${options.nodeCounts.map((nodes) => `${nodes}: TP ${parallelismFor(nodes).tensor} × PP ${parallelismFor(nodes).pipeline}`).join(", ")})` +
        (error ? `; ABORTED: ${error.message.split("\n")[0]}` : "");
    const report = {
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        environment,
        runs: options.runs,
        nodeCounts: options.nodeCounts,
        error: error?.message,
        medians,
        floors,
        outsideShares,
        sshRoundTripSeconds: measurements.sshRoundTripSeconds,
        targets,
        fabric: measurements.fabric && { ...measurements.fabric, targets: fabricTargets(measurements.fabric) },
        samples: measurements.samples,
        checks: measurements.checks,
        timelines,
        ups: measurements.ups.map((up) => ({
            nodes: up.nodes,
            ...upRecord(up),
            criticalPath: up.timeline.criticalPath.map((step) => ({
                name: step.name,
                startSeconds: (step.startMs - up.timeline.startMs) / 1000,
                seconds: (step.endMs - step.startMs) / 1000,
                waitSeconds: step.waitMs / 1000,
            })),
        })),
    };
    fs.writeFileSync(path.join(options.outDir, "report.json"), JSON.stringify(report, null, 2) + "\n");
    const loadtests = Object.entries(measurements.loadtests).map(([nodes, loadtest]) => {
        const files = writeLoadtestOutputs(loadtest, options.outDir, { title: `npm run loadtest after a cold up, ${nodes} nodes (the vLLM stand-in's numbers)` }, `loadtest-${nodes}nodes`);
        return { nodes: Number(nodes), report: loadtest, svg: path.basename(files.svg) };
    });
    const markdown = renderMarkdown({
        runs: options.runs,
        nodeCounts: options.nodeCounts,
        samples: measurements.samples,
        targets,
        checks: measurements.checks,
        timelines,
        sshRoundTripSeconds: measurements.sshRoundTripSeconds,
        environment,
        dropped: droppedTargets(targetInputs),
        fabric: measurements.fabric,
        loadtests,
    });
    fs.writeFileSync(path.join(options.outDir, "report.md"), markdown);
    return targets;
}
