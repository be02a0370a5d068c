/**
 * The load test chart's lower row: what the server saw over the run (./serverSampler.ts), two panels
 * drawn like the levels' above (./plot.ts): its requests running and waiting, and its KV cache usage,
 * each level's span shaded and named, and a line per level with its peaks; or, when it was not
 * sampled, one line saying why.
 */
import { escapeXml } from "../svg";
import { COLORS, PanelFrame, drawPanelFrame, niceStep, round, valueScale } from "./plot";
import { ServerSample, ServerSide, peakText } from "./serverSampler";

const HEADER = 14;
const PLOT_TOP = 76;
const PLOT_HEIGHT = 180;
const LINES_TOP = PLOT_TOP + PLOT_HEIGHT + 70;
const LINE_HEIGHT = 16;
/** Up to this many samples each gets a dot with its tooltip; beyond, the lines alone. */
const DOTS_UP_TO = 120;

/** The server side when it was sampled (a report of before it was added has none). */
const sampled = (server: ServerSide | undefined): ServerSide | undefined => (server !== undefined && server.source !== "none" ? server : undefined);

/** The row's height: the panels and a line per level, or the one line saying it was not sampled. */
export function serverRowHeight(server: ServerSide | undefined): number {
    const side = sampled(server);
    return side ? LINES_TOP + LINE_HEIGHT * side.levels.length : HEADER + 16;
}

/** A figure's samples as polylines, broken where samples are missing (a read that failed), and dots. */
function drawSeries(
    out: string[],
    samples: readonly ServerSample[],
    intervalMs: number,
    figure: (sample: ServerSample) => number,
    label: string,
    color: string,
    x: (t: number) => number,
    frame: PanelFrame,
): void {
    const segments: ServerSample[][] = [];
    samples.forEach((sample, index) => {
        const gap = index > 0 && (sample.t - samples[index - 1].t) * 1000 > intervalMs * 1.5;
        if (index === 0 || gap) {
            segments.push([]);
        }
        segments[segments.length - 1].push(sample);
    });
    for (const segment of segments) {
        const points = segment.map((sample) => `${round(x(sample.t))},${round(frame.y(figure(sample)))}`).join(" ");
        out.push(`<polyline points="${points}" fill="none" stroke="${color}" stroke-width="1.5"/>`);
    }
    if (samples.length <= DOTS_UP_TO) {
        for (const sample of samples) {
            const tooltip = `${sample.t.toFixed(1)} s: ${label} ${peakText(figure(sample), 1)}`;
            out.push(`<circle cx="${round(x(sample.t))}" cy="${round(frame.y(figure(sample)))}" r="2" fill="${color}"><title>${escapeXml(tooltip)}</title></circle>`);
        }
    }
}

/**
 * Draws the row at `top` across `width`: a heading (where the figures came from, how many reads
 * failed), the two panels over the seconds of the run, and the peaks of each level.
 */
export function drawServerRow(out: string[], side: ServerSide | undefined, top: number, width: number): void {
    const server = sampled(side);
    if (!server) {
        out.push(`<text x="10" y="${top + HEADER}" fill="${COLORS.muted}">${escapeXml(`server side: not sampled (${side?.reason ?? "not in this report"})`)}</text>`);
        return;
    }
    const failed = server.failed > 0 ? `, ${server.failed} read${server.failed === 1 ? "" : "s"} failed` : "";
    out.push(
        `<text x="10" y="${top + HEADER}" font-size="13" font-weight="bold" fill="${COLORS.text}">server side</text>`,
        `<text x="96" y="${top + HEADER}" fill="${COLORS.text}">${escapeXml(`from ${server.source}: ${server.samples.length} samples, one every ${server.intervalMs / 1000} s${failed}`)}</text>`,
    );
    const samples = server.samples;
    const end = Math.max(server.levels.at(-1)?.toS ?? 0, samples.at(-1)?.t ?? 0, 1e-3);
    const gap = 40;
    const panelWidth = (width - gap) / 2;
    const panels = [
        {
            title: "server: requests running and waiting",
            unit: "requests",
            whole: true,
            series: [
                { label: "running", color: COLORS.first, figure: (sample: ServerSample) => sample.running },
                { label: "waiting", color: COLORS.second, figure: (sample: ServerSample) => sample.waiting },
            ],
        },
        {
            title: "server: KV cache usage",
            unit: "percent",
            whole: false,
            series: [{ label: "KV cache used", color: COLORS.first, figure: (sample: ServerSample) => sample.kvPercent }],
        },
    ];
    panels.forEach((panel, panelIndex) => {
        const values = panel.series.flatMap((series) => samples.map(series.figure));
        const scale = valueScale(values);
        // Requests are counted: whole ticks.
        const ticks = panel.whole && scale.step < 1 ? { max: Math.max(1, Math.ceil(scale.max)), step: 1 } : scale;
        const frame = drawPanelFrame(
            out,
            { left: panelIndex * (panelWidth + gap), width: panelWidth, top: top + PLOT_TOP, plotHeight: PLOT_HEIGHT },
            { title: panel.title, unit: panel.unit, legend: panel.series, xLabel: "seconds since the first level started" },
            ticks,
        );
        const x = (t: number) => frame.axisX + (Math.min(t, end) / end) * frame.plotWidth;
        const plotTop = top + PLOT_TOP;
        // Each level's span: every other one shaded, each named, its peaks in its tooltip.
        server.levels.forEach((level, index) => {
            const from = x(level.fromS);
            const to = x(level.toS);
            const tooltip = `concurrency ${level.concurrency}, ${level.fromS.toFixed(1)}–${level.toS.toFixed(1)} s: peak running ${peakText(level.peakRunning, 0)}, peak waiting ${peakText(level.peakWaiting, 0)}, peak KV ${peakText(level.peakKvPercent, 1)} %`;
            out.push(
                `<rect x="${round(from)}" y="${plotTop}" width="${round(Math.max(0, to - from))}" height="${PLOT_HEIGHT}" fill="${index % 2 === 0 ? COLORS.band : "#ffffff"}" fill-opacity="0.6"><title>${escapeXml(tooltip)}</title></rect>`,
                `<line x1="${round(from)}" y1="${plotTop}" x2="${round(from)}" y2="${frame.bottom}" stroke="${COLORS.axis}" stroke-dasharray="3,3"/>`,
                `<text x="${round((from + to) / 2)}" y="${plotTop + 12}" text-anchor="middle" fill="${COLORS.muted}">${escapeXml(`concurrency ${level.concurrency}`)}</text>`,
            );
        });
        const step = niceStep(end, 8);
        for (let tick = 0; tick <= end + 1e-9; tick += step) {
            out.push(`<text x="${round(x(tick))}" y="${frame.bottom + 15}" text-anchor="middle" fill="${COLORS.text}">${Number(tick.toPrecision(6))}</text>`);
        }
        for (const series of panel.series) {
            drawSeries(out, samples, server.intervalMs, series.figure, series.label, series.color, x, frame);
        }
    });
    server.levels.forEach((level, index) => {
        const line =
            `concurrency ${level.concurrency} (${level.fromS.toFixed(1)}–${level.toS.toFixed(1)} s): peak running ${peakText(level.peakRunning, 0)}, ` +
            `peak waiting ${peakText(level.peakWaiting, 0)}, peak KV ${peakText(level.peakKvPercent, 1)} %` +
            (level.samples === 0 ? " (no sample in its span)" : "");
        out.push(`<text x="10" y="${top + LINES_TOP - 6 + index * LINE_HEIGHT}" fill="${COLORS.text}">${escapeXml(line)}</text>`);
    });
}
