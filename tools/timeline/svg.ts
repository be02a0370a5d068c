/** The timeline as a Gantt chart: an SVG document drawn by hand, no library. */
import { escapeXml, svgHead } from "../svg";
import { ResourceSpan, Timeline } from "./criticalPath";
import { formatSeconds } from "./summary";

/** A tick spacing (seconds) giving at most about `maxTicks` ticks over `spanSeconds`. */
export function tickStepSeconds(spanSeconds: number, maxTicks = 12): number {
    const steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
    return steps.find((step) => spanSeconds / step <= maxTicks) ?? Math.ceil(spanSeconds / maxTicks / 3600) * 3600;
}

/** One row of the chart: a group heading or a resource. */
export type ChartRow = { readonly heading: string } | { readonly span: ResourceSpan } | { readonly outside: true };

/**
 * The rows: the stack and providers, then each node (its component first), then what belongs to
 * the whole cluster, then one row of the time outside the critical path.
 */
export function chartRows(timeline: Timeline): ChartRow[] {
    const rank = (span: ResourceSpan) => (span.kind === "component" || span.kind === "stack" ? 0 : 1);
    const ordered = (list: ResourceSpan[]) => [...list].sort((a, b) => rank(a) - rank(b) || a.startMs - b.startMs || a.endMs - b.endMs);
    const groups: { heading: string; spans: ResourceSpan[] }[] = [
        { heading: "stack", spans: timeline.spans.filter((span) => span.kind === "stack" || span.kind === "provider") },
        ...timeline.nodes.map((node) => ({ heading: `node ${node}`, spans: timeline.spans.filter((span) => span.node === node && span.kind !== "stack" && span.kind !== "provider") })),
        { heading: "cluster", spans: timeline.spans.filter((span) => span.node === undefined && span.kind !== "stack" && span.kind !== "provider") },
    ];
    const rows: ChartRow[] = [];
    for (const group of groups) {
        if (group.spans.length > 0) {
            rows.push({ heading: group.heading }, ...ordered(group.spans).map((span) => ({ span })));
        }
    }
    rows.push({ outside: true });
    return rows;
}

/** Options of {@link renderTimelineSvg}. */
export interface SvgOptions {
    /** The chart's heading, e.g. `pulumi up, 4 nodes`. */
    readonly title?: string;
    /** Total width in pixels (default 1200). */
    readonly width?: number;
}

const COLORS = {
    critical: "#e8590c",
    work: "#4c6ef5",
    component: "#ced4da",
    failed: "#c92a2a",
    outside: "#fcc419",
    grid: "#e9ecef",
    text: "#212529",
    muted: "#868e96",
};

/**
 * The Gantt chart as an SVG document: one row per resource grouped by node, critical steps
 * highlighted, the time outside the critical path on the last row, a time axis in seconds from the
 * operation's start. Every bar has a tooltip (`<title>`) with its operation and times.
 */
export function renderTimelineSvg(timeline: Timeline, options: SvgOptions = {}): string {
    const width = options.width ?? 1200;
    const labelWidth = 260;
    const rightMargin = 70;
    const rowHeight = 18;
    const top = 88;
    const rows = chartRows(timeline);
    const plotWidth = width - labelWidth - rightMargin;
    const height = top + rows.length * rowHeight + 40;
    const wallSeconds = Math.max(timeline.wallMs / 1000, 0.001);
    // Times seen on arrival may run a little past the operation's end: keep bars inside the plot.
    const x = (ms: number) => labelWidth + Math.min(1, Math.max(0, (ms - timeline.startMs) / 1000 / wallSeconds)) * plotWidth;
    const round = (value: number) => Math.round(value * 10) / 10;
    const critical = new Set(timeline.criticalPath.map((step) => step.urn));
    const out: string[] = [];
    out.push(
        ...svgHead(
            width,
            height,
            options.title ?? "deployment timeline",
            `wall ${formatSeconds(timeline.wallMs)} · critical path ${formatSeconds(timeline.criticalMs)} (${timeline.criticalPath.length} steps) · ` +
                `outside it ${formatSeconds(timeline.outsideMs)} = ${Math.round(timeline.outsideShare * 100)}% · dependencies ${timeline.graphSource === "export" ? "from stack export" : "inferred from times"}`,
            COLORS.text,
        ),
    );
    const legend: [string, string][] = [
        [COLORS.critical, "critical path"],
        [COLORS.work, "other step"],
        [COLORS.component, "component / stack"],
        [COLORS.failed, "failed"],
        [COLORS.outside, "outside the critical path"],
    ];
    legend.forEach(([color, label], index) => {
        const lx = 10 + index * 170;
        out.push(`<rect x="${lx}" y="47" width="12" height="10" fill="${color}"/><text x="${lx + 16}" y="56" fill="${COLORS.text}">${escapeXml(label)}</text>`);
    });

    // Time axis: grid lines and labels on top and bottom.
    const step = tickStepSeconds(wallSeconds);
    const bottom = top + rows.length * rowHeight;
    for (let tick = 0; tick <= wallSeconds + 1e-9; tick += step) {
        const tx = round(labelWidth + (tick / wallSeconds) * plotWidth);
        const label = `${Number(tick.toFixed(1))}s`;
        out.push(
            `<line x1="${tx}" y1="${top - 6}" x2="${tx}" y2="${bottom}" stroke="${COLORS.grid}"/>`,
            `<text x="${tx}" y="${top - 9}" text-anchor="middle" fill="${COLORS.muted}">${label}</text>`,
            `<text x="${tx}" y="${bottom + 14}" text-anchor="middle" fill="${COLORS.muted}">${label}</text>`,
        );
    }
    out.push(`<text x="${labelWidth + plotWidth / 2}" y="${bottom + 30}" text-anchor="middle" fill="${COLORS.muted}">seconds since the operation started</text>`);

    rows.forEach((row, index) => {
        const y = top + index * rowHeight;
        if ("heading" in row) {
            out.push(
                `<rect x="0" y="${y}" width="${width}" height="${rowHeight}" fill="#f1f3f5"/>`,
                `<text x="8" y="${y + 13}" font-weight="bold" fill="${COLORS.text}">${escapeXml(row.heading)}</text>`,
            );
            return;
        }
        if ("outside" in row) {
            out.push(`<text x="16" y="${y + 13}" fill="${COLORS.text}">outside the critical path</text>`);
            for (const interval of timeline.outside.intervals) {
                const bx = round(x(interval.startMs));
                const bw = round(Math.max(1, x(interval.endMs) - x(interval.startMs)));
                out.push(
                    `<rect x="${bx}" y="${y + 3}" width="${bw}" height="${rowHeight - 6}" fill="${COLORS.outside}">` +
                        `<title>${escapeXml(`outside the critical path: +${formatSeconds(interval.startMs - timeline.startMs)}, ${formatSeconds(interval.endMs - interval.startMs)}`)}</title></rect>`,
                );
            }
            return;
        }
        const { span } = row;
        const isCritical = critical.has(span.urn);
        const structural = span.kind === "component" || span.kind === "stack";
        const color = span.failed ? COLORS.failed : isCritical ? COLORS.critical : structural ? COLORS.component : COLORS.work;
        const bx = round(x(span.startMs));
        const bw = round(Math.max(2, x(span.endMs) - x(span.startMs)));
        const barHeight = structural ? 6 : rowHeight - 6;
        const by = structural ? y + 6 : y + 3;
        const tooltip =
            `${span.name} (${span.type}) ${span.ops.join(", ")}: +${formatSeconds(span.startMs - timeline.startMs)} for ${formatSeconds(span.endMs - span.startMs)}` +
            `${isCritical ? ", on the critical path" : ""}${span.failed ? ", failed" : ""}${span.unfinished ? ", unfinished" : ""}`;
        out.push(
            `<text x="16" y="${y + 13}" fill="${isCritical ? COLORS.critical : COLORS.text}"${isCritical ? ' font-weight="bold"' : ""}>${escapeXml(span.name)}` +
                `<tspan dx="5" fill="${COLORS.muted}" font-weight="normal">${escapeXml(span.ops.join(","))}</tspan></text>`,
            `<rect x="${bx}" y="${by}" width="${bw}" height="${barHeight}" fill="${color}"${span.failed ? ' stroke="#000000"' : ""}><title>${escapeXml(tooltip)}</title></rect>`,
        );
        if (!structural) {
            out.push(`<text x="${round(bx + bw + 4)}" y="${y + 13}" fill="${COLORS.muted}">${formatSeconds(span.endMs - span.startMs)}</text>`);
        }
    });
    out.push("</svg>");
    return `${out.join("\n")}\n`;
}
