/**
 * Reading what a deployment left: the Pulumi engine's events of one operation and the resource
 * graph of a stack export.
 *
 * The events are either the Automation API's `EngineEvent` objects (`stack.up({ onEvent })`) or the
 * JSON lines `pulumi up --event-log <file>` writes (same shape). Each resource's steps are bracketed
 * by a `resourcePreEvent` and a `resOutputsEvent` (or `resOpFailedEvent`) with `metadata.urn`. The
 * dependencies between resources are not in the events: they come from a `pulumi stack export`
 * (each resource's `dependencies` and `parent`).
 *
 * Pure: no Pulumi engine, no I/O (the caller reads the files).
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

/** A resource's step as one event shows it: opened (`pre`), ended (`outputs`) or failed. */
export type ResourceEventKind = "pre" | "outputs" | "failed";

/** The step an event opens, ends or fails; undefined for the events of no resource. */
export function resourceEvent(event: EngineEventLike): { kind: ResourceEventKind; metadata: StepMetadataLike; planning: boolean } | undefined {
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
