/** The timeline as text: the critical path step by step and the time outside it. */
import { Timeline } from "./criticalPath";

/** Seconds with one decimal, e.g. `12.3s`. */
export function formatSeconds(ms: number): string {
    return `${(ms / 1000).toFixed(1)}s`;
}

/** A plain-text account of the timeline: wall time, the critical path step by step, the time outside it. */
export function formatTimelineSummary(timeline: Timeline): string {
    const percent = (ms: number) => (timeline.wallMs > 0 ? `${Math.round((100 * ms) / timeline.wallMs)}%` : "-");
    const at = (ms: number) => formatSeconds(ms - timeline.startMs).padStart(7);
    const width = Math.max(4, ...timeline.criticalPath.map((step) => step.name.length));
    const lines = [
        `wall ${formatSeconds(timeline.wallMs)}, critical path ${formatSeconds(timeline.criticalMs)} in ${timeline.criticalPath.length} steps, ` +
            `outside it ${formatSeconds(timeline.outsideMs)} (${percent(timeline.outsideMs)}; dependencies ${timeline.graphSource === "export" ? "from the stack export" : "inferred from times"})`,
        `  ${"step".padEnd(width)}   start  duration   waited`,
        ...timeline.criticalPath.map(
            (step) => `  ${step.name.padEnd(width)} ${at(step.startMs)} ${formatSeconds(step.endMs - step.startMs).padStart(9)} ${formatSeconds(step.waitMs).padStart(8)}`,
        ),
        `  outside the critical path: start-up ${formatSeconds(timeline.outside.beforeFirstMs)}, between steps ${formatSeconds(timeline.outside.betweenMs)}, ` +
            `after the last step ${formatSeconds(timeline.outside.afterLastMs)}`,
    ];
    return lines.join("\n");
}
