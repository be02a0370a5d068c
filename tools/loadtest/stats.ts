/** The load test's statistics: percentiles of the requests' times and each level's summary. */
import { RequestRecord } from "./client";

/** Linear-interpolation percentiles (as numpy's default) of the successful requests; null when none. */
export interface Percentiles {
    readonly p50: number | null;
    readonly p95: number | null;
    readonly mean: number | null;
}

/** One level: its requests and what they add up to. */
export interface LevelSummary {
    readonly concurrency: number;
    readonly requests: number;
    readonly ok: number;
    readonly errors: number;
    /** Failures by kind and status, e.g. `{"HTTP 500": 2, "timeout": 1}`. */
    readonly errorsByKind: Readonly<Record<string, number>>;
    /** From the first request sent to the last one ended. */
    readonly wallMs: number;
    /** The most requests this client had in flight at once. */
    readonly peakInFlight: number;
    readonly ttftMs: Percentiles;
    readonly latencyMs: Percentiles;
    /** Each request's decode rate (tokens per second after its first token). */
    readonly tokensPerSecondPerRequest: Percentiles;
    /** Output tokens of the successful requests. */
    readonly outputTokens: number;
    /** outputTokens / wall time: the level's throughput. */
    readonly outputTokensPerSecond: number;
    /** Successful requests / wall time. */
    readonly requestsPerSecond: number;
}

/**
 * The p-th percentile (0..100) of `values` by linear interpolation between the closest ranks
 * (numpy's default, as vLLM's own benchmark computes them); null for no values.
 */
export function percentile(values: readonly number[], p: number): number | null {
    if (!(p >= 0 && p <= 100)) {
        throw new Error(`percentile: p must lie in 0..100, got ${p}`);
    }
    if (values.length === 0) {
        return null;
    }
    const sorted = [...values].sort((a, b) => a - b);
    const rank = (p / 100) * (sorted.length - 1);
    const lower = Math.floor(rank);
    const upper = Math.ceil(rank);
    return sorted[lower] + (sorted[upper] - sorted[lower]) * (rank - lower);
}

function percentiles(values: readonly number[]): Percentiles {
    return {
        p50: percentile(values, 50),
        p95: percentile(values, 95),
        mean: values.length === 0 ? null : values.reduce((sum, value) => sum + value, 0) / values.length,
    };
}

/** A level's summary from its requests and its wall time. */
export function summarizeLevel(concurrency: number, records: readonly RequestRecord[], wallMs: number, peakInFlight: number): LevelSummary {
    const ok = records.filter((record) => !record.error);
    const errorsByKind: Record<string, number> = {};
    for (const record of records) {
        if (record.error) {
            const key = record.error.kind === "http" ? `HTTP ${record.error.status}` : record.error.kind;
            errorsByKind[key] = (errorsByKind[key] ?? 0) + 1;
        }
    }
    const outputTokens = ok.reduce((sum, record) => sum + record.outputTokens, 0);
    const seconds = wallMs / 1000;
    return {
        concurrency,
        requests: records.length,
        ok: ok.length,
        errors: records.length - ok.length,
        errorsByKind,
        wallMs,
        peakInFlight,
        ttftMs: percentiles(ok.flatMap((record) => (record.ttftMs === null ? [] : [record.ttftMs]))),
        latencyMs: percentiles(ok.map((record) => record.totalMs)),
        tokensPerSecondPerRequest: percentiles(ok.flatMap((record) => (record.tokensPerSecond === null ? [] : [record.tokensPerSecond]))),
        outputTokens,
        outputTokensPerSecond: seconds > 0 ? outputTokens / seconds : 0,
        requestsPerSecond: seconds > 0 ? ok.length / seconds : 0,
    };
}
