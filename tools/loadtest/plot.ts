/**
 * What the load test's panels share (./svg.ts, ./serverSvg.ts): the colours, the round ticks and a
 * panel's frame (title, legend, value grid, axes), so every panel of the chart looks the same.
 */
import { escapeXml } from "../svg";

export const COLORS = {
    first: "#4c6ef5",
    second: "#e8590c",
    failed: "#c92a2a",
    grid: "#e9ecef",
    axis: "#adb5bd",
    text: "#212529",
    muted: "#868e96",
    band: "#f1f3f5",
};

/** Coordinates to a tenth of a pixel. */
export const round = (value: number) => Math.round(value * 10) / 10;

/** A "nice" step (1, 2 or 5 times a power of ten) giving at most `maxTicks` ticks up to `max`. */
export function niceStep(max: number, maxTicks = 5): number {
    if (!(max > 0)) {
        return 1;
    }
    const raw = max / maxTicks;
    const magnitude = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((m) => m * magnitude).find((step) => step >= raw) ?? 10 * magnitude;
}

/** The value axis's top (a round number at or above every value) and its step. */
export function valueScale(values: readonly number[]): { max: number; step: number } {
    const highest = Math.max(0, ...values);
    const step = niceStep(highest);
    return { max: Math.max(step, Math.ceil(highest / step) * step), step };
}

/** Where a panel goes: its left edge and width, its plot's top and height. */
export interface PanelBox {
    readonly left: number;
    readonly width: number;
    readonly top: number;
    readonly plotHeight: number;
}

/** A panel's frame as drawn: the plot's left (the value axis), right and bottom, and value -> y. */
export interface PanelFrame {
    readonly axisX: number;
    readonly plotRight: number;
    readonly plotWidth: number;
    readonly bottom: number;
    readonly y: (value: number) => number;
}

/**
 * Draws a panel's frame, the same for every panel of the chart: its title and legend above the
 * plot, the value grid with its ticks, the axes, the unit along the value axis and `xLabel` under it.
 */
export function drawPanelFrame(
    out: string[],
    box: PanelBox,
    panel: { readonly title: string; readonly unit: string; readonly legend: readonly { readonly label: string; readonly color: string }[]; readonly xLabel: string },
    scale: { readonly max: number; readonly step: number },
): PanelFrame {
    const { left, top, plotHeight } = box;
    const bottom = top + plotHeight;
    const axisX = left + 62;
    const plotRight = left + box.width - 10;
    const y = (value: number) => bottom - (value / scale.max) * plotHeight;
    out.push(`<text x="${axisX}" y="${top - 32}" font-size="13" font-weight="bold" fill="${COLORS.text}">${escapeXml(panel.title)}</text>`);
    panel.legend.forEach((series, index) => {
        const lx = axisX + index * 150;
        out.push(`<rect x="${lx}" y="${top - 24}" width="12" height="10" fill="${series.color}"/><text x="${lx + 16}" y="${top - 15}" fill="${COLORS.text}">${escapeXml(series.label)}</text>`);
    });
    for (let tick = 0; tick <= scale.max + 1e-9; tick += scale.step) {
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
        `<text x="${round(axisX + (plotRight - axisX) / 2)}" y="${bottom + 46}" text-anchor="middle" fill="${COLORS.muted}">${escapeXml(panel.xLabel)}</text>`,
    );
    return { axisX, plotRight, plotWidth: plotRight - axisX, bottom, y };
}
