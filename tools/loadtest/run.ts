/**
 * The load test's run: the levels (1 request in flight, then C), one after the other, each a fixed
 * number of requests sent as soon as a slot frees, measured by ./client.ts and summed up by
 * ./stats.ts; beside them, from the first level's start to the last one's end, what the server saw
 * (./serverSampler.ts).
 */
import { performance } from "perf_hooks";
import { LoadtestApi, RequestPlan, RequestRecord, firstModel, measureRequest, normalizeEndpoint, requestPlan } from "./client";
import { LevelSpan, ServerSampler, ServerSide, notSampled, sampledSide } from "./serverSampler";
import { ServerOptions, chooseServerSource } from "./serverSources";
import { LevelSummary, summarizeLevel } from "./stats";

/** The run's parameters; only `endpoint` is required. */
export interface LoadtestOptions {
    /** The API's base, e.g. `http://10.1.230.180:8000/v1` (a trailing slash is ignored). */
    readonly endpoint: string;
    /** The model to ask; default: the first id of `GET <endpoint>/models`. */
    readonly model?: string;
    /** Sent as `Authorization: Bearer <key>`; never written into the report. */
    readonly apiKey?: string;
    /** Where the key came from, for the report (e.g. `env VLLM_API_KEY`); never the key. */
    readonly apiKeySource?: string;
    /** `completions` (POST /completions, default) or `chat` (POST /chat/completions). */
    readonly api?: LoadtestApi;
    /** The second level's concurrency (default 8); the run is always at 1, then at this. */
    readonly concurrency?: number;
    /** The levels to run instead of [1, concurrency], e.g. [1, 2, 4, 8]. */
    readonly levels?: readonly number[];
    /** Requests per level (default 16). */
    readonly requests?: number;
    /** `max_tokens` of every request (default 128). */
    readonly maxTokens?: number;
    /** The prompt (default {@link DEFAULT_PROMPT}); the chat API sends it as one user message. */
    readonly prompt?: string;
    /** Per-request timeout in milliseconds (default 120 000), from sending to the stream's end. */
    readonly timeoutMs?: number;
    /** Called after each request, e.g. for progress. */
    readonly onRequest?: (record: RequestRecord) => void;
    /** Where to read what the server saw (Prometheus, /metrics); without it the server side is not sampled. */
    readonly server?: ServerOptions;
}

/** A level and its requests. */
export interface LevelReport {
    readonly summary: LevelSummary;
    readonly requests: readonly RequestRecord[];
}

/** Everything a run measured (what `loadtest.json` holds). */
export interface LoadtestReport {
    readonly tool: "vllm-fleet loadtest";
    /** When the run started (ISO 8601). */
    readonly when: string;
    readonly endpoint: string;
    readonly model: string;
    readonly api: LoadtestApi;
    readonly requestsPerLevel: number;
    readonly maxTokens: number;
    readonly prompt: string;
    readonly timeoutMs: number;
    /** `none` or where the key came from; never the key. */
    readonly apiKeySource: string;
    readonly levels: readonly LevelReport[];
    /** What the server saw, every second of the levels: running, waiting, KV %; or why not. */
    readonly server: ServerSide;
}

export const DEFAULT_CONCURRENCY = 8;
export const DEFAULT_REQUESTS = 16;
export const DEFAULT_MAX_TOKENS = 128;
export const DEFAULT_TIMEOUT_MS = 120_000;
export const DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle.";

/** Runs `requests` requests with at most `concurrency` in flight, each sent as soon as a slot frees. */
async function runLevel(plan: RequestPlan, concurrency: number, requests: number, onRequest?: (record: RequestRecord) => void): Promise<LevelReport> {
    const records: RequestRecord[] = new Array(requests);
    let next = 0;
    let inFlight = 0;
    let peakInFlight = 0;
    const levelStart = performance.now();
    const worker = async () => {
        for (let index = next++; index < requests; index = next++) {
            inFlight++;
            peakInFlight = Math.max(peakInFlight, inFlight);
            const record = await measureRequest(plan, index, concurrency, levelStart);
            inFlight--;
            records[index] = record;
            onRequest?.(record);
        }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, requests) }, worker));
    const wallMs = performance.now() - levelStart;
    return { summary: summarizeLevel(concurrency, records, wallMs, peakInFlight), requests: records };
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
    const chosen = value ?? fallback;
    if (!Number.isInteger(chosen) || chosen < 1) {
        throw new Error(`${name}: expected a whole number of at least 1, got ${chosen}`);
    }
    return chosen;
}

/** The levels of a run: [1, concurrency] unless given (each a whole number ≥ 1, duplicates dropped). */
export function levelsOf(options: Pick<LoadtestOptions, "concurrency" | "levels">): number[] {
    const levels = options.levels ?? [1, positiveInteger("concurrency", options.concurrency, DEFAULT_CONCURRENCY)];
    if (levels.length === 0) {
        throw new Error("levels: expected at least one concurrency");
    }
    return [...new Set(levels.map((level) => positiveInteger("levels", level, 1)))];
}

/**
 * Runs the benchmark: finds the model when none is given, then runs each level (1, then the
 * concurrency) one after the other. Requests that fail are recorded, not thrown; only a failure to
 * find the model throws.
 */
export async function runLoadtest(options: LoadtestOptions): Promise<LoadtestReport> {
    const endpoint = normalizeEndpoint(options.endpoint);
    const levels = levelsOf(options);
    const requests = positiveInteger("requests", options.requests, DEFAULT_REQUESTS);
    const maxTokens = positiveInteger("maxTokens", options.maxTokens, DEFAULT_MAX_TOKENS);
    const timeoutMs = positiveInteger("timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS);
    const api = options.api ?? "completions";
    const prompt = options.prompt ?? DEFAULT_PROMPT;
    const when = new Date().toISOString();
    const model = options.model ?? (await firstModel(endpoint, options.apiKey));
    const plan = requestPlan(endpoint, model, api, prompt, maxTokens, options.apiKey, timeoutMs);
    const intervalMs = positiveInteger("server.intervalMs", options.server?.intervalMs, 1000);
    // The place to sample is chosen before the load starts, each one tried with a read, in order; the
    // read that answered, just before the first level, is the sample at 0 s.
    const chosen = options.server ? await chooseServerSource(options.server, endpoint, model) : { reason: "not asked for: no Prometheus or /metrics given" };
    const sampler = chosen.source ? new ServerSampler(chosen.source, intervalMs) : undefined;
    const reports: LevelReport[] = [];
    const spans: LevelSpan[] = [];
    const runStart = performance.now();
    sampler?.start(runStart, chosen.first);
    let read: Awaited<ReturnType<ServerSampler["stop"]>> | undefined;
    try {
        // The levels follow one another: each one's span from the one before's end (the first's from 0).
        for (const concurrency of levels) {
            reports.push(await runLevel(plan, concurrency, requests, options.onRequest));
            spans.push({ concurrency, fromMs: spans.at(-1)?.toMs ?? 0, toMs: performance.now() - runStart });
        }
    } finally {
        read = await sampler?.stop();
    }
    const server = chosen.source && read ? sampledSide(chosen.source, chosen.reason, intervalMs, read, spans) : notSampled(chosen.reason ?? "no answer", intervalMs);
    return {
        tool: "vllm-fleet loadtest",
        when,
        endpoint,
        model,
        api,
        requestsPerLevel: requests,
        maxTokens,
        prompt,
        timeoutMs,
        apiKeySource: options.apiKey ? (options.apiKeySource ?? "given") : "none",
        levels: reports,
        server,
    };
}
