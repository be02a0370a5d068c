import * as fs from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { buildTimeline, longestChain, nodeOfResource } from "../../tools/timeline/criticalPath";
import { EngineEventLike, ResourceGraph, nameOfUrn, parseEventLog, resourceGraphFromExport, selectOperation, typeOfUrn } from "../../tools/timeline/events";
import { formatTimelineSummary } from "../../tools/timeline/summary";
import { escapeXml } from "../../tools/svg";
import { chartRows, renderTimelineSvg, tickStepSeconds } from "../../tools/timeline/svg";

// --- synthetic event streams --------------------------------------------------------------------

const STACK = "urn:pulumi:dev::vllm-fleet::pulumi:pulumi:Stack::vllm-fleet-dev";
const PROVIDER = "urn:pulumi:dev::vllm-fleet::pulumi:providers:pulumi-nodejs::default";
const COMMAND = "pulumi-nodejs:dynamic/remote:SshCommand";
const urnOf = (type: string, name: string, parentTypes: string[] = []) =>
    `urn:pulumi:dev::vllm-fleet::${[...parentTypes, type].join("$")}::${name}`;
const node = (name: string) => urnOf("vllm-fleet:node:SparkNode", name);
const command = (name: string, parentType?: string) => urnOf(COMMAND, name, parentType ? [parentType] : []);
const RAY = urnOf("vllm-fleet:ray:RayCluster", "ray");

interface StepOptions {
    readonly op?: string;
    readonly parent?: string;
    readonly custom?: boolean;
    readonly planning?: boolean;
}

/** The two events of one step: pre at `start`, outputs (or failure) at `end` (seconds). */
function stepEvents(urn: string, start: number, end: number | undefined, options: StepOptions & { failed?: boolean } = {}): EngineEventLike[] {
    const type = typeOfUrn(urn);
    const custom = options.custom ?? (type === COMMAND || type.startsWith("pulumi:providers:"));
    const state = { type, urn, custom, parent: options.parent ?? (urn === STACK ? "" : STACK) };
    const metadata = {
        op: options.op ?? "create",
        urn,
        type,
        provider: custom && !type.startsWith("pulumi:providers:") ? `${PROVIDER}::0000` : "",
        old: options.op === "delete" ? state : null,
        new: options.op === "delete" ? null : state,
    };
    const events: EngineEventLike[] = [{ timestamp: start, resourcePreEvent: { metadata, planning: options.planning } }];
    if (end !== undefined) {
        events.push(
            options.failed
                ? { timestamp: end, resOpFailedEvent: { metadata } }
                : { timestamp: end, resOutputsEvent: { metadata, planning: options.planning } },
        );
    }
    return events;
}

/** Numbers the events in time order, as the engine does, after a prelude at `t0`. */
function operation(t0: number, ...steps: EngineEventLike[][]): EngineEventLike[] {
    const events = [{ timestamp: t0, preludeEvent: { config: {} } }, ...steps.flat()].sort((a, b) => a.timestamp - b.timestamp);
    return events.map((event, index) => ({ ...event, sequence: index }));
}

/** A graph in the shape of a stack export. */
function graphOf(entries: Record<string, { parent?: string; dependencies?: string[] }>): ResourceGraph {
    return resourceGraphFromExport({
        deployment: { resources: Object.entries(entries).map(([urn, entry]) => ({ urn, parent: entry.parent ?? STACK, dependencies: entry.dependencies ?? [] })) },
    });
}

// A two-node deployment in the shape of vllm-fleet's (times in seconds from 100):
// probes in parallel, head container, head joined, worker container, worker joined, gate, serve.
const A = command("spark1-probe", "vllm-fleet:node:SparkNode");
const B = command("spark2-probe", "vllm-fleet:node:SparkNode");
const HEAD = command("ray-spark1-ray-head", "vllm-fleet:ray:RayCluster");
const WORKER = command("ray-spark2-ray-worker", "vllm-fleet:ray:RayCluster");
const READY = command("ray-ready", "vllm-fleet:ray:RayCluster");
const SERVE = command("vllm-serve", "vllm-fleet:vllm:VllmService");
const twoNodeEvents = operation(
    100,
    stepEvents(STACK, 100, 130),
    stepEvents(node("spark1"), 101, 103),
    stepEvents(node("spark2"), 101, 104),
    stepEvents(RAY, 101, 125),
    stepEvents(PROVIDER, 102, 102),
    stepEvents(A, 102, 103, { parent: node("spark1") }),
    stepEvents(B, 102, 104, { parent: node("spark2") }),
    stepEvents(HEAD, 105, 110, { parent: RAY }),
    stepEvents(WORKER, 105, 112, { parent: RAY }),
    stepEvents(READY, 113, 125, { parent: RAY }),
    stepEvents(SERVE, 126, 129),
    [{ timestamp: 130, summaryEvent: { durationSeconds: 30, resourceChanges: { create: 11 } } }],
);
const twoNodeGraph = graphOf({
    [A]: { parent: node("spark1") },
    [B]: { parent: node("spark2") },
    [HEAD]: { parent: RAY, dependencies: [A, B] },
    [WORKER]: { parent: RAY, dependencies: [A, B] },
    [READY]: { parent: RAY, dependencies: [HEAD, WORKER] },
    // A dependency on a component stands for the resources beneath it.
    [SERVE]: { dependencies: [RAY] },
    [RAY]: {},
});

// --- tests --------------------------------------------------------------------------------------

describe("URNs and nodes", () => {
    it.each([
        [STACK, "vllm-fleet-dev", "pulumi:pulumi:Stack"],
        [HEAD, "ray-spark1-ray-head", COMMAND],
        [RAY, "ray", "vllm-fleet:ray:RayCluster"],
    ])("%s is named %s of type %s", (urn, name, type) => {
        expect(nameOfUrn(urn)).toBe(name);
        expect(typeOfUrn(urn)).toBe(type);
    });

    it.each([
        ["spark1", ["spark1", "spark2"], "spark1"],
        ["spark1-probe", ["spark1", "spark2"], "spark1"],
        ["ray-spark2-ray-worker", ["spark1", "spark2"], "spark2"],
        ["ray-spark10-ray-joined", ["spark1", "spark10"], "spark10"],
        ["ray-spark-a-ray-head", ["spark-a", "spark-b"], "spark-a"],
        ["ray-ready", ["spark1", "spark2"], undefined],
        ["vllm-serve", ["spark1"], undefined],
        ["sparkling-probe", ["spark"], undefined],
    ])("%s belongs to node %s of %j", (name, nodes, expected) => {
        expect(nodeOfResource(name, nodes)).toBe(expected);
    });
});

describe("parsing event logs", () => {
    it.each([
        ["one event per line", '{"timestamp":1}\n{"timestamp":2}\n', 2],
        ["blank lines", '\n{"timestamp":1}\n\n{"timestamp":2}\n\n', 2],
        ["a torn last line of a log still being written", '{"timestamp":1}\n{"timestamp":2}\n{"timest', 2],
        ["nothing", "", 0],
    ])("reads %s", (_what, text, count) => {
        expect(parseEventLog(text)).toHaveLength(count);
    });

    it("names a bad line in the middle", () => {
        expect(() => parseEventLog('{"timestamp":1}\nnot json\n{"timestamp":2}\n')).toThrow(/line 2/);
    });

    it.each([
        ["a stack export file", { version: 3, deployment: { resources: [{ urn: HEAD, parent: RAY, dependencies: [A] }] } }],
        ["a bare deployment", { resources: [{ urn: HEAD, parent: RAY, dependencies: [A] }] }],
    ])("reads the graph of %s", (_what, exported) => {
        expect(resourceGraphFromExport(exported).get(HEAD)).toEqual({ parent: RAY, dependencies: [A] });
    });

    it("rejects what is not a stack export", () => {
        expect(() => resourceGraphFromExport({ version: 3 })).toThrow(/not a stack export/);
    });
});

describe("selecting the operation", () => {
    const preview = operation(10, stepEvents(A, 11, 11, { planning: true }), stepEvents(B, 11, 11, { planning: true }));
    const update = operation(50, stepEvents(A, 51, 53)).map((event) => ({ ...event, sequence: (event.sequence ?? 0) + 100 }));

    it.each([
        ["the update after its preview", [...preview, ...update], 51],
        ["a preview alone", preview, 11],
        ["an update alone", update, 51],
    ])("takes %s", (_what, events, firstStepAt) => {
        const selected = selectOperation(events);
        expect(selected.find((event) => event.resourcePreEvent)?.timestamp).toBe(firstStepAt);
    });
});

describe("spans", () => {
    const timeline = buildTimeline(twoNodeEvents, { graph: twoNodeGraph });
    const span = (urn: string) => timeline.spans.find((candidate) => candidate.urn === urn)!;

    it.each([
        [STACK, "stack", undefined, 0, 30],
        [node("spark1"), "component", "spark1", 1, 3],
        [PROVIDER, "provider", undefined, 2, 2],
        [HEAD, "custom", "spark1", 5, 10],
        [WORKER, "custom", "spark2", 5, 12],
        [READY, "custom", undefined, 13, 25],
    ])("%s: a %s on node %s from +%ds to +%ds", (urn, kind, nodeName, start, end) => {
        expect(span(urn)).toMatchObject({ kind, node: nodeName, startMs: (100 + start) * 1000, endMs: (100 + end) * 1000, failed: false, unfinished: false });
    });

    it("finds the nodes from the SparkNode components, and the engine's summary", () => {
        expect(timeline.nodes).toEqual(["spark1", "spark2"]);
        expect(timeline.resourceChanges).toEqual({ create: 11 });
        expect(timeline.wallMs).toBe(30_000);
    });

    it("joins the steps of a replacement into one span and lists its operations", () => {
        const replaced = buildTimeline(
            operation(
                0,
                stepEvents(HEAD, 1, 2, { op: "delete-replaced" }),
                stepEvents(HEAD, 2, 7, { op: "create-replacement" }),
                stepEvents(HEAD, 7, 7, { op: "replace" }),
            ),
        );
        expect(replaced.spans).toHaveLength(1);
        expect(replaced.spans[0]).toMatchObject({ ops: ["delete-replaced", "create-replacement", "replace"], startMs: 1000, endMs: 7000 });
    });

    it.each([
        ["failed", stepEvents(HEAD, 1, 4, { failed: true }), { failed: true, unfinished: false, endMs: 4000 }],
        ["unfinished (the operation ended first)", stepEvents(HEAD, 1, undefined), { failed: false, unfinished: true, endMs: 9000 }],
    ])("marks a step %s", (_what, steps, expected) => {
        const timeline = buildTimeline(operation(0, steps, [{ timestamp: 9, summaryEvent: {} }]));
        expect(timeline.spans[0]).toMatchObject(expected);
    });

    it("uses finer times when the caller has them", () => {
        const arrivals = new Map<EngineEventLike, number>();
        const events = operation(0, stepEvents(A, 1, 1));
        events.forEach((event, index) => arrivals.set(event, 1000 + index * 250));
        const timeline = buildTimeline(events, { timeOf: (event) => arrivals.get(event)! });
        expect(timeline.spans[0]).toMatchObject({ startMs: 1250, endMs: 1500 });
    });
});

describe("the critical path", () => {
    it.each([
        [
            "dependencies from the stack export (a component dependency expanded)",
            { graph: twoNodeGraph },
            ["default", "spark2-probe", "ray-spark2-ray-worker", "ray-ready", "vllm-serve"],
            "export",
        ],
        ["dependencies inferred from the times", {}, ["default", "spark2-probe", "ray-spark2-ray-worker", "ray-ready", "vllm-serve"], "inferred"],
    ])("follows %s", (_what, options, names, source) => {
        const timeline = buildTimeline(twoNodeEvents, options);
        expect(timeline.criticalPath.map((step) => step.name)).toEqual(names);
        expect(timeline.graphSource).toBe(source);
    });

    it("accounts for the wall time outside the path: start-up, gaps, the end", () => {
        const timeline = buildTimeline(twoNodeEvents, { graph: twoNodeGraph });
        // Steps: provider 102-102, probe 102-104, worker 105-112, gate 113-125, serve 126-129; wall 100-130.
        expect(timeline.criticalPath.map((step) => step.waitMs)).toEqual([2000, 0, 1000, 1000, 1000]);
        expect(timeline.outside).toMatchObject({ beforeFirstMs: 2000, betweenMs: 3000, afterLastMs: 1000 });
        expect(timeline.criticalMs).toBe(24_000);
        expect(timeline.outsideMs).toBe(6000);
        expect(timeline.outsideShare).toBeCloseTo(0.2);
        expect(timeline.outside.intervals).toEqual([
            { startMs: 100_000, endMs: 102_000 },
            { startMs: 104_000, endMs: 105_000 },
            { startMs: 112_000, endMs: 113_000 },
            { startMs: 125_000, endMs: 126_000 },
            { startMs: 129_000, endMs: 130_000 },
        ]);
    });

    it("counts the command's own start-up and exit when given its window", () => {
        const timeline = buildTimeline(twoNodeEvents, { graph: twoNodeGraph, window: { startMs: 97_000, endMs: 131_000 } });
        expect(timeline.wallMs).toBe(34_000);
        expect(timeline.outside.beforeFirstMs).toBe(5000);
        expect(timeline.outside.afterLastMs).toBe(2000);
    });

    it("walks a diamond through the branch that finished last", () => {
        const [P, Q, R, S] = ["p", "q", "r", "s"].map((name) => command(name));
        const graph = graphOf({ [P]: {}, [Q]: { dependencies: [P] }, [R]: { dependencies: [P] }, [S]: { dependencies: [Q, R] } });
        const timeline = buildTimeline(operation(0, stepEvents(P, 0, 1), stepEvents(Q, 1, 9), stepEvents(R, 1, 3), stepEvents(S, 9, 10)), { graph });
        expect(timeline.criticalPath.map((step) => step.name)).toEqual(["p", "q", "s"]);
        expect(timeline.outsideMs).toBe(0);
    });

    it.each([
        ["the two-node deployment", twoNodeEvents, twoNodeGraph, 24_000, ["default", "spark2-probe", "ray-spark2-ray-worker", "ray-ready", "vllm-serve"]],
        [
            "a diamond run one step at a time",
            operation(0, stepEvents(command("p"), 0, 1), stepEvents(command("q"), 1, 9), stepEvents(command("r"), 9, 11), stepEvents(command("s"), 11, 12)),
            graphOf({ [command("q")]: { dependencies: [command("p")] }, [command("r")]: { dependencies: [command("p")] }, [command("s")]: { dependencies: [command("q"), command("r")] } }),
            10_000,
            ["p", "q", "s"],
        ],
    ])("weighs the longest dependency chain of %s by its step durations", (_what, events, graph, ms, names) => {
        expect(longestChain(buildTimeline(events, { graph }), graph)).toEqual({ ms, names });
    });

    it("runs a destroy backwards: a resource is deleted after what depends on it", () => {
        const graph = graphOf({ [HEAD]: {}, [READY]: { dependencies: [HEAD] }, [SERVE]: { dependencies: [READY] } });
        const timeline = buildTimeline(
            operation(0, stepEvents(SERVE, 1, 3, { op: "delete" }), stepEvents(READY, 3, 4, { op: "delete" }), stepEvents(HEAD, 4, 8, { op: "delete" })),
            { graph },
        );
        expect(timeline.criticalPath.map((step) => step.name)).toEqual(["vllm-serve", "ray-ready", "ray-spark1-ray-head"]);
    });

    it("is empty when nothing did work", () => {
        const timeline = buildTimeline(operation(0, stepEvents(STACK, 0, 2)));
        expect(timeline.criticalPath).toEqual([]);
        expect(timeline.outsideShare).toBe(1);
    });

    it("refuses an empty event stream", () => {
        expect(() => buildTimeline([])).toThrow(/no engine events/);
    });

    it("summarizes the path as text", () => {
        const text = formatTimelineSummary(buildTimeline(twoNodeEvents, { graph: twoNodeGraph }));
        expect(text).toContain("wall 30.0s, critical path 24.0s in 5 steps, outside it 6.0s (20%");
        expect(text).toMatch(/ray-spark2-ray-worker\s+5\.0s\s+7\.0s\s+1\.0s/);
        expect(text).toContain("start-up 2.0s, between steps 3.0s, after the last step 1.0s");
    });
});

describe("the SVG chart", () => {
    const timeline = buildTimeline(twoNodeEvents, { graph: twoNodeGraph });
    const svg = renderTimelineSvg(timeline, { title: "pulumi up <2 nodes> & more" });

    it("groups the rows: stack, each node (component first), the cluster, the time outside", () => {
        const labels = chartRows(timeline).map((row) => ("heading" in row ? `# ${row.heading}` : "span" in row ? row.span.name : "outside"));
        expect(labels).toEqual([
            "# stack", "vllm-fleet-dev", "default",
            "# node spark1", "spark1", "spark1-probe", "ray-spark1-ray-head",
            "# node spark2", "spark2", "spark2-probe", "ray-spark2-ray-worker",
            "# cluster", "ray", "ray-ready", "vllm-serve",
            "outside",
        ]);
    });

    it.each([
        ["is an SVG document", /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]*>[\s\S]*<\/svg>\n$/],
        ["escapes the title", /pulumi up &lt;2 nodes&gt; &amp; more/],
        ["says the wall time, the critical path and the share outside it", /wall 30\.0s · critical path 24\.0s \(5 steps\) · outside it 6\.0s = 20%/],
        ["highlights a critical step", /<rect [^>]*fill="#e8590c"><title>ray-spark2-ray-worker /],
        ["draws other steps plainly", /<rect [^>]*fill="#4c6ef5"><title>ray-spark1-ray-head /],
        ["draws the time outside the critical path", /<rect [^>]*fill="#fcc419"><title>outside the critical path: \+0\.0s, 2\.0s<\/title>/],
        ["has a time axis", />30s<\/text>/],
    ])("%s", (_what, pattern) => {
        expect(svg).toMatch(pattern);
    });

    it("scales bars to the wall time", () => {
        // Plot from x=260 over 1200-260-70 = 870 px for 30 s: the worker (+5 s, 7 s) at 405, 203 px wide.
        expect(svg).toMatch(/<rect x="405" y="\d+" width="203" height="12" fill="#e8590c"><title>ray-spark2-ray-worker/);
    });

    it("keeps markup out of names", () => {
        const evil = command("x<script>alert(1)</script>");
        const text = renderTimelineSvg(buildTimeline(operation(0, stepEvents(evil, 0, 1))));
        expect(text).not.toContain("<script>");
        expect(text).toContain("x&lt;script&gt;alert(1)&lt;/script&gt;");
    });

    it.each([
        [`a&b<c>"d'`, "a&amp;b&lt;c&gt;&quot;d&apos;"],
        ["plain", "plain"],
    ])("escapes %s", (text, escaped) => {
        expect(escapeXml(text)).toBe(escaped);
    });

    it.each([
        [2, 0.2],
        [30, 5],
        [95, 10],
        [600, 60],
        [7200, 600],
        [20000, 1800],
    ])("puts ticks on a %d s axis every %d s", (seconds, step) => {
        expect(tickStepSeconds(seconds)).toBe(step);
    });
});

describe("a real event log (4 simulated Sparks, cold pulumi up, trimmed)", () => {
    const fixture = (name: string) => fs.readFileSync(path.join(__dirname, "..", "fixtures", name), "utf8");
    const events = parseEventLog(fixture("pulumi-up-events-4nodes.jsonl"));
    const graph = resourceGraphFromExport(JSON.parse(fixture("pulumi-stack-export-4nodes.json")));
    const timeline = buildTimeline(events, { graph });

    it("has a span for every resource, all created, none failed", () => {
        expect(timeline.spans.length).toBe(graph.size);
        expect(timeline.spans.every((span) => span.ops.join() === "create" && !span.failed && !span.unfinished)).toBe(true);
        expect(timeline.nodes).toEqual(["spark1", "spark2", "spark3", "spark4"]);
    });

    it("puts every node's own resources in its group", () => {
        for (const nodeName of timeline.nodes) {
            const names = timeline.spans.filter((span) => span.node === nodeName).map((span) => span.name).sort();
            const role = nodeName === "spark1" ? "head" : "worker";
            expect(names).toEqual([nodeName, `${nodeName}-probe`, `ray-${nodeName}-ray-${role}`, `ray-${nodeName}-ray-joined`].sort());
        }
    });

    it("finds the chain provider, a probe, the head, its join, a worker, its join, the gate, the server", () => {
        const names = timeline.criticalPath.map((step) => step.name);
        expect(names[0]).toBe("default");
        expect(names[1]).toMatch(/^spark\d-probe$/);
        expect(names.slice(2, 4)).toEqual(["ray-spark1-ray-head", "ray-spark1-ray-joined"]);
        expect(names[4]).toMatch(/^ray-spark[234]-ray-worker$/);
        expect(names[5]).toBe(names[4].replace("worker", "joined"));
        expect(names.slice(6)).toEqual(["ray-ready", "vllm-serve"]);
        expect(timeline.outsideShare).toBeLessThan(0.25);
    });

    it("draws it", () => {
        const svg = renderTimelineSvg(timeline, { title: "fixture" });
        for (const span of timeline.spans) {
            expect(svg).toContain(`>${span.name}<tspan`);
        }
    });
});
