/** A Pulumi operation measured: the wall time of the `pulumi` command, the CPU it cost, its engine events. */
import * as os from "os";
import { EngineEvent } from "@pulumi/pulumi/automation";
import { EngineEventLike } from "../../tools/timeline/events";
import { cpuTicks, processTreeCpuSeconds, quietMachine, simCpuSnapshot } from "./cpu";
import { CpuUse } from "./targets";

/** The events of one engine operation, each with the time it arrived (finer than the events' whole seconds). */
export class EventRecorder {
    readonly events: EngineEvent[] = [];
    private readonly arrivals = new Map<EngineEventLike, number>();
    readonly onEvent = (event: EngineEvent) => {
        this.events.push(event);
        this.arrivals.set(event, Date.now());
    };
    readonly timeOf = (event: EngineEventLike) => this.arrivals.get(event) ?? event.timestamp * 1000;
}

/** A timed Pulumi operation. */
export interface Timed<T> {
    readonly result: T;
    /**
     * Wall seconds of the `pulumi` command itself: from the call to its last output line (it prints
     * its summary, then exits). What a user of `pulumi up` waits for.
     */
    readonly seconds: number;
    /** Wall seconds of the whole Automation API call, which then runs `pulumi stack output` (twice) and `pulumi stack history`. */
    readonly apiSeconds: number;
    readonly startMs: number;
    /** When the `pulumi` command ended (its last output). */
    readonly endMs: number;
    /** Share of the machine's CPU time that was busy during the call (every process, other users' too). */
    readonly cpuBusyShare: number;
    /** CPU seconds the call cost, split by where they ran. */
    readonly cpu: CpuUse;
}

/**
 * Runs a Pulumi operation of the Automation API on a quiet machine, timing the `pulumi` command and
 * the whole call, and counting the CPU it cost (the machine's, and inside the nodes whose cgroups
 * are given), and this process tree's (the operation's own, with the Automation API's follow-up
 * commands: {@link followUpCpuSeconds} measures those apart).
 */
export async function timedPulumi<T>(action: (onOutput: (text: string) => void) => Promise<T>, nodeCgroups: readonly string[] = []): Promise<Timed<T>> {
    await quietMachine();
    const startMs = Date.now();
    const cpuBefore = cpuTicks();
    const simBefore = simCpuSnapshot(nodeCgroups);
    const treeBefore = processTreeCpuSeconds();
    // Counted up to the command's last output, like its wall time.
    let lastOutputMs = startMs;
    let cpuAfter = cpuBefore;
    let simAfter = simBefore;
    const result = await action(() => {
        lastOutputMs = Date.now();
        cpuAfter = cpuTicks();
        simAfter = simCpuSnapshot(nodeCgroups);
    });
    const apiEndMs = Date.now();
    // The `pulumi` command has been reaped: its CPU (and its providers') is in this process's children's.
    const treeSeconds = processTreeCpuSeconds() - treeBefore;
    const cpuBusyShare = (cpuAfter.busy - cpuBefore.busy) / Math.max(1, cpuAfter.total - cpuBefore.total);
    const cores = os.cpus().length;
    let workloadSeconds: number | undefined;
    if (simBefore && simAfter) {
        workloadSeconds = 0;
        for (const [dir, used] of simAfter.workloads) {
            workloadSeconds += used - (simBefore.workloads.get(dir) ?? 0);
        }
    }
    return {
        result,
        seconds: (lastOutputMs - startMs) / 1000,
        apiSeconds: (apiEndMs - startMs) / 1000,
        startMs,
        endMs: lastOutputMs,
        cpuBusyShare,
        cpu: {
            machineSeconds: (cpuBusyShare * cores * (lastOutputMs - startMs)) / 1000,
            cores,
            nodesSeconds: simBefore && simAfter ? simAfter.nodes - simBefore.nodes : undefined,
            workloadSeconds,
            processTreeSeconds: treeSeconds,
        },
    };
}

/**
 * CPU seconds of the commands the Automation API runs after an up or destroy (`pulumi stack output`
 * twice, `pulumi stack history`), measured on `stack` by running them alone: the smaller of two tries.
 */
export async function followUpCpuSeconds(stack: { outputs(): Promise<unknown>; history(pageSize?: number): Promise<unknown> }): Promise<number> {
    const tries: number[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
        const before = processTreeCpuSeconds();
        await stack.outputs();
        await stack.history(1);
        tries.push(processTreeCpuSeconds() - before);
    }
    return Math.min(...tries);
}
