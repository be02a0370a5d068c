/**
 * Where the time of a deployment goes, from the Pulumi engine's own events (read by ./events.ts):
 * one span per resource (from its first to its last event), the critical path (from the resource
 * that finished last, back through the dependency that finished last before it started), how much
 * of the wall time lies outside that path (engine start-up, scheduling gaps, shutdown), and the
 * longest dependency chain. Without a stack export's graph the path is inferred from the times alone.
 *
 * Pure: no Pulumi engine, no I/O. Event-log timestamps are whole seconds; a caller that saw the
 * events arrive (the Automation API's `onEvent`) can pass finer times with `timeOf`.
 */
import { EngineEventLike, ResourceGraph, StepMetadataLike, nameOfUrn, resourceEvent, selectOperation } from "./events";

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
