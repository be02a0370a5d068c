/**
 * The load test's chart: time to first token and output tokens per second per level, as SVG, and
 * under them what the server saw over time (./serverSvg.ts), in panels drawn the same way.
 */
import { escapeXml, svgHead } from "../svg";
import { COLORS, drawPanelFrame, round, valueScale } from "./plot";
import { LoadtestReport } from "./run";
import { drawServerRow, serverRowHeight } from "./serverSvg";

export { niceStep } from "./plot";

interface Panel {
    readonly title: string;
    readonly unit: string;
    readonly series: readonly { readonly label: string; readonly color: string; readonly values: readonly (number | null)[] }[];
}

/** Options of {@link renderLoadtestSvg}. */
export interface LoadtestSvgOptions {
    /** The chart's heading (default: `serving benchmark, <model>`). */
    readonly title?: string;
    /** Total width in pixels (default 960). */
    readonly width?: number;
}

/**
 * The chart as a self-contained SVG document, in the style of the deployment timeline
 * (tools/timeline/svg.ts): two panels side by side, time to first token (p50, p95) and output tokens
 * per second (each request's p50, and the level's total), a group of bars per concurrency with its
 * failures under it; every bar has a tooltip (`<title>`). Under them the server's side: its requests
 * running and waiting and its KV cache usage over the run, or why it was not sampled.
 */
export function renderLoadtestSvg(report: LoadtestReport, options: LoadtestSvgOptions = {}): string {
    const width = options.width ?? 960;
    const levelsHeight = 370;
    const height = levelsHeight + serverRowHeight(report.server);
    const top = 92;
    const plotHeight = 210;
    const gap = 40;
    const panelWidth = (width - gap) / 2;
    const summaries = report.levels.map((level) => level.summary);
    const panels: Panel[] = [
        {
            title: "time to first token",
            unit: "milliseconds",
            series: [
                { label: "p50", color: COLORS.first, values: summaries.map((s) => s.ttftMs.p50) },
                { label: "p95", color: COLORS.second, values: summaries.map((s) => s.ttftMs.p95) },
            ],
        },
        {
            title: "output tokens per second",
            unit: "tokens / second",
            series: [
                { label: "per request, p50", color: COLORS.first, values: summaries.map((s) => s.tokensPerSecondPerRequest.p50) },
                { label: "total of the level", color: COLORS.second, values: summaries.map((s) => (s.ok > 0 ? s.outputTokensPerSecond : null)) },
            ],
        },
    ];
    const out: string[] = [];
    const errors = summaries.reduce((sum, s) => sum + s.errors, 0);
    out.push(
        ...svgHead(
            width,
            height,
            options.title ?? `serving benchmark, ${report.model}`,
            `${report.endpoint} · ${report.api} · ${report.requestsPerLevel} streaming requests per level, max_tokens ${report.maxTokens} · ${report.when}` +
                (errors > 0 ? ` · ${errors} failed` : ""),
            COLORS.text,
        ),
    );
    panels.forEach((panel, panelIndex) => {
        const present = panel.series.flatMap((series) => series.values.filter((value): value is number => value !== null));
        const { axisX, plotWidth, bottom, y } = drawPanelFrame(
            out,
            { left: panelIndex * (panelWidth + gap), width: panelWidth, top, plotHeight },
            { title: panel.title, unit: panel.unit, legend: panel.series, xLabel: "concurrency (requests in flight)" },
            valueScale(present),
        );
        const groupWidth = plotWidth / Math.max(1, summaries.length);
        const barWidth = Math.min(48, (groupWidth * 0.7) / panel.series.length);
        summaries.forEach((summary, level) => {
            const center = axisX + groupWidth * (level + 0.5);
            out.push(`<text x="${round(center)}" y="${bottom + 15}" text-anchor="middle" fill="${COLORS.text}">${summary.concurrency}</text>`);
            if (summary.errors > 0) {
                out.push(`<text x="${round(center)}" y="${bottom + 29}" text-anchor="middle" fill="${COLORS.failed}">${summary.errors} of ${summary.requests} failed</text>`);
            }
            panel.series.forEach((series, index) => {
                const bx = center - (barWidth * panel.series.length) / 2 + index * barWidth;
                const value = series.values[level];
                const label = value === null ? "n/a" : value >= 100 ? value.toFixed(0) : value.toFixed(1);
                if (value === null) {
                    out.push(`<text x="${round(bx + barWidth / 2)}" y="${bottom - 4}" text-anchor="middle" fill="${COLORS.muted}">n/a</text>`);
                    return;
                }
                const by = y(value);
                const tooltip = `concurrency ${summary.concurrency}: ${panel.title}, ${series.label}: ${label} ${panel.unit} (${summary.ok} of ${summary.requests} requests succeeded)`;
                out.push(
                    `<rect x="${round(bx + 1)}" y="${round(by)}" width="${round(barWidth - 2)}" height="${round(bottom - by)}" fill="${series.color}"><title>${escapeXml(tooltip)}</title></rect>`,
                    `<text x="${round(bx + barWidth / 2)}" y="${round(by - 4)}" text-anchor="middle" fill="${COLORS.text}">${label}</text>`,
                );
            });
        });
    });
    drawServerRow(out, report.server, levelsHeight, width);
    out.push("</svg>");
    return `${out.join("\n")}\n`;
}
