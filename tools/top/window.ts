/**
 * The figures of one service from its own /metrics, read every few seconds: the samples of the
 * last minute, and what Prometheus's `rate`, `sum`, `max` and `histogram_quantile` would make of them.
 */
import { Sample, seriesKey } from "./exposition";
import { Figures } from "./frame";

/** The vLLM series the figures come from (vLLM 0.32's names). */
export const VLLM_SERIES = {
    generationTokens: "vllm:generation_tokens_total",
    running: "vllm:num_requests_running",
    waiting: "vllm:num_requests_waiting",
    kvCacheUsage: "vllm:kv_cache_usage_perc",
    ttftBucket: "vllm:time_to_first_token_seconds_bucket",
} as const;

const KEPT = new Set<string>(Object.values(VLLM_SERIES));

/** A value at a time (milliseconds). */
export interface Point {
    readonly time: number;
    readonly value: number;
}

/**
 * How much a counter grew over `points` (in time order), as Prometheus's `increase` counts it
 * before extrapolating: last minus first, and a value below the one before it means the counter
 * restarted from 0, so the value before the drop is added back. Undefined for fewer than 2 points.
 */
export function counterIncrease(points: readonly Point[]): number | undefined {
    if (points.length < 2) {
        return undefined;
    }
    let increase = points[points.length - 1].value - points[0].value;
    for (let index = 1; index < points.length; index++) {
        if (points[index].value < points[index - 1].value) {
            increase += points[index - 1].value;
        }
    }
    return increase;
}

/** `counterIncrease` per second between the first point and the last; undefined without two points apart in time. */
export function counterRate(points: readonly Point[]): number | undefined {
    const increase = counterIncrease(points);
    const seconds = points.length < 2 ? 0 : (points[points.length - 1].time - points[0].time) / 1000;
    return increase === undefined || !(seconds > 0) ? undefined : increase / seconds;
}

/** One bucket of a classic histogram: its upper bound (`le`) and the observations at or below it. */
export interface Bucket {
    readonly upperBound: number;
    readonly count: number;
}

/**
 * Prometheus's histogram_quantile over classic buckets (promql/quantile.go, bucketQuantile): the
 * buckets sorted by bound, those of the same bound merged, counts that differ by a rounding error
 * (1e-12 relative) evened out and any decrease flattened; NaN without a +Inf bucket, with fewer than
 * two buckets or no observation; the rank q × observations found in the first bucket that reaches
 * it and interpolated linearly inside it, from the bound below (0 for the first bucket, unless its
 * own bound is at or below 0: then that bound); in the +Inf bucket, the highest finite bound.
 */
export function bucketQuantile(q: number, input: readonly Bucket[]): number {
    if (Number.isNaN(q)) {
        return NaN;
    }
    if (q < 0) {
        return -Infinity;
    }
    if (q > 1) {
        return Infinity;
    }
    if (input.length === 0) {
        return NaN;
    }
    const sorted = [...input].sort((a, b) => a.upperBound - b.upperBound);
    if (sorted[sorted.length - 1].upperBound !== Infinity) {
        return NaN;
    }
    const buckets: { upperBound: number; count: number }[] = [];
    for (const bucket of sorted) {
        const last = buckets[buckets.length - 1];
        if (last && last.upperBound === bucket.upperBound) {
            last.count += bucket.count;
        } else {
            buckets.push({ ...bucket });
        }
    }
    let previous = buckets[0].count;
    for (let index = 1; index < buckets.length; index++) {
        const delta = Math.abs(buckets[index].count - previous);
        if (delta === 0) {
            continue;
        }
        if (delta / buckets[index].count <= 1e-12) {
            buckets[index].count = previous;
        } else {
            previous = buckets[index].count;
        }
    }
    let max = buckets[0].count;
    for (let index = 1; index < buckets.length; index++) {
        if (buckets[index].count > max) {
            max = buckets[index].count;
        } else if (buckets[index].count < max) {
            buckets[index].count = max;
        }
    }
    if (buckets.length < 2) {
        return NaN;
    }
    const observations = buckets[buckets.length - 1].count;
    if (observations === 0) {
        return NaN;
    }
    let rank = q * observations;
    let b = buckets.findIndex((bucket, index) => index < buckets.length - 1 && bucket.count >= rank);
    if (b < 0) {
        b = buckets.length - 1;
    }
    if (b === buckets.length - 1) {
        return buckets[buckets.length - 2].upperBound;
    }
    if (b === 0 && buckets[0].upperBound <= 0) {
        return buckets[0].upperBound;
    }
    let start = 0;
    let count = buckets[b].count;
    if (b > 0) {
        start = buckets[b - 1].upperBound;
        count -= buckets[b - 1].count;
        rank -= buckets[b - 1].count;
    }
    return start + (buckets[b].upperBound - start) * (rank / count);
}

/** One read of a service's /metrics: when it was asked for, and the series the figures need. */
interface Scrape {
    readonly time: number;
    readonly samples: readonly Sample[];
}

/** The scrapes of one service over the last `spanMs` (a minute by default), and its figures. */
export class ServiceWindow {
    private scrapes: Scrape[] = [];

    constructor(private readonly spanMs = 60_000) {}

    /**
     * Adds a scrape taken at `time` (ms) and forgets those older than the span before it (all of
     * them when `time` is not after the latest: the clock went back).
     */
    add(time: number, samples: readonly Sample[]): void {
        if (this.scrapes.length > 0 && time <= this.scrapes[this.scrapes.length - 1].time) {
            this.scrapes = [];
        }
        this.scrapes.push({ time, samples: samples.filter((sample) => KEPT.has(sample.name)) });
        this.scrapes = this.scrapes.filter((scrape) => scrape.time > time - this.spanMs);
    }

    /** How many scrapes the window holds. */
    get size(): number {
        return this.scrapes.length;
    }

    /** The model the latest scrape names (vLLM's label model_name), if any. */
    model(): string | undefined {
        return this.scrapes[this.scrapes.length - 1]?.samples.find((sample) => sample.labels.model_name !== undefined)?.labels.model_name;
    }

    /** Each series of `name` over the window: its labels and its points in time order. */
    private series(name: string): { labels: Readonly<Record<string, string>>; points: Point[] }[] {
        const byKey = new Map<string, { labels: Readonly<Record<string, string>>; points: Point[] }>();
        for (const scrape of this.scrapes) {
            for (const sample of scrape.samples) {
                if (sample.name !== name) {
                    continue;
                }
                const key = seriesKey(sample.name, sample.labels);
                const entry = byKey.get(key) ?? { labels: sample.labels, points: [] };
                entry.points.push({ time: scrape.time, value: sample.value });
                byKey.set(key, entry);
            }
        }
        return [...byKey.values()];
    }

    /** The latest scrape's values of `name`, one per label set. */
    private latest(name: string): number[] {
        return (this.scrapes[this.scrapes.length - 1]?.samples ?? []).filter((sample) => sample.name === name).map((sample) => sample.value);
    }

    /**
     * tokens/s: sum over label sets of each series' counterRate (sum(rate(...))); running, waiting:
     * the latest values summed; KV %: the latest values' max × 100; TTFT p50: bucketQuantile(0.5) of
     * each bucket bound's increase summed over label sets (NaN, shown as unknown, when no request
     * had its first token in the window). A figure whose series is not there is undefined.
     */
    figures(): Figures {
        const sum = (values: readonly number[]) => (values.length === 0 ? undefined : values.reduce((total, value) => total + value, 0));
        const rates = this.series(VLLM_SERIES.generationTokens)
            .map((series) => counterRate(series.points))
            .filter((rate): rate is number => rate !== undefined);
        const kv = this.latest(VLLM_SERIES.kvCacheUsage);
        const increases = new Map<number, number>();
        for (const series of this.series(VLLM_SERIES.ttftBucket)) {
            const bound = series.labels.le === undefined ? undefined : parseBound(series.labels.le);
            const increase = counterIncrease(series.points);
            if (bound !== undefined && increase !== undefined) {
                increases.set(bound, (increases.get(bound) ?? 0) + increase);
            }
        }
        const ttft = bucketQuantile(0.5, [...increases].map(([upperBound, count]) => ({ upperBound, count })));
        return {
            tokensPerSecond: sum(rates),
            running: sum(this.latest(VLLM_SERIES.running)),
            waiting: sum(this.latest(VLLM_SERIES.waiting)),
            kvCachePercent: kv.length === 0 ? undefined : Math.max(...kv) * 100,
            ttftP50Seconds: Number.isFinite(ttft) ? ttft : undefined,
        };
    }
}

/** A bucket's `le` as a number ("+Inf" included); undefined when it is none. */
function parseBound(le: string): number | undefined {
    if (/^\+?inf$/i.test(le)) {
        return Infinity;
    }
    const value = Number(le);
    return le.trim() !== "" && !Number.isNaN(value) ? value : undefined;
}
