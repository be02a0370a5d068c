/**
 * Where the load test reads what the server saw: the fleet's Prometheus (instant queries), or the
 * vLLM service's own /metrics (read with `npm run top`'s strict parser). Each read gives the three
 * figures at that moment: requests running, requests waiting (summed over the series) and the KV
 * cache usage in percent (the highest of the series). A read that gets no usable answer throws, in
 * a few words; the sampler (./serverSampler.ts) counts it.
 */
import { parseExposition } from "../top/exposition";
import { parseVector, queryUrl } from "../top/queries";
import { metricsUrlOf, shortError } from "../top/sources";
import { normalizeEndpoint } from "./client";

/** The server's figures at one moment. */
export interface ServerFigures {
    readonly running: number;
    readonly waiting: number;
    readonly kvPercent: number;
}

/** One place to read the figures from. */
export interface ServerSource {
    /** For the report: `prometheus <url>` or `metrics <url>[ + <url>...]`. */
    readonly label: string;
    /** The figures now; throws (with a short reason) when there is no usable answer. */
    read(): Promise<ServerFigures>;
}

/** vLLM 0.32's series of the three figures. */
export const SERVER_SERIES = {
    running: "vllm:num_requests_running",
    waiting: "vllm:num_requests_waiting",
    kvCacheUsage: "vllm:kv_cache_usage_perc",
} as const;

/** Every read's deadline, so a server that hangs never holds the sampling up. */
export const SERVER_READ_TIMEOUT_MS = 2000;

/** A stack's service as its output `services` gives it. */
export interface StackService {
    readonly endpoint: string;
    readonly model: string;
}

/** A GET with a deadline: the status and the body, or a short reason thrown. */
async function get(url: string, headers: Record<string, string>, timeoutMs: number): Promise<{ status: number; body: string }> {
    try {
        const response = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
        return { status: response.status, body: await response.text() };
    } catch (error) {
        throw new Error(shortError(error, timeoutMs));
    }
}

/** A PromQL label matcher's value (PromQL reads Go's double-quoted strings, as JSON writes them). */
function quoted(value: string): string {
    return JSON.stringify(value);
}

/**
 * The three instant queries, over the series Prometheus scraped from the services of `model`
 * (target labels job="vllm", model="<served name>") and, when the run is against one service's own
 * endpoint, of that service only (service="<name>").
 */
export function prometheusQueries(model: string, service?: string): { running: string; waiting: string; kvPercent: string } {
    const selector = `{job="vllm",model=${quoted(model)}${service === undefined ? "" : `,service=${quoted(service)}`}}`;
    // `by (service)`: one value per service, as `npm run top` reads them (tools/top/queries.ts);
    // added (running, waiting) or the highest taken (KV) here, that is sum() and max() of the series.
    return {
        running: `sum by (service) (${SERVER_SERIES.running}${selector})`,
        waiting: `sum by (service) (${SERVER_SERIES.waiting}${selector})`,
        kvPercent: `max by (service) (${SERVER_SERIES.kvCacheUsage}${selector}) * 100`,
    };
}

/** Prometheus at `base`: each read is the three instant queries at once. */
export function prometheusSource(base: string, model: string, service?: string, timeoutMs = SERVER_READ_TIMEOUT_MS): ServerSource {
    const url = base.replace(/\/+$/, "");
    const queries = prometheusQueries(model, service);
    const one = async (query: string, combine: (values: number[]) => number): Promise<number> => {
        const answer = await get(queryUrl(url, query), {}, timeoutMs);
        let values: Map<string, number>;
        try {
            values = parseVector(answer.body);
        } catch (error) {
            throw new Error(answer.status === 200 ? `unreadable answer: ${(error as Error).message}` : `HTTP ${answer.status}: ${(error as Error).message}`);
        }
        if (answer.status !== 200) {
            throw new Error(`HTTP ${answer.status}`);
        }
        const present = [...values.values()].filter((value) => Number.isFinite(value));
        if (present.length === 0) {
            throw new Error(`no series for ${query}`);
        }
        return combine(present);
    };
    const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
    return {
        label: `prometheus ${url}`,
        read: async () => {
            const answers = await Promise.allSettled([one(queries.running, sum), one(queries.waiting, sum), one(queries.kvPercent, (values) => Math.max(...values))]);
            // The first query's failure, whichever answered first: the same reason for the same fault.
            const [running, waiting, kvPercent] = answers.map((answer) => {
                if (answer.status === "rejected") {
                    throw answer.reason;
                }
                return answer.value;
            });
            return { running, waiting, kvPercent };
        },
    };
}

/** The figures of one /metrics page: running and waiting summed over their series, KV the highest, in percent. */
export function figuresOfPage(text: string): ServerFigures {
    let samples: ReturnType<typeof parseExposition>["samples"];
    try {
        samples = parseExposition(text).samples;
    } catch (error) {
        throw new Error(`/metrics unreadable: ${(error as Error).message}`);
    }
    const values = (name: string): number[] => {
        const found = samples.filter((sample) => sample.name === name && Number.isFinite(sample.value)).map((sample) => sample.value);
        if (found.length === 0) {
            throw new Error(`/metrics has no ${name}`);
        }
        return found;
    };
    const sum = (name: string) => values(name).reduce((total, value) => total + value, 0);
    return { running: sum(SERVER_SERIES.running), waiting: sum(SERVER_SERIES.waiting), kvPercent: Math.max(...values(SERVER_SERIES.kvCacheUsage)) * 100 };
}

/**
 * The /metrics pages at `urls` (the services serving the model), each with the key vLLM serves
 * with ("" or undefined: none): running and waiting added over them, KV the highest.
 */
export function metricsSource(urls: readonly string[], apiKey: string | undefined, timeoutMs = SERVER_READ_TIMEOUT_MS): ServerSource {
    if (urls.length === 0) {
        throw new Error("metricsSource: expected at least one URL");
    }
    const headers: Record<string, string> = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
    return {
        label: `metrics ${urls.join(" + ")}`,
        read: async () => {
            const pages = await Promise.all(
                urls.map(async (url) => {
                    const answer = await get(url, headers, timeoutMs).catch((error: Error) => {
                        throw new Error(urls.length > 1 ? `${url}: ${error.message}` : error.message);
                    });
                    if (answer.status !== 200) {
                        throw new Error(`${urls.length > 1 ? `${url}: ` : ""}HTTP ${answer.status}`);
                    }
                    return figuresOfPage(answer.body);
                }),
            );
            return {
                running: pages.reduce((total, page) => total + page.running, 0),
                waiting: pages.reduce((total, page) => total + page.waiting, 0),
                kvPercent: Math.max(...pages.map((page) => page.kvPercent)),
            };
        },
    };
}

/**
 * The services of a stack the run loads: the one whose endpoint is the run's (`exact`), else every
 * one serving the model (a gateway's endpoint, or a model served twice).
 */
export function servicesUnderLoad(services: Readonly<Record<string, StackService>>, endpoint: string, model: string): { names: string[]; exact: boolean } {
    const same = (a: string) => {
        try {
            return normalizeEndpoint(a) === normalizeEndpoint(endpoint);
        } catch {
            return false;
        }
    };
    const byEndpoint = Object.entries(services).filter(([, service]) => same(service.endpoint) && service.model === model);
    if (byEndpoint.length > 0) {
        return { names: byEndpoint.map(([name]) => name), exact: true };
    }
    return { names: Object.entries(services).filter(([, service]) => service.model === model).map(([name]) => name), exact: false };
}

/** What the load test may sample the server from (its flags, else its stack's outputs). */
export interface ServerOptions {
    /** Prometheus's base URL (`--prometheus`, else the stack's output monitoring.endpoint). */
    readonly prometheus?: string;
    /** /metrics URLs to read directly (`--metrics`); instead of the stack's services'. */
    readonly metrics?: readonly string[];
    /** The stack's output `services`: those serving the tested model are read directly. */
    readonly services?: Readonly<Record<string, StackService>>;
    /** The key vLLM serves with, sent to /metrics ("" or undefined: none). */
    readonly apiKey?: string;
    /** Why there is nothing to sample, when neither a stack nor a flag gave a place. */
    readonly none?: string;
    /** Between two reads (default 1000 ms); each read's deadline (default 2000 ms). */
    readonly intervalMs?: number;
    readonly timeoutMs?: number;
}

/** The places to try, in order (Prometheus, then /metrics), and why a place is missing. */
export function serverCandidates(options: ServerOptions, endpoint: string, model: string): { sources: ServerSource[]; missing: string[] } {
    const timeoutMs = options.timeoutMs ?? SERVER_READ_TIMEOUT_MS;
    const sources: ServerSource[] = [];
    const missing: string[] = [];
    const loaded = options.services ? servicesUnderLoad(options.services, endpoint, model) : undefined;
    const exactService = loaded?.exact && loaded.names.length === 1 ? loaded.names[0] : undefined;
    if (options.prometheus) {
        sources.push(prometheusSource(options.prometheus, model, exactService, timeoutMs));
    } else if (options.services) {
        missing.push("the stack has no monitoring");
    }
    if (options.metrics && options.metrics.length > 0) {
        sources.push(metricsSource(options.metrics, options.apiKey, timeoutMs));
    } else if (loaded && loaded.names.length > 0) {
        sources.push(metricsSource(loaded.names.map((name) => metricsUrlOf(options.services![name].endpoint)), options.apiKey, timeoutMs));
    } else if (options.services) {
        missing.push(`no service of the stack serves ${model}`);
    }
    if (sources.length === 0 && missing.length === 0) {
        missing.push(options.none ?? "no Prometheus and no /metrics given");
    }
    return { sources, missing };
}

/**
 * The first place that answers one read, in order, with that read's figures (the run's first
 * sample), and why the ones before it (or all of them) did not. A place answers when every figure came.
 */
export async function chooseServerSource(options: ServerOptions, endpoint: string, model: string): Promise<{ source?: ServerSource; first?: ServerFigures; reason?: string }> {
    const { sources, missing } = serverCandidates(options, endpoint, model);
    const failed: string[] = [...missing];
    for (const source of sources) {
        try {
            const first = await source.read();
            return { source, first, reason: failed.length > 0 ? failed.join("; ") : undefined };
        } catch (error) {
            failed.push(`${source.label}: ${(error as Error).message}`);
        }
    }
    return { reason: failed.join("; ") };
}
