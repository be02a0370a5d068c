/**
 * The server's side of a load test: its figures read every second (./serverSources.ts) from the
 * start of the first level to the end of the last, beside the load and never in its way (one read
 * at a time, each with its deadline, a failed one counted, not thrown), and what each level's span
 * of them peaked at.
 */
import { performance } from "perf_hooks";
import { ServerFigures, ServerSource } from "./serverSources";

/** One reading, `t` seconds after the first level started (when it was asked for). */
export interface ServerSample extends ServerFigures {
    readonly t: number;
}

/** A level's span on the same clock, and the highest figures read within it (null: none read). */
export interface ServerLevel {
    readonly concurrency: number;
    readonly fromS: number;
    readonly toS: number;
    readonly samples: number;
    readonly peakRunning: number | null;
    readonly peakWaiting: number | null;
    readonly peakKvPercent: number | null;
}

/** What `loadtest.json` holds under `server`. */
export interface ServerSide {
    /** `prometheus <url>`, `metrics <url>` (several joined by " + "), or `none`. */
    readonly source: string;
    /** With `none`: why nothing was sampled; else why the places before the source were passed over. */
    readonly reason?: string;
    readonly intervalMs: number;
    readonly samples: readonly ServerSample[];
    /** Reads without an answer (no answer within the deadline, an HTTP error, an unreadable page). */
    readonly failed: number;
    /** The failed reads by reason. */
    readonly errors: Readonly<Record<string, number>>;
    readonly levels: readonly ServerLevel[];
}

/** A level's span, in milliseconds since the first level started. */
export interface LevelSpan {
    readonly concurrency: number;
    readonly fromMs: number;
    readonly toMs: number;
}

/** A peak as the report writes it, to `digits` decimals without trailing zeros ("-": none read). */
export function peakText(value: number | null, digits = 0): string {
    return value === null ? "-" : Number(value.toFixed(digits)).toString();
}

/** The server side when nothing was sampled. */
export function notSampled(reason: string, intervalMs = 1000): ServerSide {
    return { source: "none", reason, intervalMs, samples: [], failed: 0, errors: {}, levels: [] };
}

/**
 * Reads `source` every `intervalMs` from start() to stop(), on a grid from the start: a read starts
 * at a grid point (or an interval after the one before, when that one started late), and when one
 * outlasts the interval the next waits for the grid point after it ends, so there is never more
 * than one read in flight, nor two within an interval.
 */
export class ServerSampler {
    private readonly samples: ServerSample[] = [];
    private readonly errors: Record<string, number> = {};
    private failed = 0;
    private startedAt = 0;
    private stopped = false;
    private wake?: () => void;
    private timer?: NodeJS.Timeout;
    private loop?: Promise<void>;

    constructor(
        private readonly source: ServerSource,
        private readonly intervalMs = 1000,
    ) {}

    /**
     * Starts reading; the samples' clock starts at `at` (performance.now(), default now). `first`: the
     * figures just read (choosing the source), the sample at 0 s, so the next read waits an interval.
     */
    start(at = performance.now(), first?: ServerFigures): void {
        if (this.loop) {
            throw new Error("ServerSampler: started twice");
        }
        this.startedAt = at;
        if (first) {
            this.samples.push({ t: 0, ...first });
        }
        this.loop = this.run(first ? this.intervalMs : 0);
    }

    /** Milliseconds since start(). */
    elapsedMs(): number {
        return performance.now() - this.startedAt;
    }

    /** Stops reading (a read in flight is waited for, at most its deadline) and gives what was read. */
    async stop(): Promise<{ samples: ServerSample[]; failed: number; errors: Record<string, number> }> {
        this.stopped = true;
        if (this.timer) {
            clearTimeout(this.timer);
        }
        this.wake?.();
        await this.loop;
        return { samples: [...this.samples], failed: this.failed, errors: { ...this.errors } };
    }

    private async run(firstDue: number): Promise<void> {
        let due = firstDue;
        while (!this.stopped) {
            const wait = due - this.elapsedMs();
            if (wait > 0) {
                await new Promise<void>((resolve) => {
                    this.wake = resolve;
                    this.timer = setTimeout(resolve, wait);
                });
                // Looked at again: a timer may fire a fraction of a millisecond early.
                continue;
            }
            const startedMs = this.elapsedMs();
            try {
                this.samples.push({ t: startedMs / 1000, ...(await this.source.read()) });
            } catch (error) {
                const reason = error instanceof Error ? error.message : String(error);
                this.failed++;
                this.errors[reason] = (this.errors[reason] ?? 0) + 1;
            }
            // The next grid point after this read ended, and never sooner than an interval after it
            // started (a read the event loop started late does not bring the next one closer).
            due = Math.max((Math.floor(this.elapsedMs() / this.intervalMs) + 1) * this.intervalMs, startedMs + this.intervalMs);
        }
    }
}

/** The highest figures of the samples within each level's span (the last level's end included). */
export function serverLevels(samples: readonly ServerSample[], spans: readonly LevelSpan[]): ServerLevel[] {
    return spans.map((span, index) => {
        const last = index === spans.length - 1;
        const within = samples.filter((sample) => sample.t * 1000 >= span.fromMs && (sample.t * 1000 < span.toMs || (last && sample.t * 1000 <= span.toMs)));
        const peak = (figure: (sample: ServerSample) => number) => (within.length === 0 ? null : Math.max(...within.map(figure)));
        return {
            concurrency: span.concurrency,
            fromS: span.fromMs / 1000,
            toS: span.toMs / 1000,
            samples: within.length,
            peakRunning: peak((sample) => sample.running),
            peakWaiting: peak((sample) => sample.waiting),
            peakKvPercent: peak((sample) => sample.kvPercent),
        };
    });
}

/** The server side of a run that sampled `source`. */
export function sampledSide(
    source: ServerSource,
    reason: string | undefined,
    intervalMs: number,
    read: { samples: ServerSample[]; failed: number; errors: Record<string, number> },
    spans: readonly LevelSpan[],
): ServerSide {
    return {
        source: source.label,
        ...(reason ? { reason } : {}),
        intervalMs,
        samples: read.samples,
        failed: read.failed,
        errors: read.errors,
        levels: serverLevels(read.samples, spans),
    };
}
