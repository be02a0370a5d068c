/** The load test's chart: time to first token and output tokens per second per level, as SVG. */
import { escapeXml, svgHead } from "../svg";
import { LoadtestReport } from "./run";

const COLORS = {
    first: "#4c6ef5",
    second: "#e8590c",
    failed: "#c92a2a",
    grid: "#e9ecef",
    axis: "#adb5bd",
    text: "#212529",
    muted: "#868e96",
};

/** A "nice" step (1, 2 or 5 times a power of ten) giving at most `maxTicks` ticks up to `max`. */
export function niceStep(max: number, maxTicks = 5): number {
    if (!(max > 0)) {
        return 1;
    }
    const raw = max / maxTicks;
    const magnitude = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((m) => m * magnitude).find((step) => step >= raw) ?? 10 * magnitude;
}

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
 * failures under it; every bar has a tooltip (`<title>`).
 */
export function renderLoadtestSvg(report: LoadtestReport, options: LoadtestSvgOptions = {}): string {
    const width = options.width ?? 960;
    const height = 370;
    const top = 92;
    const plotHeight = 210;
    const bottom = top + plotHeight;
    const gap = 40;
    const panelWidth = (width - gap) / 2;
    const round = (value: number) => Math.round(value * 10) / 10;
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
        const left = panelIndex * (panelWidth + gap);
        const axisX = left + 62;
        const plotRight = left + panelWidth - 10;
        const plotWidth = plotRight - axisX;
        const present = panel.series.flatMap((series) => series.values.filter((value): value is number => value !== null));
        const step = niceStep(Math.max(0, ...present));
        const max = Math.max(step, Math.ceil(Math.max(0, ...present) / step) * step);
        const y = (value: number) => bottom - (value / max) * plotHeight;
        out.push(`<text x="${axisX}" y="60" font-size="13" font-weight="bold" fill="${COLORS.text}">${escapeXml(panel.title)}</text>`);
        panel.series.forEach((series, index) => {
            const lx = axisX + index * 150;
            out.push(`<rect x="${lx}" y="68" width="12" height="10" fill="${series.color}"/><text x="${lx + 16}" y="77" fill="${COLORS.text}">${escapeXml(series.label)}</text>`);
        });
        for (let tick = 0; tick <= max + 1e-9; tick += step) {
            const ty = round(y(tick));
            out.push(
                `<line x1="${axisX}" y1="${ty}" x2="${round(plotRight)}" y2="${ty}" stroke="${COLORS.grid}"/>`,
                `<text x="${axisX - 5}" y="${round(ty + 4)}" text-anchor="end" fill="${COLORS.muted}">${Number(tick.toPrecision(6))}</text>`,
            );
        }
        out.push(
            `<line x1="${axisX}" y1="${top}" x2="${axisX}" y2="${bottom}" stroke="${COLORS.axis}"/>`,
            `<line x1="${axisX}" y1="${bottom}" x2="${round(plotRight)}" y2="${bottom}" stroke="${COLORS.axis}"/>`,
            `<text x="${left + 14}" y="${top + plotHeight / 2}" text-anchor="middle" fill="${COLORS.muted}" transform="rotate(-90 ${left + 14} ${top + plotHeight / 2})">${escapeXml(panel.unit)}</text>`,
            `<text x="${round(axisX + plotWidth / 2)}" y="${bottom + 46}" text-anchor="middle" fill="${COLORS.muted}">concurrency (requests in flight)</text>`,
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
    out.push("</svg>");
    return `${out.join("\n")}\n`;
}
