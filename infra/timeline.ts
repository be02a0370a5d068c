/**
 * Where the time of a deployment goes, from the Pulumi engine's own events.
 *
 * Input: the engine events of one operation, either the Automation API's `EngineEvent` objects
 * (`stack.up({ onEvent })`) or the JSON lines `pulumi up --event-log <file>` writes (same shape).
 * Each resource's steps are bracketed by a `resourcePreEvent` and a `resOutputsEvent` (or
 * `resOpFailedEvent`) with `metadata.urn`; that gives one span per resource. The dependencies
 * between resources are not in the events: they come from a `pulumi stack export` (each resource's
 * `dependencies` and `parent`), else the path is inferred from the times alone.
 *
 * Output: the spans, the critical path (from the resource that finished last, back through the
 * dependency that finished last before it started), how much of the wall time lies outside that
 * path (engine start-up, scheduling gaps, shutdown), and an SVG Gantt chart drawn by hand.
 *
 * Pure: no Pulumi engine, no I/O. Event-log timestamps are whole seconds; a caller that saw the
 * events arrive (the Automation API's `onEvent`) can pass finer times with `timeOf`.
 */

/** The step metadata of a resource event, as far as the timeline reads it. */
export interface StepMetadataLike {
    readonly op: string;
    readonly urn: string;
    readonly type: string;
    /** The engine's provider reference of the step: `<provider urn>::<provider id>`. */
    readonly provider?: string;
    readonly old?: { readonly parent?: string; readonly custom?: boolean } | null;
    readonly new?: { readonly parent?: string; readonly custom?: boolean } | null;
}

/** One engine event, as far as the timeline reads it (a subset of the Automation API's EngineEvent). */
export interface EngineEventLike {
    readonly sequence?: number;
    /** Unix time in seconds. */
    readonly timestamp: number;
    readonly preludeEvent?: unknown;
    readonly summaryEvent?: { readonly durationSeconds?: number; readonly resourceChanges?: Record<string, number> };
    readonly resourcePreEvent?: { readonly metadata: StepMetadataLike; readonly planning?: boolean };
    readonly resOutputsEvent?: { readonly metadata: StepMetadataLike; readonly planning?: boolean };
    readonly resOpFailedEvent?: { readonly metadata: StepMetadataLike };
}

/** Parent and dependencies of each resource, by URN (from `pulumi stack export`). */
export type ResourceGraph = ReadonlyMap<string, { readonly parent?: string; readonly dependencies: readonly string[] }>;

/** What a resource is, for grouping and for the critical path (only `custom` and `provider` steps do work). */
export type ResourceKind = "stack" | "component" | "provider" | "custom";

/** The time one resource's steps took in the operation. */
export interface ResourceSpan {
    readonly urn: string;
    /** The resource's name (the last part of its URN), e.g. `ray-spark2-ray-joined`. */
    readonly name: string;
    readonly type: string;
    readonly kind: ResourceKind;
    readonly parentUrn?: string;
    /** The URN of the provider that ran the step (from the engine's `<urn>::<id>` reference). */
    readonly providerUrn?: string;
    /** The node whose name the resource's name carries (see {@link nodeOfResource}). */
    readonly node?: string;
    /** The engine's operations on it, in order (`create`, `same`, `update`, `delete-replaced`, ...). */
    readonly ops: readonly string[];
    readonly startMs: number;
    readonly endMs: number;
    readonly failed: boolean;
    /** No closing event was seen: the span ends with the operation. */
    readonly unfinished: boolean;
}

/** A resource on the critical path, with the time between its predecessor's end and its own start. */
export interface CriticalStep {
    readonly urn: string;
    readonly name: string;
    readonly startMs: number;
    readonly endMs: number;
    /** Milliseconds from the predecessor's end (or the operation's start) to this step's start. */
    readonly waitMs: number;
}

/** The wall time not covered by a critical step. */
export interface OutsideCriticalPath {
    /** From the operation's start to the first critical step: CLI, program, plugin start-up. */
    readonly beforeFirstMs: number;
    /** Between consecutive critical steps: the engine's scheduling, the program's outputs, checks. */
    readonly betweenMs: number;
    /** From the last critical step to the operation's end: outputs, state, CLI exit. */
    readonly afterLastMs: number;
    /** The uncovered intervals, for drawing. */
    readonly intervals: readonly { readonly startMs: number; readonly endMs: number }[];
}

/** The timeline of one engine operation. */
export interface Timeline {
    readonly startMs: number;
    readonly endMs: number;
    readonly wallMs: number;
    /** Every resource of the operation, in order of start. */
    readonly spans: readonly ResourceSpan[];
    /** The node names: as given, else the SparkNode components' names in natural order. */
    readonly nodes: readonly string[];
    /** From the first to the last step of the longest dependency chain. */
    readonly criticalPath: readonly CriticalStep[];
    /** Wall time covered by critical steps. */
    readonly criticalMs: number;
    /** Wall time not covered by critical steps (`wallMs - criticalMs`). */
    readonly outsideMs: number;
    /** `outsideMs / wallMs`. */
    readonly outsideShare: number;
    readonly outside: OutsideCriticalPath;
    /** Where the dependencies came from: a stack export, or inferred from the times. */
    readonly graphSource: "export" | "inferred";
    /** The engine's summary of changes (`{ create: 13 }`), when the log has a summary. */
    readonly resourceChanges?: Record<string, number>;
}

/** The type of the component that stands for one node (its name is the node's name). */
export const NODE_COMPONENT_TYPE = "vllm-fleet:node:SparkNode";
const STACK_TYPE = "pulumi:pulumi:Stack";
const PROVIDER_TYPE_PREFIX = "pulumi:providers:";

/** The resource name of a URN (`urn:pulumi:stack::project::type::name` → `name`). */
export function nameOfUrn(urn: string): string {
    const index = urn.lastIndexOf("::");
    return index < 0 ? urn : urn.slice(index + 2);
}

/** The type of a URN (the last `$`-separated part of its type chain). */
export function typeOfUrn(urn: string): string {
    const parts = urn.split("::");
    const chain = parts.length >= 4 ? parts[parts.length - 2] : "";
    return chain.slice(chain.lastIndexOf("$") + 1);
}

/**
 * The node a resource belongs to by its name: the name is the node's name, or carries it as a
 * dash-separated part (`spark1-probe`, `ray-spark2-ray-worker`). The longest matching node wins
 * (`spark10` over `spark1`). Undefined for resources of the whole cluster (`ray-ready`).
 */
export function nodeOfResource(name: string, nodes: readonly string[]): string | undefined {
    const carries = (node: string) =>
        name === node || name.startsWith(`${node}-`) || name.endsWith(`-${node}`) || name.includes(`-${node}-`);
    return [...nodes].sort((a, b) => b.length - a.length).find(carries);
}

/**
 * Parses an event-log file (`pulumi up --event-log`): one JSON event per line. Blank lines and a
 * torn last line (a log still being written) are skipped; any other bad line is an error naming it.
 */
export function parseEventLog(text: string): EngineEventLike[] {
    const lines = text.split("\n");
    const events: EngineEventLike[] = [];
    lines.forEach((line, index) => {
        if (line.trim() === "") {
            return;
        }
        try {
            events.push(JSON.parse(line) as EngineEventLike);
        } catch (error) {
            const isLast = lines.slice(index + 1).every((rest) => rest.trim() === "");
            if (!isLast) {
                throw new Error(`event log line ${index + 1} is not JSON: ${(error as Error).message}`);
            }
        }
    });
    return events;
}

/**
 * The resource graph of a `pulumi stack export` (the file, or the Automation API's `exportStack()`):
 * accepts `{ deployment: { resources } }` and `{ resources }`.
 */
export function resourceGraphFromExport(exported: unknown): ResourceGraph {
    const root = exported as { deployment?: { resources?: unknown }; resources?: unknown } | null;
    const resources = root?.deployment?.resources ?? root?.resources;
    if (!Array.isArray(resources)) {
        throw new Error("not a stack export: no deployment.resources list");
    }
    const graph = new Map<string, { parent?: string; dependencies: string[] }>();
    for (const resource of resources as { urn?: unknown; parent?: unknown; dependencies?: unknown }[]) {
        if (typeof resource?.urn !== "string") {
            continue;
        }
        graph.set(resource.urn, {
            parent: typeof resource.parent === "string" && resource.parent !== "" ? resource.parent : undefined,
            dependencies: Array.isArray(resource.dependencies) ? resource.dependencies.filter((dep): dep is string => typeof dep === "string") : [],
        });
    }
    return graph;
}

type ResourceEventKind = "pre" | "outputs" | "failed";

function resourceEvent(event: EngineEventLike): { kind: ResourceEventKind; metadata: StepMetadataLike; planning: boolean } | undefined {
    if (event.resourcePreEvent) {
        return { kind: "pre", metadata: event.resourcePreEvent.metadata, planning: event.resourcePreEvent.planning === true };
    }
    if (event.resOutputsEvent) {
        return { kind: "outputs", metadata: event.resOutputsEvent.metadata, planning: event.resOutputsEvent.planning === true };
    }
    if (event.resOpFailedEvent) {
        return { kind: "failed", metadata: event.resOpFailedEvent.metadata, planning: false };
    }
    return undefined;
}

/**
 * The events of the operation to draw. A log may hold a preview (`planning` steps) before the
 * update, each opened by a prelude event: the last phase with real (non-planning) resource steps is
 * taken, else the last phase with any.
 */
export function selectOperation(events: readonly EngineEventLike[]): EngineEventLike[] {
    const ordered = [...events].sort((a, b) => (a.sequence ?? 0) - (b.sequence ?? 0) || a.timestamp - b.timestamp);
    const phases: EngineEventLike[][] = [];
    for (const event of ordered) {
        if (event.preludeEvent !== undefined || phases.length === 0) {
            phases.push([]);
        }
        phases[phases.length - 1].push(event);
    }
    const hasSteps = (phase: EngineEventLike[], real: boolean) =>
        phase.some((event) => {
            const step = resourceEvent(event);
            return step !== undefined && (!real || !step.planning);
        });
    return [...phases].reverse().find((phase) => hasSteps(phase, true)) ?? [...phases].reverse().find((phase) => hasSteps(phase, false)) ?? [];
}

function kindOf(metadata: StepMetadataLike): ResourceKind {
    if (metadata.type === STACK_TYPE) {
        return "stack";
    }
    if (metadata.type.startsWith(PROVIDER_TYPE_PREFIX)) {
        return "provider";
    }
    return metadata.new?.custom === true || metadata.old?.custom === true ? "custom" : "component";
}

/** Options of {@link buildTimeline}. */
export interface TimelineOptions {
    /** Dependencies and parents (from a stack export); without it the critical path is inferred from times. */
    readonly graph?: ResourceGraph;
    /** The operation's time window; default: its first to its last event. */
    readonly window?: { readonly startMs: number; readonly endMs: number };
    /** The time of an event in ms; default `timestamp * 1000` (whole seconds in event logs). */
    readonly timeOf?: (event: EngineEventLike) => number;
    /** Node names in the order to draw them; default: the SparkNode components' names in natural order. */
    readonly nodes?: readonly string[];
}

interface MutableSpan {
    urn: string;
    type: string;
    kind: ResourceKind;
    parentUrn?: string;
    provider?: string;
    ops: string[];
    startMs: number;
    endMs?: number;
    failed: boolean;
}

/** Builds the spans, the critical path and the time outside it from one operation's events. */
export function buildTimeline(allEvents: readonly EngineEventLike[], options: TimelineOptions = {}): Timeline {
    const timeOf = options.timeOf ?? ((event: EngineEventLike) => event.timestamp * 1000);
    const events = selectOperation(allEvents);
    if (events.length === 0) {
        throw new Error("no engine events: nothing to draw");
    }
    const times = events.map(timeOf);
    const startMs = options.window?.startMs ?? Math.min(...times);
    const endMs = Math.max(options.window?.endMs ?? Math.max(...times), startMs);

    const byUrn = new Map<string, MutableSpan>();
    let resourceChanges: Record<string, number> | undefined;
    events.forEach((event, index) => {
        if (event.summaryEvent?.resourceChanges) {
            resourceChanges = { ...event.summaryEvent.resourceChanges };
        }
        const step = resourceEvent(event);
        if (!step) {
            return;
        }
        const at = times[index];
        const { metadata } = step;
        let span = byUrn.get(metadata.urn);
        if (!span) {
            span = { urn: metadata.urn, type: metadata.type, kind: kindOf(metadata), ops: [], startMs: at, failed: false };
            byUrn.set(metadata.urn, span);
        }
        const parent = metadata.new?.parent || metadata.old?.parent;
        span.parentUrn = span.parentUrn ?? (parent ? parent : undefined);
        span.provider = span.provider ?? (metadata.provider ? metadata.provider : undefined);
        if (!span.ops.includes(metadata.op)) {
            span.ops.push(metadata.op);
        }
        span.startMs = Math.min(span.startMs, at);
        if (step.kind !== "pre") {
            span.endMs = Math.max(span.endMs ?? at, at);
        }
        if (step.kind === "failed") {
            span.failed = true;
        }
    });

    // Node components register concurrently: order them by name, numbers by value (spark2 < spark10).
    const nodes =
        options.nodes ??
        [...byUrn.values()]
            .filter((span) => span.type === NODE_COMPONENT_TYPE)
            .map((span) => nameOfUrn(span.urn))
            .sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
    const spans: ResourceSpan[] = [...byUrn.values()]
        .map((span) => ({
            urn: span.urn,
            name: nameOfUrn(span.urn),
            type: span.type,
            kind: span.kind,
            parentUrn: span.parentUrn ?? options.graph?.get(span.urn)?.parent,
            providerUrn: span.provider ? span.provider.slice(0, span.provider.lastIndexOf("::")) : undefined,
            node: nodeOfResource(nameOfUrn(span.urn), nodes),
            ops: span.ops,
            startMs: span.startMs,
            endMs: span.endMs ?? endMs,
            failed: span.failed,
            unfinished: span.endMs === undefined,
        }))
        .sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs);

    const criticalPath = findCriticalPath(spans, options.graph, startMs);
    const outside = outsideOf(criticalPath, startMs, endMs);
    const wallMs = endMs - startMs;
    const outsideMs = outside.beforeFirstMs + outside.betweenMs + outside.afterLastMs;
    return {
        startMs,
        endMs,
        wallMs,
        spans,
        nodes,
        criticalPath,
        criticalMs: wallMs - outsideMs,
        outsideMs,
        outsideShare: wallMs > 0 ? outsideMs / wallMs : 0,
        outside,
        graphSource: options.graph ? "export" : "inferred",
        resourceChanges,
    };
}

/** A deletion runs after what depends on it is gone: its predecessors are its dependents. */
function isDeletion(span: ResourceSpan): boolean {
    return span.ops.length > 0 && span.ops.every((op) => op === "delete" || op === "discard" || op === "read-discard");
}

/** The steps that do work (custom resources and providers): the only ones a chain runs through. */
function workingSpans(spans: readonly ResourceSpan[]): ResourceSpan[] {
    return spans.filter((span) => span.kind === "custom" || span.kind === "provider");
}

/**
 * What each working step waited for: the dependencies of the graph (components expanded to the
 * resources beneath them) plus the step's provider; for a deletion, the resources depending on it.
 * Without a graph, every step that ended before this one started.
 */
function predecessorFinder(spans: readonly ResourceSpan[], graph: ResourceGraph | undefined): (span: ResourceSpan) => ResourceSpan[] {
    const working = workingSpans(spans);
    if (!graph) {
        return (span) => working.filter((other) => other !== span && other.endMs <= span.startMs);
    }
    const byUrn = new Map(working.map((span) => [span.urn, span] as const));
    const children = new Map<string, string[]>();
    for (const span of spans) {
        if (span.parentUrn) {
            children.set(span.parentUrn, [...(children.get(span.parentUrn) ?? []), span.urn]);
        }
    }
    // A dependency on a component means every working resource beneath it.
    const expand = (urn: string, seen = new Set<string>()): string[] => {
        if (seen.has(urn)) {
            return [];
        }
        seen.add(urn);
        if (byUrn.has(urn)) {
            return [urn];
        }
        return (children.get(urn) ?? []).flatMap((child) => expand(child, seen));
    };
    const dependenciesOf = (span: ResourceSpan): string[] => {
        const declared = graph.get(span.urn)?.dependencies ?? [];
        const provider = span.providerUrn && byUrn.has(span.providerUrn) ? [span.providerUrn] : [];
        return [...declared.flatMap((dep) => expand(dep)), ...provider];
    };
    const dependents = new Map<string, string[]>();
    for (const span of working) {
        for (const dep of dependenciesOf(span)) {
            dependents.set(dep, [...(dependents.get(dep) ?? []), span.urn]);
        }
    }
    return (span) => {
        const urns = isDeletion(span) ? dependents.get(span.urn) ?? [] : dependenciesOf(span);
        return urns.map((urn) => byUrn.get(urn)).filter((other): other is ResourceSpan => other !== undefined && other !== span);
    };
}

/**
 * The longest chain of work: start at the step that finished last, then repeatedly step to the
 * predecessor that finished last (the one it waited for).
 */
function findCriticalPath(spans: readonly ResourceSpan[], graph: ResourceGraph | undefined, operationStartMs: number): CriticalStep[] {
    const working = workingSpans(spans);
    if (working.length === 0) {
        return [];
    }
    const predecessorsOf = predecessorFinder(spans, graph);
    const latestEnd = (list: readonly ResourceSpan[]) =>
        list.reduce((best, span) => (span.endMs > best.endMs || (span.endMs === best.endMs && span.startMs > best.startMs) ? span : best));

    const chain: ResourceSpan[] = [];
    const visited = new Set<string>();
    let current: ResourceSpan | undefined = latestEnd(working);
    while (current && !visited.has(current.urn)) {
        visited.add(current.urn);
        chain.push(current);
        const candidates: ResourceSpan[] = predecessorsOf(current).filter((span) => !visited.has(span.urn));
        current = candidates.length > 0 ? latestEnd(candidates) : undefined;
    }
    chain.reverse();
    return chain.map((span, index) => {
        const previousEnd = index === 0 ? operationStartMs : chain[index - 1].endMs;
        return { urn: span.urn, name: span.name, startMs: span.startMs, endMs: span.endMs, waitMs: Math.max(0, span.startMs - previousEnd) };
    });
}

/**
 * How long the working steps would take with unlimited parallelism and no contention between them:
 * the longest dependency chain, each step weighted by its duration in `timeline`. Weighted with a
 * `--parallel 1` run's durations (each step alone on the machine), it is what the graph itself allows;
 * the rest of a parallel run's time is start-up, shutdown and steps slowing each other down.
 */
export function longestChain(timeline: Timeline, graph: ResourceGraph): { readonly ms: number; readonly names: readonly string[] } {
    const predecessorsOf = predecessorFinder(timeline.spans, graph);
    const memo = new Map<string, { ms: number; names: string[] }>();
    const chainTo = (span: ResourceSpan, visiting: Set<string>): { ms: number; names: string[] } => {
        const known = memo.get(span.urn);
        if (known) {
            return known;
        }
        visiting.add(span.urn);
        const before = predecessorsOf(span)
            .filter((other) => !visiting.has(other.urn))
            .map((other) => chainTo(other, visiting))
            .reduce((best, chain) => (chain.ms >= best.ms ? chain : best), { ms: 0, names: [] as string[] });
        visiting.delete(span.urn);
        const chain = { ms: before.ms + (span.endMs - span.startMs), names: [...before.names, span.name] };
        memo.set(span.urn, chain);
        return chain;
    };
    return workingSpans(timeline.spans)
        .map((span) => chainTo(span, new Set()))
        .reduce((best, chain) => (chain.ms > best.ms ? chain : best), { ms: 0, names: [] as string[] });
}

/** The parts of [startMs, endMs] not covered by a critical step (steps may overlap by clock error). */
function outsideOf(path: readonly CriticalStep[], startMs: number, endMs: number): OutsideCriticalPath {
    const intervals: { startMs: number; endMs: number }[] = [];
    let cursor = startMs;
    let beforeFirstMs = 0;
    let betweenMs = 0;
    path.forEach((step, index) => {
        const stepStart = Math.min(Math.max(step.startMs, startMs), endMs);
        if (stepStart > cursor) {
            intervals.push({ startMs: cursor, endMs: stepStart });
            if (index === 0) {
                beforeFirstMs += stepStart - cursor;
            } else {
                betweenMs += stepStart - cursor;
            }
        }
        cursor = Math.max(cursor, Math.min(step.endMs, endMs));
    });
    const afterLastMs = Math.max(0, endMs - cursor);
    if (afterLastMs > 0) {
        intervals.push({ startMs: cursor, endMs });
    }
    return { beforeFirstMs, betweenMs, afterLastMs, intervals };
}

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

/** Escapes text for SVG content and attribute values. */
export function escapeXml(text: string): string {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
}

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
        `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
        `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
        `<text x="10" y="20" font-size="15" font-weight="bold" fill="${COLORS.text}">${escapeXml(options.title ?? "deployment timeline")}</text>`,
        `<text x="10" y="38" fill="${COLORS.text}">${escapeXml(
            `wall ${formatSeconds(timeline.wallMs)} · critical path ${formatSeconds(timeline.criticalMs)} (${timeline.criticalPath.length} steps) · ` +
                `outside it ${formatSeconds(timeline.outsideMs)} = ${Math.round(timeline.outsideShare * 100)}% · dependencies ${timeline.graphSource === "export" ? "from stack export" : "inferred from times"}`,
        )}</text>`,
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
