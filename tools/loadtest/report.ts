/** What the load test prints and writes: the table, and `loadtest.json` with `loadtest.svg`. */
import * as fs from "fs";
import * as path from "path";
import { LoadtestReport } from "./run";
import { ServerSide, peakText } from "./serverSampler";
import { LoadtestSvgOptions, renderLoadtestSvg } from "./svg";

function fixed(value: number | null, digits = 0): string {
    return value === null ? "-" : value.toFixed(digits);
}

/**
 * What the server saw, in lines: where it was read from and how often it answered, then per level
 * its peaks; or why it was not sampled.
 */
export function formatServerLines(server: ServerSide | undefined): string[] {
    if (!server || server.source === "none") {
        return [`server side: not sampled (${server?.reason ?? "not in this report"})`];
    }
    const failed = Object.entries(server.errors).map(([reason, count]) => `${count} × ${reason}`);
    const lines = [
        `server side, from ${server.source}: ${server.samples.length} samples every ${server.intervalMs / 1000} s` +
            (server.failed > 0 ? `, ${server.failed} failed (${failed.join(", ")})` : "") +
            (server.reason ? ` (${server.reason})` : ""),
    ];
    for (const level of server.levels) {
        lines.push(
            `  concurrency ${level.concurrency}: peak running ${peakText(level.peakRunning)}, peak waiting ${peakText(level.peakWaiting)}, peak KV ${peakText(level.peakKvPercent, 1)} %` +
                (level.samples === 0 ? " (no sample in its span)" : ""),
        );
    }
    return lines;
}

/** The printed table: a line per level, then the failures, then the server's side. */
export function formatLoadtestTable(report: LoadtestReport): string {
    const header = ["concurrency", "ok", "errors", "TTFT p50", "TTFT p95", "tok/s p50", "tok/s total", "req/s", "wall"];
    const rows = report.levels.map(({ summary }) => [
        String(summary.concurrency),
        String(summary.ok),
        String(summary.errors),
        summary.ttftMs.p50 === null ? "-" : `${fixed(summary.ttftMs.p50)} ms`,
        summary.ttftMs.p95 === null ? "-" : `${fixed(summary.ttftMs.p95)} ms`,
        fixed(summary.tokensPerSecondPerRequest.p50, 1),
        fixed(summary.outputTokensPerSecond, 1),
        fixed(summary.requestsPerSecond, 2),
        `${(summary.wallMs / 1000).toFixed(1)}s`,
    ]);
    const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
    const format = (row: string[]) => row.map((cell, column) => cell.padStart(widths[column])).join("  ");
    const lines = [
        `endpoint ${report.endpoint}  model ${report.model}  api ${report.api}  ${report.requestsPerLevel} requests per level, max_tokens ${report.maxTokens}`,
        format(header),
        ...rows.map(format),
    ];
    for (const level of report.levels) {
        const failed = level.requests.filter((record) => record.error);
        if (failed.length > 0) {
            const kinds = Object.entries(level.summary.errorsByKind).map(([kind, count]) => `${count} × ${kind}`).join(", ");
            const first = failed[0].error!;
            lines.push(`concurrency ${level.summary.concurrency}: ${kinds}; first: ${first.kind === "http" ? `HTTP ${first.status} ` : ""}${first.message || "(empty body)"}`);
        }
    }
    lines.push(...formatServerLines(report.server));
    return lines.join("\n");
}

/** Writes `loadtest.json` and `loadtest.svg` into `dir` (created when missing); returns their paths. */
export function writeLoadtestOutputs(report: LoadtestReport, dir: string, svgOptions: LoadtestSvgOptions = {}, base = "loadtest"): { json: string; svg: string } {
    fs.mkdirSync(dir, { recursive: true });
    const json = path.join(dir, `${base}.json`);
    const svg = path.join(dir, `${base}.svg`);
    // Times to the microsecond are plenty; the summaries were computed from the unrounded values.
    const rounded = (_key: string, value: unknown) => (typeof value === "number" && !Number.isInteger(value) ? Math.round(value * 1000) / 1000 : value);
    fs.writeFileSync(json, `${JSON.stringify(report, rounded, 2)}\n`);
    fs.writeFileSync(svg, renderLoadtestSvg(report, svgOptions));
    return { json, svg };
}
