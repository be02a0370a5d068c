/**
 * Writes the fleet bench's report directory: report.md (./fleetReport.ts), report.json (every sample,
 * check, figure and target, the gateway's requests), timeline-<fleet>{,-noop,-parallel1}.svg of the
 * median runs and events-/export-<fleet>.json(l) of the median cold up (input of `npm run timeline`).
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { formatTimelineSummary } from "../../tools/timeline/summary";
import { renderTimelineSvg } from "../../tools/timeline/svg";
import { BenchOptions } from "./args";
import { FleetSpec } from "./fleetPlan";
import { FleetInput, TimelineSummaryInput, UpFigures, fleetFigures, fleetTargets, renderFleetMarkdown } from "./fleetReport";
import { GatewayLevelSamples, gatewayCost } from "./gatewayCost";
import { Measurements, RecordedUp, UpOperation } from "./rounds";
import { OPERATION_LABELS } from "./targets";
import { graphBoundOf, medianUp, upRecord } from "./writeReport";
import { writeUpRecord } from "./redact";

/** What one fleet's runs left. */
export interface FleetRecord {
    readonly spec: FleetSpec;
    readonly measurements: Measurements;
    readonly followUpCpuSeconds?: number;
    readonly gateway?: GatewayLevelSamples[];
    /** Why its runs stopped, when one failed. */
    readonly failure?: string;
}

const FILE_SUFFIX: Partial<Record<UpOperation, string>> = { coldUp: "", upNoChange: "-noop", coldUpParallel1: "-parallel1" };

function upFigures(up: RecordedUp): UpFigures {
    return {
        run: up.run,
        seconds: up.seconds,
        machineCpuSeconds: up.cpu.machineSeconds,
        cores: up.cpu.cores,
        processTreeSeconds: up.cpu.processTreeSeconds,
        nodesSeconds: up.cpu.nodesSeconds,
        beforeFirstSeconds: up.timeline.outside.beforeFirstMs / 1000,
        resources: up.timeline.spans.filter((span) => span.kind === "custom").length,
    };
}

/** The figures' input of one fleet. */
export function fleetInput(record: FleetRecord): FleetInput {
    const { spec, measurements } = record;
    const ups = (operation: UpOperation) => measurements.ups.filter((up) => up.operation === operation);
    const parallel1 = medianUp(measurements.ups, spec.nodes, "coldUpParallel1");
    const bound = parallel1 && graphBoundOf(parallel1);
    const samples = (operation: "previewNoChange" | "destroy") => measurements.samples.filter((sample) => sample.operation === operation).map((sample) => sample.seconds);
    return {
        id: spec.id,
        title: spec.title,
        kind: spec.kind,
        nodes: spec.nodes,
        services: spec.services.length,
        coldUps: ups("coldUp").map(upFigures),
        noopUps: ups("upNoChange").map(upFigures),
        previews: samples("previewNoChange"),
        destroys: samples("destroy"),
        graphBound: bound && parallel1 && { seconds: bound.seconds, parallel1Seconds: parallel1.seconds, steps: bound.steps },
        followUpCpuSeconds: record.followUpCpuSeconds,
        checks: measurements.checks,
        gateway: record.gateway && { service: spec.services[0].name, costs: gatewayCost(record.gateway) },
        failure: record.failure,
    };
}

/** Writes the report directory; returns report.md's path. */
export function writeFleetReport(
    options: BenchOptions,
    records: readonly FleetRecord[],
    run: { readonly startedAt: Date; readonly pulumiVersion: string; readonly clusterNodes: number; readonly error?: Error },
): string {
    fs.mkdirSync(options.outDir, { recursive: true });
    const timelines: TimelineSummaryInput[] = [];
    for (const record of records) {
        for (const [operation, suffix] of Object.entries(FILE_SUFFIX) as [UpOperation, string][]) {
            const up = medianUp(record.measurements.ups, record.spec.nodes, operation);
            if (!up) {
                continue;
            }
            const base = `${record.spec.id}${suffix}`;
            const title = `${OPERATION_LABELS[operation].replace(/`/g, "")}, ${record.spec.title} (run ${up.run})`;
            const svg = `timeline-${base}.svg`;
            fs.writeFileSync(path.join(options.outDir, svg), renderTimelineSvg(up.timeline, { title }));
            if (operation === "coldUp") {
                writeUpRecord(options.outDir, base, up);
            }
            const bound = operation === "coldUpParallel1" ? graphBoundOf(up) : undefined;
            timelines.push({
                heading: `${OPERATION_LABELS[operation]}, ${record.spec.title}`,
                svg,
                note: bound
                    ? `With these step times (each step alone) and unlimited parallelism the graph allows ${bound.seconds.toFixed(1)} s: start-up and end plus the longest chain, ` +
                      `${bound.chainSeconds.toFixed(1)} s: ${bound.steps.join(" → ")}.`
                    : `The machine's CPU was ${(100 * up.cpuBusyShare).toFixed(0)}% busy meanwhile (every process on its ${up.cpu.cores} cores).`,
                summary: formatTimelineSummary(up.timeline),
            });
        }
    }
    const inputs = records.map(fleetInput);
    const load = os.loadavg().map((value) => value.toFixed(2)).join(" ");
    const environment =
        `${run.startedAt.toISOString()} – ${new Date().toISOString()}; ${os.cpus().length} cores, load ${load}; Pulumi ${run.pulumiVersion}, Node.js ${process.version}; ` +
        `${options.runs} run${options.runs === 1 ? "" : "s"}; one simulated cluster of ${run.clusterNodes} nodes, each fleet a stack of its own on its first nodes ` +
        `(${records.map((record) => record.spec.id).join(", ")})` +
        (run.error ? `; ABORTED: ${run.error.message.split("\n")[0]}` : "");
    const measured = inputs.filter((input) => input.coldUps.length > 0);
    const report = {
        startedAt: run.startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        environment,
        runs: options.runs,
        nodeCounts: options.nodeCounts,
        error: run.error?.message,
        fleets: records.map((record, index) => ({
            spec: record.spec,
            figures: measured.includes(inputs[index]) ? fleetFigures(inputs[index]) : undefined,
            input: { ...inputs[index], checks: undefined },
            samples: record.measurements.samples,
            checks: record.measurements.checks,
            ups: record.measurements.ups.map(upRecord),
            gatewayRequests: record.gateway,
            failure: record.failure,
        })),
        targets: fleetTargets(measured),
    };
    fs.writeFileSync(path.join(options.outDir, "report.json"), JSON.stringify(report, null, 2) + "\n");
    const markdown = renderFleetMarkdown({ environment, runs: options.runs, inputs, timelines });
    const file = path.join(options.outDir, "report.md");
    fs.writeFileSync(file, markdown);
    return file;
}
