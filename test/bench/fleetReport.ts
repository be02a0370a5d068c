/**
 * The fleet bench's figures and report (pure): each fleet's cold up against its floor, its no-op up
 * against the cold up and against its own CPU floor, how both grow with the node count, issue 23's
 * fleet, the checks, and the gateway's cost.
 *
 * The floor of a fleet is the single-model bench's floor (./targets.ts), taken over the whole fleet:
 * the larger of (1) the cold up's CPU-seconds over the machine's cores and (2) the dependency graph's
 * longest chain of step times measured one step at a time (`--parallel 1`), plus that run's start-up
 * and end. Over several services, (2) runs over the union of their graphs: services share no
 * resource apart from the per-node steps and the stack's own, so their chains run side by side and
 * the longest one (the slowest service, behind the steps of its nodes) sets it; (1) adds up every
 * service's work, so on a machine whose cores the simulated nodes share it grows with the services.
 * The CPU counted is the operation's own (this process tree: the bench, the inline program, the
 * `pulumi` command and its providers, less the Automation API's follow-up commands; plus what ran
 * inside the fleet's simulated nodes), not the machine's: the machine is shared with other work,
 * which would raise a floor taken from its busy time. The machine's busy CPU is reported beside it.
 */
import { GatewayLevelCost, renderGatewayCost } from "./gatewayCost";
import { Check, TargetResult, floorSeconds, median } from "./targets";

/** A timeline in the report: its heading, its chart's file, a note and the summary of tools/timeline. */
export interface TimelineSummaryInput {
    readonly heading: string;
    readonly svg: string;
    readonly note?: string;
    readonly summary: string;
}

/** One up as the figures need it. */
export interface UpFigures {
    readonly run: number;
    readonly seconds: number;
    /** The machine's busy CPU-seconds meanwhile (every process). */
    readonly machineCpuSeconds: number;
    readonly cores: number;
    /** This process tree's CPU-seconds over the whole API call (with the follow-up commands). */
    readonly processTreeSeconds?: number;
    /** Inside the fleet's simulated nodes. */
    readonly nodesSeconds?: number;
    /** From the operation's start to its first step: the CLI, the engine, the program, the read of the nodes. */
    readonly beforeFirstSeconds: number;
    /** Resources the engine stepped through (providers excluded). */
    readonly resources: number;
}

/** What one fleet measured. */
export interface FleetInput {
    readonly id: string;
    readonly title: string;
    readonly kind: "pairs" | "issue23";
    readonly nodes: number;
    readonly services: number;
    readonly coldUps: readonly UpFigures[];
    readonly noopUps: readonly UpFigures[];
    readonly previews: readonly number[];
    readonly destroys: readonly number[];
    /** The graph's bound from the median `--parallel 1` run, with that run's wall time. */
    readonly graphBound?: { readonly seconds: number; readonly parallel1Seconds: number; readonly steps: readonly string[] };
    /** CPU-seconds of the Automation API's follow-up commands after an up, measured apart. */
    readonly followUpCpuSeconds?: number;
    readonly checks: readonly Check[];
    readonly gateway?: { readonly service: string; readonly costs: readonly GatewayLevelCost[] };
    /** Why its runs stopped, when one failed. */
    readonly failure?: string;
}

/** One fleet's figures. */
export interface FleetFigures {
    readonly id: string;
    readonly title: string;
    readonly kind: "pairs" | "issue23";
    readonly nodes: number;
    readonly services: number;
    readonly resources: number;
    readonly coldSeconds: number;
    /** The median cold up's own CPU-seconds, or the machine's when its own could not be counted. */
    readonly coldCpu: { readonly seconds: number; readonly source: "own" | "machine"; readonly machineSeconds: number; readonly cores: number };
    readonly floor: { readonly cpuSeconds: number; readonly cores: number; readonly graphSeconds?: number; readonly seconds: number };
    readonly coldOverFloor?: number;
    readonly noopSeconds?: number;
    readonly noopOverCold?: number;
    /** The median no-op up's own CPU-seconds over the cores: no no-op up of that work ends sooner. */
    readonly noopCpuFloorSeconds?: number;
    readonly noopBeforeFirstSeconds?: number;
    readonly previewSeconds?: number;
    readonly destroySeconds?: number;
}

/** The up whose wall time is the median (an even count: the lower middle). */
function medianOf(ups: readonly UpFigures[]): UpFigures | undefined {
    const sorted = [...ups].sort((a, b) => a.seconds - b.seconds);
    return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** An up's own CPU-seconds: its process tree less the follow-up commands, plus the nodes'; undefined when not all were counted. */
export function ownCpuSeconds(up: UpFigures, followUpCpuSeconds: number | undefined): number | undefined {
    if (up.processTreeSeconds === undefined || up.nodesSeconds === undefined || followUpCpuSeconds === undefined) {
        return undefined;
    }
    return Math.max(0, up.processTreeSeconds - followUpCpuSeconds) + up.nodesSeconds;
}

const optionalMedian = (values: readonly number[]) => (values.length === 0 ? undefined : median(values));

/** A fleet's figures from what it measured. Throws when it has no cold up. */
export function fleetFigures(input: FleetInput): FleetFigures {
    const cold = medianOf(input.coldUps);
    if (!cold) {
        throw new Error(`${input.id}: no cold up measured`);
    }
    const own = ownCpuSeconds(cold, input.followUpCpuSeconds);
    const coldCpu = { seconds: own ?? cold.machineCpuSeconds, source: own === undefined ? ("machine" as const) : ("own" as const), machineSeconds: cold.machineCpuSeconds, cores: cold.cores };
    const floorParts = { cpuSeconds: coldCpu.seconds, cores: cold.cores, graphSeconds: input.graphBound?.seconds };
    const floor = { ...floorParts, seconds: floorSeconds(floorParts) };
    const coldSeconds = median(input.coldUps.map((up) => up.seconds));
    const noop = medianOf(input.noopUps);
    const noopSeconds = optionalMedian(input.noopUps.map((up) => up.seconds));
    const noopOwn = noop && ownCpuSeconds(noop, input.followUpCpuSeconds);
    return {
        id: input.id,
        title: input.title,
        kind: input.kind,
        nodes: input.nodes,
        services: input.services,
        resources: cold.resources,
        coldSeconds,
        coldCpu,
        floor,
        // Without the graph's bound (no --parallel 1 run) the floor is only half known: no verdict.
        coldOverFloor: input.graphBound === undefined ? undefined : coldSeconds / floor.seconds,
        noopSeconds,
        noopOverCold: noopSeconds === undefined ? undefined : noopSeconds / coldSeconds,
        noopCpuFloorSeconds: noopOwn === undefined || noop === undefined ? undefined : noopOwn / noop.cores,
        noopBeforeFirstSeconds: noop?.beforeFirstSeconds,
        previewSeconds: optionalMedian(input.previews),
        destroySeconds: optionalMedian(input.destroys),
    };
}

/** The checks named `name` of one fleet: all passed, and the failures. */
function checksOf(checks: readonly Check[], name: string): { passed: boolean; detail: string } {
    const relevant = checks.filter((check) => check.name === name);
    const failed = relevant.filter((check) => !check.passed);
    if (relevant.length === 0) {
        return { passed: false, detail: `${name}: not checked` };
    }
    return failed.length === 0
        ? { passed: true, detail: `${name}: yes in ${relevant.length} of ${relevant.length} runs` }
        : { passed: false, detail: `${name}: NO in ${failed.length} of ${relevant.length} runs (${failed.map((check) => `run ${check.run}: ${check.detail}`).join("; ")})` };
}

const COLD_LIMIT = 1.15;
const NOOP_LIMIT = 0.15;

/** The targets of each fleet: cold up ≤ 1.15 × its floor; no-op up ≤ 0.15 of the cold up, each node read once; the gateway's cost. */
export function fleetTargets(inputs: readonly FleetInput[]): TargetResult[] {
    const results: TargetResult[] = [];
    for (const input of inputs) {
        const figures = fleetFigures(input);
        const serving = checksOf(input.checks, "cold up: every service answers from every rank of its own nodes");
        results.push({
            target: `cold up / its floor, ${input.title}`,
            value: figures.coldOverFloor,
            limit: COLD_LIMIT,
            passed: figures.coldOverFloor !== undefined && figures.coldOverFloor <= COLD_LIMIT && serving.passed,
            detail:
                `${figures.coldSeconds.toFixed(1)} s / ${figures.floor.seconds.toFixed(1)} s (CPU ${figures.floor.cpuSeconds.toFixed(1)} CPU-s ${figures.coldCpu.source === "own" ? "of its own" : "of the machine"} ÷ ${figures.floor.cores} = ` +
                `${(figures.floor.cpuSeconds / figures.floor.cores).toFixed(1)} s; graph ${figures.floor.graphSeconds === undefined ? "not measured (no --parallel 1 run)" : `${figures.floor.graphSeconds.toFixed(1)} s`}); ${serving.detail}`,
        });
    }
    for (const input of inputs) {
        const figures = fleetFigures(input);
        const hosts = checksOf(input.checks, "no-op up reads each node once and changes nothing");
        results.push({
            target: `no-op up / cold up, ${input.title}; each node only read, once`,
            value: figures.noopOverCold,
            limit: NOOP_LIMIT,
            passed: figures.noopOverCold !== undefined && figures.noopOverCold <= NOOP_LIMIT && hosts.passed,
            detail:
                `${figures.noopSeconds?.toFixed(1)} s / ${figures.coldSeconds.toFixed(1)} s; ${hosts.detail}` +
                (figures.noopBeforeFirstSeconds === undefined ? "" : `; before its first step it spent ${figures.noopBeforeFirstSeconds.toFixed(1)} s`),
        });
    }
    for (const input of inputs) {
        for (const cost of input.gateway?.costs ?? []) {
            results.push({
                target: `TTFT p50 added by the gateway, concurrency ${cost.concurrency}, ${input.title} (ms)`,
                value: cost.addedMs ?? undefined,
                limit: 5,
                passed: cost.passed,
                detail: `${cost.gatewayTtftP50Ms?.toFixed(1)} ms through the gateway, ${cost.directTtftP50Ms?.toFixed(1)} ms directly; failed ${cost.errors.direct} / ${cost.errors.gateway}`,
            });
        }
    }
    return results;
}

const s = (value: number | undefined, digits = 1) => (value === undefined ? "–" : `${value.toFixed(digits)} s`);
const r = (value: number | undefined) => (value === undefined ? "–" : value.toFixed(2));
const x = (value: number | undefined) => (value === undefined ? "–" : `${value.toFixed(2)}×`);

/** The growth table: the pair fleets by node count, each against its floor and against the smallest fleet. */
export function growthTable(figures: readonly FleetFigures[]): string[] {
    const pairs = figures.filter((fleet) => fleet.kind === "pairs").sort((a, b) => a.nodes - b.nodes);
    if (pairs.length === 0) {
        return [];
    }
    const base = pairs[0];
    const over = (value: number | undefined, of: number | undefined) => (value === undefined || of === undefined || of === 0 ? undefined : value / of);
    return [
        `| nodes | services | resources | cold up | its floor (CPU ÷ cores / graph) | cold / floor | no-op up | no-op / cold | no-op's CPU floor | cold, floor, no-op × ${base.nodes} nodes' |`,
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
        ...pairs.map(
            (fleet) =>
                `| ${fleet.nodes} | ${fleet.services} | ${fleet.resources} | ${s(fleet.coldSeconds)} | ${s(fleet.floor.seconds)} (${s(fleet.floor.cpuSeconds / fleet.floor.cores)} / ${s(fleet.floor.graphSeconds)}) | ` +
                `${r(fleet.coldOverFloor)} | ${s(fleet.noopSeconds)} | ${r(fleet.noopOverCold)} | ${s(fleet.noopCpuFloorSeconds)} | ` +
                `${x(over(fleet.coldSeconds, base.coldSeconds))}, ${x(over(fleet.floor.seconds, base.floor.seconds))}, ${x(over(fleet.noopSeconds, base.noopSeconds))} |`,
        ),
    ];
}

/** report.md of the fleet bench. */
export function renderFleetMarkdown(report: {
    readonly environment: string;
    readonly runs: number;
    readonly inputs: readonly FleetInput[];
    readonly timelines: readonly TimelineSummaryInput[];
}): string {
    const figures = report.inputs.flatMap((input) => (input.coldUps.length > 0 ? [fleetFigures(input)] : []));
    const measured = report.inputs.filter((input) => input.coldUps.length > 0);
    const targets = fleetTargets(measured);
    const checks = report.inputs.flatMap((input) => input.checks.map((check) => ({ ...check, fleet: input.id })));
    const failed = checks.filter((check) => !check.passed);
    const issue23 = figures.filter((fleet) => fleet.kind === "issue23");
    const lines = [
        "# vllm-fleet benchmark: fleets of services",
        "",
        report.environment,
        "",
        `Wall time of each operation: median of ${report.runs} run${report.runs === 1 ? "" : "s"}, simulated Sparks, ssh container driver, builtin SSH runner. ` +
            "A fleet's floor: the larger of its own CPU-seconds over the cores and the dependency graph's longest chain of solo step times (`--parallel 1`) with the same start-up and end; " +
            "over several services the graph's chains run side by side (the slowest service sets it) and the CPU adds up.",
        "",
        "## How a fleet's cost grows with its nodes (one TP-2 service per pair of nodes)",
        "",
        ...growthTable(figures),
        "",
        ...(issue23.length > 0
            ? [
                  "## Issue 23's fleet: A ray TP 2 on spark1-2, B mp TP 2 on spark3-4, C mp TP 1 on spark1",
                  "",
                  ...issue23.map(
                      (fleet) =>
                          `Cold up ${s(fleet.coldSeconds)} against a floor of ${s(fleet.floor.seconds)} (CPU ${s(fleet.floor.cpuSeconds / fleet.floor.cores)}, graph ${s(fleet.floor.graphSeconds)}): ` +
                          `${r(fleet.coldOverFloor)}; ${fleet.resources} resources. No-op up ${s(fleet.noopSeconds)} (${r(fleet.noopOverCold)} of the cold up).`,
                  ),
                  "",
              ]
            : []),
        "## Targets",
        "",
        "| target | value | limit | result | detail |",
        "|---|---:|---:|---|---|",
        ...targets.map(
            (result) =>
                `| ${result.target} | ${result.value === undefined ? "–" : result.value.toFixed(2)} | ${result.limit} | ${result.passed ? "pass" : "**FAIL**"} | ${result.detail.replace(/\|/g, "\\|")} |`,
        ),
        "",
        "## The CPU of each cold up: its own, and the machine's",
        "",
        "The machine's busy CPU includes whatever else ran on it meanwhile; the floor counts the fleet's own.",
        "",
        "| fleet | cold up | own CPU-s | machine's busy CPU-s | preview, no change | destroy |",
        "|---|---:|---:|---:|---:|---:|",
        ...figures.map(
            (fleet) =>
                `| ${fleet.id} | ${s(fleet.coldSeconds)} | ${fleet.coldCpu.source === "own" ? fleet.coldCpu.seconds.toFixed(1) : "not counted"} | ${fleet.coldCpu.machineSeconds.toFixed(1)} | ${s(fleet.previewSeconds)} | ${s(fleet.destroySeconds)} |`,
        ),
        "",
        "## Where the time goes (timelines of the median runs)",
        "",
        ...report.timelines.flatMap((timeline) => [`### ${timeline.heading}: [${timeline.svg}](${timeline.svg})`, "", ...(timeline.note ? [timeline.note, ""] : []), "```", timeline.summary, "```", ""]),
        "## Checks on the hosts and the engine's summaries",
        "",
        ...report.inputs.filter((input) => input.failure !== undefined).map((input) => `- FLEET FAILED (${input.id}): ${input.failure}`),
        `${checks.length - failed.length} of ${checks.length} passed.`,
        ...failed.map((check) => `- FAILED (${check.fleet}, run ${check.run}) ${check.name}: ${check.detail}`),
        "",
    ];
    const gateways = measured.filter((input) => input.gateway !== undefined);
    if (gateways.length > 0) {
        lines.push("## The gateway's cost", "", ...gateways.flatMap((input) => [...renderGatewayCost(input.gateway!.costs, input.gateway!.service), ""]));
    }
    return lines.join("\n");
}
