/**
 * `npm run loadtest -- [--endpoint URL] [--stack NAME] [--model NAME] [--concurrency C] ...`: a serving
 * benchmark against any OpenAI-compatible endpoint (vLLM on real DGX Sparks, the simulated cluster,
 * anything that streams server-sent events). It sends streaming completions, first one at a time,
 * then C at a time, and measures per request the time to the first generated token (TTFT), the total
 * time, the output tokens and the tokens per second after the first token; per level the TTFT
 * percentiles, the output tokens per second and the requests per second. It writes
 * `<out>/loadtest.json` (every request and the summaries; never the API key) and `<out>/loadtest.svg`,
 * and prints a table. Exit code 0 when every request succeeded, 1 when some failed, 2 when it could
 * not run.
 *
 * The endpoint defaults to the `endpoint` output of the selected (or `--stack`) Pulumi stack, and the
 * API key to that stack's secret output `apiKey` (its vllm-fleet:vllmApiKey, or the key it made; read through
 * the Pulumi CLI like `npm run status` does), else the variable VLLM_API_KEY (`--api-key-env NAME`
 * names another variable, which then comes first).
 *
 * For other programs (the bench): {@link runLoadtest}, {@link renderLoadtestSvg},
 * {@link formatLoadtestTable} and {@link writeLoadtestOutputs}. Only Node's built-ins are used.
 */
import * as fs from "fs";
import * as path from "path";
import { performance } from "perf_hooks";
import { escapeXml } from "./timeline/svg";
import { projectStack } from "./stack";

// ---------------------------------------------------------------------------------------------
// What it measures

/** Which OpenAI route the requests go to. */
export type LoadtestApi = "completions" | "chat";

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
}

/** Why a request failed. */
export interface RequestError {
    /** `http`: a status other than 2xx; `network`: no answer; `timeout`; `stream`: a broken or refused stream. */
    readonly kind: "http" | "network" | "timeout" | "stream";
    /** The HTTP status, for `http`. */
    readonly status?: number;
    /** What was said: the start of the body for `http`, the cause otherwise. */
    readonly message: string;
}

/** One request as measured. Times in milliseconds from the level's start or the request's start. */
export interface RequestRecord {
    /** The request's number within its level (0-based, in the order they were sent). */
    readonly index: number;
    /** The level's concurrency. */
    readonly concurrency: number;
    /** When it was sent, from the level's start. */
    readonly startMs: number;
    /** From sending to the first chunk carrying generated text (null when none came). */
    readonly ttftMs: number | null;
    /** From sending to the end of the stream (or to the failure). */
    readonly totalMs: number;
    /** The generated tokens: the server's usage when it sent one, else the chunks with text. */
    readonly outputTokens: number;
    /** Where `outputTokens` comes from. */
    readonly tokenSource: "usage" | "chunks";
    /** Chunks that carried generated text. */
    readonly contentChunks: number;
    /** (outputTokens - 1) / (totalMs - ttftMs): the decode rate after the first token (null below 2 tokens). */
    readonly tokensPerSecond: number | null;
    readonly finishReason: string | null;
    /** Set when the request failed; its times then do not count in the summaries. */
    readonly error?: RequestError;
}

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
}

export const DEFAULT_CONCURRENCY = 8;
export const DEFAULT_REQUESTS = 16;
export const DEFAULT_MAX_TOKENS = 128;
export const DEFAULT_TIMEOUT_MS = 120_000;
export const DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle.";
const EXCERPT_CHARS = 200;

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

// ---------------------------------------------------------------------------------------------
// Requests

/** The endpoint without a trailing slash; a bare origin gets `/v1`. Throws on anything but http(s). */
export function normalizeEndpoint(endpoint: string): string {
    let url: URL;
    try {
        url = new URL(endpoint);
    } catch {
        throw new Error(`--endpoint: expected an http(s) URL such as http://host:8000/v1, got "${endpoint}"`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new Error(`--endpoint: expected an http(s) URL such as http://host:8000/v1, got "${endpoint}"`);
    }
    const base = url.toString().replace(/\/+$/, "");
    return url.pathname === "/" || url.pathname === "" ? `${base}/v1` : base;
}

function authHeaders(apiKey: string | undefined): Record<string, string> {
    return apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
}

function excerpt(text: string): string {
    const flat = text.replace(/\s+/g, " ").trim();
    return flat.length > EXCERPT_CHARS ? `${flat.slice(0, EXCERPT_CHARS)}…` : flat;
}

function causeOf(error: unknown): string {
    const e = error as { message?: string; cause?: { code?: string; message?: string } };
    const cause = e?.cause;
    const detail = [cause?.code, cause?.message].filter((part) => part).join(": ");
    return detail && !String(e?.message).includes(detail) ? `${e?.message ?? String(error)} (${detail})` : (e?.message ?? String(error));
}

/** The first model `GET <endpoint>/models` lists. */
export async function firstModel(endpoint: string, apiKey?: string, timeoutMs = 30_000): Promise<string> {
    const url = `${normalizeEndpoint(endpoint)}/models`;
    let response: Response;
    try {
        response = await fetch(url, { headers: authHeaders(apiKey), signal: AbortSignal.timeout(timeoutMs) });
    } catch (error) {
        throw new Error(`GET ${url}: ${causeOf(error)}`);
    }
    const text = await response.text();
    if (!response.ok) {
        const hint = response.status === 401 ? (apiKey ? " (the key was refused)" : " (no API key was sent: VLLM_API_KEY, --api-key-env NAME or --stack NAME)") : "";
        throw new Error(`GET ${url}: HTTP ${response.status}: ${excerpt(text)}${hint}`);
    }
    let id: unknown;
    try {
        id = (JSON.parse(text) as { data?: { id?: unknown }[] }).data?.[0]?.id;
    } catch {
        throw new Error(`GET ${url}: not JSON: ${excerpt(text)}`);
    }
    if (typeof id !== "string" || id === "") {
        throw new Error(`GET ${url}: lists no model; give --model NAME`);
    }
    return id;
}

/** What a request needs besides its numbers. */
interface RequestPlan {
    readonly url: string;
    readonly headers: Record<string, string>;
    readonly body: string;
    readonly timeoutMs: number;
}

function requestPlan(endpoint: string, model: string, api: LoadtestApi, prompt: string, maxTokens: number, apiKey: string | undefined, timeoutMs: number): RequestPlan {
    const common = { model, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } };
    const body = api === "chat" ? { ...common, messages: [{ role: "user", content: prompt }] } : { ...common, prompt };
    return {
        url: `${endpoint}/${api === "chat" ? "chat/completions" : "completions"}`,
        headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders(apiKey) },
        body: JSON.stringify(body),
        timeoutMs,
    };
}

/** The generated text a stream chunk carries (completion text, or a chat delta's content or reasoning). */
export function chunkText(chunk: any): string {
    const choice = chunk?.choices?.[0];
    if (!choice) {
        return "";
    }
    if (typeof choice.text === "string") {
        return choice.text;
    }
    // vLLM sends a reasoning model's thinking as `reasoning` (older: `reasoning_content`; some send both).
    const delta = choice.delta ?? {};
    const text = (piece: unknown) => (typeof piece === "string" ? piece : "");
    return text(delta.content) + (text(delta.reasoning) || text(delta.reasoning_content));
}

/**
 * Reads server-sent events from `body`, calling `onData` with each event's data (its `data:` lines
 * joined by newlines) as it arrives. Returns when the stream ends.
 */
export async function readSse(body: ReadableStream<Uint8Array>, onData: (data: string) => void): Promise<void> {
    const decoder = new TextDecoder();
    const reader = body.getReader();
    let buffer = "";
    let data: string[] = [];
    const line = (text: string) => {
        if (text === "") {
            if (data.length > 0) {
                onData(data.join("\n"));
                data = [];
            }
        } else if (text.startsWith("data:")) {
            data.push(text.slice(text.startsWith("data: ") ? 6 : 5));
        }
        // Comments (":"), "event:", "id:" and "retry:" lines carry nothing measured here.
    };
    for (;;) {
        const { done, value } = await reader.read();
        buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf("\n")) >= 0) {
            line(buffer.slice(0, newline).replace(/\r$/, ""));
            buffer = buffer.slice(newline + 1);
        }
        if (done) {
            line(buffer.replace(/\r$/, ""));
            line("");
            return;
        }
    }
}

/** Sends one streaming request and measures it; never throws (a failure is in the record). */
async function measureRequest(plan: RequestPlan, index: number, concurrency: number, levelStart: number): Promise<RequestRecord> {
    const started = performance.now();
    const since = () => performance.now() - started;
    let ttftMs: number | null = null;
    let contentChunks = 0;
    let usageTokens: number | undefined;
    let finishReason: string | null = null;
    let sawDone = false;
    let streamError: RequestError | undefined;
    let timedOut = false;
    const controller = new AbortController();
    const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
    }, plan.timeoutMs);
    const record = (totalMs: number, error?: RequestError): RequestRecord => {
        const outputTokens = usageTokens ?? contentChunks;
        const decodeMs = ttftMs === null ? 0 : totalMs - ttftMs;
        const tokensPerSecond = !error && ttftMs !== null && outputTokens >= 2 && decodeMs > 0 ? (outputTokens - 1) / (decodeMs / 1000) : null;
        return {
            index,
            concurrency,
            startMs: started - levelStart,
            ttftMs,
            totalMs,
            outputTokens,
            tokenSource: usageTokens === undefined ? "chunks" : "usage",
            contentChunks,
            tokensPerSecond,
            finishReason,
            ...(error ? { error } : {}),
        };
    };
    try {
        const response = await fetch(plan.url, { method: "POST", headers: plan.headers, body: plan.body, signal: controller.signal });
        if (!response.ok) {
            const text = await response.text().catch(() => "");
            return record(since(), { kind: "http", status: response.status, message: excerpt(text) });
        }
        const contentType = response.headers.get("content-type") ?? "";
        if (!response.body) {
            return record(since(), { kind: "stream", message: "the answer has no body" });
        }
        if (!contentType.includes("text/event-stream")) {
            const text = await response.text().catch(() => "");
            return record(since(), { kind: "stream", message: `expected text/event-stream, got ${contentType || "no content-type"}: ${excerpt(text)}` });
        }
        await readSse(response.body, (data) => {
            if (sawDone || streamError) {
                return;
            }
            if (data.trim() === "[DONE]") {
                sawDone = true;
                return;
            }
            let chunk: any;
            try {
                chunk = JSON.parse(data);
            } catch {
                streamError = { kind: "stream", message: `a data line is not JSON: ${excerpt(data)}` };
                return;
            }
            if (chunk?.error) {
                // vLLM reports a failure inside a started stream as a data line with an error object.
                const message = typeof chunk.error === "string" ? chunk.error : (chunk.error.message ?? JSON.stringify(chunk.error));
                streamError = { kind: "stream", message: excerpt(String(message)) };
                return;
            }
            if (chunkText(chunk) !== "") {
                contentChunks++;
                if (ttftMs === null) {
                    ttftMs = since();
                }
            }
            const reason = chunk?.choices?.[0]?.finish_reason;
            if (typeof reason === "string") {
                finishReason = reason;
            }
            const completionTokens = chunk?.usage?.completion_tokens;
            if (typeof completionTokens === "number") {
                usageTokens = completionTokens;
            }
        });
        const totalMs = since();
        if (streamError) {
            return record(totalMs, streamError);
        }
        if (!sawDone) {
            return record(totalMs, { kind: "stream", message: "the stream ended before data: [DONE]" });
        }
        return record(totalMs);
    } catch (error) {
        if (timedOut) {
            return record(since(), { kind: "timeout", message: `no complete answer within ${plan.timeoutMs} ms` });
        }
        return record(since(), { kind: "network", message: causeOf(error) });
    } finally {
        clearTimeout(timer);
    }
}

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
    const reports: LevelReport[] = [];
    for (const concurrency of levels) {
        reports.push(await runLevel(plan, concurrency, requests, options.onRequest));
    }
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
    };
}

// ---------------------------------------------------------------------------------------------
// What it writes

function fixed(value: number | null, digits = 0): string {
    return value === null ? "-" : value.toFixed(digits);
}

/** The printed table: a line per level, then the failures. */
export function formatLoadtestTable(report: LoadtestReport): string {
    const header = ["concurrency", "ok", "errors", "TTFT p50", "TTFT p95", "tok/s p50", "tok/s total", "req/s", "wall"];
    const rows = report.levels.map(({ summary }) => [
        String(summary.concurrency),
        String(summary.ok),
        String(summary.errors),
        summary.ttftMs.p50 === null ? "-" : `${fixed(summary.ttftMs.p50)} ms`,
        summary.ttftMs.p95 === null ? "-" : `${fixed(summary.ttftMs.p95)} ms`,
        fixed(summary.tokensPerSecondPerRequest.p50, 1),
        fixed(summary.outputTokensPerSecond, 1),
        fixed(summary.requestsPerSecond, 2),
        `${(summary.wallMs / 1000).toFixed(1)}s`,
    ]);
    const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
    const format = (row: string[]) => row.map((cell, column) => cell.padStart(widths[column])).join("  ");
    const lines = [
        `endpoint ${report.endpoint}  model ${report.model}  api ${report.api}  ${report.requestsPerLevel} requests per level, max_tokens ${report.maxTokens}`,
        format(header),
        ...rows.map(format),
    ];
    for (const level of report.levels) {
        const failed = level.requests.filter((record) => record.error);
        if (failed.length > 0) {
            const kinds = Object.entries(level.summary.errorsByKind).map(([kind, count]) => `${count} × ${kind}`).join(", ");
            const first = failed[0].error!;
            lines.push(`concurrency ${level.summary.concurrency}: ${kinds}; first: ${first.kind === "http" ? `HTTP ${first.status} ` : ""}${first.message || "(empty body)"}`);
        }
    }
    return lines.join("\n");
}

const COLORS = {
    first: "#4c6ef5",
    second: "#e8590c",
    failed: "#c92a2a",
    grid: "#e9ecef",
    axis: "#adb5bd",
    text: "#212529",
    muted: "#868e96",
};

/** A "nice" step (1, 2 or 5 times a power of ten) giving at most `maxTicks` ticks up to `max`. */
export function niceStep(max: number, maxTicks = 5): number {
    if (!(max > 0)) {
        return 1;
    }
    const raw = max / maxTicks;
    const magnitude = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((m) => m * magnitude).find((step) => step >= raw) ?? 10 * magnitude;
}

interface Panel {
    readonly title: string;
    readonly unit: string;
    readonly series: readonly { readonly label: string; readonly color: string; readonly values: readonly (number | null)[] }[];
}

/** Options of {@link renderLoadtestSvg}. */
export interface LoadtestSvgOptions {
    /** The chart's heading (default: `serving benchmark, <model>`). */
    readonly title?: string;
    /** Total width in pixels (default 960). */
    readonly width?: number;
}

/**
 * The chart as a self-contained SVG document, in the style of the deployment timeline
 * (tools/timeline/svg.ts): two panels side by side, time to first token (p50, p95) and output tokens
 * per second (each request's p50, and the level's total), a group of bars per concurrency with its
 * failures under it; every bar has a tooltip (`<title>`).
 */
export function renderLoadtestSvg(report: LoadtestReport, options: LoadtestSvgOptions = {}): string {
    const width = options.width ?? 960;
    const height = 370;
    const top = 92;
    const plotHeight = 210;
    const bottom = top + plotHeight;
    const gap = 40;
    const panelWidth = (width - gap) / 2;
    const round = (value: number) => Math.round(value * 10) / 10;
    const summaries = report.levels.map((level) => level.summary);
    const panels: Panel[] = [
        {
            title: "time to first token",
            unit: "milliseconds",
            series: [
                { label: "p50", color: COLORS.first, values: summaries.map((s) => s.ttftMs.p50) },
                { label: "p95", color: COLORS.second, values: summaries.map((s) => s.ttftMs.p95) },
            ],
        },
        {
            title: "output tokens per second",
            unit: "tokens / second",
            series: [
                { label: "per request, p50", color: COLORS.first, values: summaries.map((s) => s.tokensPerSecondPerRequest.p50) },
                { label: "total of the level", color: COLORS.second, values: summaries.map((s) => (s.ok > 0 ? s.outputTokensPerSecond : null)) },
            ],
        },
    ];
    const out: string[] = [];
    const errors = summaries.reduce((sum, s) => sum + s.errors, 0);
    out.push(
        `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
        `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
        `<text x="10" y="20" font-size="15" font-weight="bold" fill="${COLORS.text}">${escapeXml(options.title ?? `serving benchmark, ${report.model}`)}</text>`,
        `<text x="10" y="38" fill="${COLORS.text}">${escapeXml(
            `${report.endpoint} · ${report.api} · ${report.requestsPerLevel} streaming requests per level, max_tokens ${report.maxTokens} · ${report.when}` +
                (errors > 0 ? ` · ${errors} failed` : ""),
        )}</text>`,
    );
    panels.forEach((panel, panelIndex) => {
        const left = panelIndex * (panelWidth + gap);
        const axisX = left + 62;
        const plotRight = left + panelWidth - 10;
        const plotWidth = plotRight - axisX;
        const present = panel.series.flatMap((series) => series.values.filter((value): value is number => value !== null));
        const step = niceStep(Math.max(0, ...present));
        const max = Math.max(step, Math.ceil(Math.max(0, ...present) / step) * step);
        const y = (value: number) => bottom - (value / max) * plotHeight;
        out.push(`<text x="${axisX}" y="60" font-size="13" font-weight="bold" fill="${COLORS.text}">${escapeXml(panel.title)}</text>`);
        panel.series.forEach((series, index) => {
            const lx = axisX + index * 150;
            out.push(`<rect x="${lx}" y="68" width="12" height="10" fill="${series.color}"/><text x="${lx + 16}" y="77" fill="${COLORS.text}">${escapeXml(series.label)}</text>`);
        });
        for (let tick = 0; tick <= max + 1e-9; tick += step) {
            const ty = round(y(tick));
            out.push(
                `<line x1="${axisX}" y1="${ty}" x2="${round(plotRight)}" y2="${ty}" stroke="${COLORS.grid}"/>`,
                `<text x="${axisX - 5}" y="${round(ty + 4)}" text-anchor="end" fill="${COLORS.muted}">${Number(tick.toPrecision(6))}</text>`,
            );
        }
        out.push(
            `<line x1="${axisX}" y1="${top}" x2="${axisX}" y2="${bottom}" stroke="${COLORS.axis}"/>`,
            `<line x1="${axisX}" y1="${bottom}" x2="${round(plotRight)}" y2="${bottom}" stroke="${COLORS.axis}"/>`,
            `<text x="${left + 14}" y="${top + plotHeight / 2}" text-anchor="middle" fill="${COLORS.muted}" transform="rotate(-90 ${left + 14} ${top + plotHeight / 2})">${escapeXml(panel.unit)}</text>`,
            `<text x="${round(axisX + plotWidth / 2)}" y="${bottom + 46}" text-anchor="middle" fill="${COLORS.muted}">concurrency (requests in flight)</text>`,
        );
        const groupWidth = plotWidth / Math.max(1, summaries.length);
        const barWidth = Math.min(48, (groupWidth * 0.7) / panel.series.length);
        summaries.forEach((summary, level) => {
            const center = axisX + groupWidth * (level + 0.5);
            out.push(`<text x="${round(center)}" y="${bottom + 15}" text-anchor="middle" fill="${COLORS.text}">${summary.concurrency}</text>`);
            if (summary.errors > 0) {
                out.push(`<text x="${round(center)}" y="${bottom + 29}" text-anchor="middle" fill="${COLORS.failed}">${summary.errors} of ${summary.requests} failed</text>`);
            }
            panel.series.forEach((series, index) => {
                const bx = center - (barWidth * panel.series.length) / 2 + index * barWidth;
                const value = series.values[level];
                const label = value === null ? "n/a" : value >= 100 ? value.toFixed(0) : value.toFixed(1);
                if (value === null) {
                    out.push(`<text x="${round(bx + barWidth / 2)}" y="${bottom - 4}" text-anchor="middle" fill="${COLORS.muted}">n/a</text>`);
                    return;
                }
                const by = y(value);
                const tooltip = `concurrency ${summary.concurrency}: ${panel.title}, ${series.label}: ${label} ${panel.unit} (${summary.ok} of ${summary.requests} requests succeeded)`;
                out.push(
                    `<rect x="${round(bx + 1)}" y="${round(by)}" width="${round(barWidth - 2)}" height="${round(bottom - by)}" fill="${series.color}"><title>${escapeXml(tooltip)}</title></rect>`,
                    `<text x="${round(bx + barWidth / 2)}" y="${round(by - 4)}" text-anchor="middle" fill="${COLORS.text}">${label}</text>`,
                );
            });
        });
    });
    out.push("</svg>");
    return `${out.join("\n")}\n`;
}

/** Writes `loadtest.json` and `loadtest.svg` into `dir` (created when missing); returns their paths. */
export function writeLoadtestOutputs(report: LoadtestReport, dir: string, svgOptions: LoadtestSvgOptions = {}, base = "loadtest"): { json: string; svg: string } {
    fs.mkdirSync(dir, { recursive: true });
    const json = path.join(dir, `${base}.json`);
    const svg = path.join(dir, `${base}.svg`);
    // Times to the microsecond are plenty; the summaries were computed from the unrounded values.
    const rounded = (_key: string, value: unknown) => (typeof value === "number" && !Number.isInteger(value) ? Math.round(value * 1000) / 1000 : value);
    fs.writeFileSync(json, `${JSON.stringify(report, rounded, 2)}\n`);
    fs.writeFileSync(svg, renderLoadtestSvg(report, svgOptions));
    return { json, svg };
}

// ---------------------------------------------------------------------------------------------
// The command line

/** What the command line asks for. */
export interface LoadtestArgs {
    readonly endpoint?: string;
    readonly stack?: string;
    readonly model?: string;
    readonly api: LoadtestApi;
    readonly concurrency: number;
    readonly requests: number;
    readonly maxTokens: number;
    readonly prompt: string;
    readonly timeoutMs: number;
    readonly out: string;
    /** The variable holding the key, when `--api-key-env` was given. */
    readonly apiKeyEnv?: string;
    readonly help: boolean;
}

export const LOADTEST_USAGE = `usage: npm run loadtest -- [options]
  --endpoint URL       the API's base, e.g. http://10.1.230.180:8000/v1 (default: the stack's output endpoint)
  --stack NAME         the Pulumi stack for the endpoint and the key (default: the selected stack)
  --model NAME         default: the first model GET /v1/models lists
  --api completions|chat   the route (default completions)
  --concurrency C      requests in flight at the second level (default ${DEFAULT_CONCURRENCY}); the first is 1
  --requests N         requests per level (default ${DEFAULT_REQUESTS})
  --max-tokens N       max_tokens of each request (default ${DEFAULT_MAX_TOKENS})
  --prompt TEXT        the prompt (default: a short story request)
  --timeout SECONDS    per request (default ${DEFAULT_TIMEOUT_MS / 1000})
  --out DIR            where loadtest.json and loadtest.svg go (default loadtest-out/)
  --api-key-env NAME   read the API key from this variable (default: the stack's secret
                       output apiKey, else VLLM_API_KEY)`;

const VALUE_FLAGS = ["--endpoint", "--stack", "--model", "--api", "--concurrency", "--requests", "--max-tokens", "--prompt", "--timeout", "--out", "--api-key-env"] as const;

/** Parses the command line; relative `--out` is resolved against `cwd`. Throws naming the flag. */
export function parseLoadtestArgs(argv: readonly string[], cwd: string): LoadtestArgs {
    const values = new Map<string, string>();
    let help = false;
    for (let index = 0; index < argv.length; index++) {
        const arg = argv[index];
        if (arg === "--help" || arg === "-h") {
            help = true;
            continue;
        }
        const eq = arg.indexOf("=");
        const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
        if (!(VALUE_FLAGS as readonly string[]).includes(flag)) {
            throw new Error(`unknown option ${JSON.stringify(arg)}; expected one of ${VALUE_FLAGS.join(", ")}, --help`);
        }
        let value: string | undefined;
        if (flag !== arg) {
            value = arg.slice(eq + 1);
        } else {
            value = argv[index + 1];
            if (value === undefined || (value.startsWith("--") && value.length > 2)) {
                throw new Error(`${flag}: expected a value after it`);
            }
            index++;
        }
        if (values.has(flag)) {
            throw new Error(`${flag}: given twice`);
        }
        values.set(flag, value);
    }
    const integer = (flag: string, fallback: number): number => {
        const text = values.get(flag);
        if (text === undefined) {
            return fallback;
        }
        if (!/^\d+$/.test(text.trim()) || Number(text) < 1) {
            throw new Error(`${flag}: expected a whole number of at least 1, got ${JSON.stringify(text)}`);
        }
        return Number(text);
    };
    const text = (flag: string): string | undefined => {
        const value = values.get(flag);
        if (value !== undefined && value.trim() === "") {
            throw new Error(`${flag}: expected a value, got an empty string`);
        }
        return value;
    };
    const api = values.get("--api") ?? "completions";
    if (api !== "completions" && api !== "chat") {
        throw new Error(`--api: expected completions or chat, got ${JSON.stringify(api)}`);
    }
    const timeoutText = values.get("--timeout");
    const timeoutSeconds = timeoutText === undefined ? DEFAULT_TIMEOUT_MS / 1000 : Number(timeoutText);
    if (!(timeoutSeconds > 0) || !Number.isFinite(timeoutSeconds)) {
        throw new Error(`--timeout: expected a number of seconds above 0, got ${JSON.stringify(timeoutText)}`);
    }
    const endpoint = text("--endpoint");
    if (endpoint !== undefined) {
        normalizeEndpoint(endpoint);
    }
    const apiKeyEnv = text("--api-key-env");
    if (apiKeyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(apiKeyEnv)) {
        throw new Error(`--api-key-env: expected the name of an environment variable, got ${JSON.stringify(apiKeyEnv)}`);
    }
    return {
        endpoint,
        stack: text("--stack"),
        model: text("--model"),
        api,
        concurrency: integer("--concurrency", DEFAULT_CONCURRENCY),
        requests: integer("--requests", DEFAULT_REQUESTS),
        maxTokens: integer("--max-tokens", DEFAULT_MAX_TOKENS),
        prompt: text("--prompt") ?? DEFAULT_PROMPT,
        timeoutMs: Math.round(timeoutSeconds * 1000),
        out: path.resolve(cwd, text("--out") ?? "loadtest-out"),
        apiKeyEnv,
        help,
    };
}

/** What a stack gives the load test: its endpoint output and its API key, if any. */
export interface StackTarget {
    readonly stack: string;
    readonly endpoint?: string;
    /** Its output apiKey. */
    readonly apiKey?: string;
}

/**
 * Reads a stack (the selected one by default) through the Pulumi CLI, as `npm run status` does: its
 * outputs `endpoint` and `apiKey` (the key vLLM serves with: the secret vllm-fleet:vllmApiKey, or the
 * one the stack made), the key decrypted and kept in memory only.
 */
export async function readStackTarget(stackName?: string): Promise<StackTarget> {
    const { workspace, stack } = await projectStack(stackName);
    if (!stack) {
        throw new Error("no stack selected: give --endpoint URL, or --stack NAME");
    }
    let outputs: Awaited<ReturnType<typeof workspace.stackOutputs>>;
    try {
        outputs = await workspace.stackOutputs(stack);
    } catch (error) {
        // The CLI's own words (e.g. "no stack named 'x' found"), not the whole command line.
        const said = String((error as Error).message).match(/^error: (.*)$/m)?.[1];
        throw new Error(`stack ${stack}: ${said ?? (error as Error).message}`);
    }
    const text = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined);
    return { stack, endpoint: text(outputs.endpoint?.value), apiKey: text(outputs.apiKey?.value) };
}

/**
 * The endpoint and key for the command line's arguments. The stack is read when `--stack` is given or
 * `--endpoint` is not. The key: the variable `--api-key-env` names when given and set, else the stack's
 * (its output apiKey), else VLLM_API_KEY.
 */
export async function resolveTarget(
    args: LoadtestArgs,
    env: NodeJS.ProcessEnv,
    readStack: (stack?: string) => Promise<StackTarget> = readStackTarget,
): Promise<{ endpoint: string; apiKey?: string; apiKeySource: string; stack?: string }> {
    const target = args.stack !== undefined || args.endpoint === undefined ? await readStack(args.stack) : undefined;
    const endpoint = args.endpoint ?? target?.endpoint;
    if (!endpoint) {
        throw new Error(`stack ${target?.stack} has no output endpoint (is it deployed?); give --endpoint URL`);
    }
    const named = args.apiKeyEnv === undefined ? undefined : env[args.apiKeyEnv];
    if (args.apiKeyEnv !== undefined && named) {
        return { endpoint, apiKey: named, apiKeySource: `env ${args.apiKeyEnv}`, stack: target?.stack };
    }
    if (target?.apiKey) {
        return { endpoint, apiKey: target.apiKey, apiKeySource: `stack ${target.stack} output apiKey`, stack: target.stack };
    }
    const fallback = args.apiKeyEnv ?? "VLLM_API_KEY";
    return env[fallback] ? { endpoint, apiKey: env[fallback], apiKeySource: `env ${fallback}`, stack: target?.stack } : { endpoint, apiKeySource: "none", stack: target?.stack };
}

async function main(argv: readonly string[]): Promise<number> {
    // npm runs scripts in the package directory; INIT_CWD is where the user typed the command.
    const args = parseLoadtestArgs(argv, process.env.INIT_CWD ?? process.cwd());
    if (args.help) {
        console.log(LOADTEST_USAGE);
        return 0;
    }
    const target = await resolveTarget(args, process.env);
    const levels = levelsOf({ concurrency: args.concurrency });
    console.log(
        `loadtest ${target.endpoint}${target.stack ? ` (stack ${target.stack})` : ""}: levels ${levels.join(", ")}, ${args.requests} requests each, ` +
            `key ${target.apiKeySource}`,
    );
    let done = 0;
    const report = await runLoadtest({
        endpoint: target.endpoint,
        model: args.model,
        apiKey: target.apiKey,
        apiKeySource: target.apiKeySource,
        api: args.api,
        concurrency: args.concurrency,
        requests: args.requests,
        maxTokens: args.maxTokens,
        prompt: args.prompt,
        timeoutMs: args.timeoutMs,
        onRequest: (record) => {
            done++;
            if (process.stderr.isTTY) {
                process.stderr.write(`\r  concurrency ${record.concurrency}: ${done} requests done${record.error ? `, last failed (${record.error.kind})` : ""}   `);
            }
        },
    });
    if (process.stderr.isTTY) {
        process.stderr.write("\n");
    }
    const written = writeLoadtestOutputs(report, args.out);
    console.log(formatLoadtestTable(report));
    console.log(`wrote ${written.json} and ${written.svg}`);
    return report.levels.some((level) => level.summary.errors > 0) ? 1 : 0;
}

if (require.main === module) {
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (error: Error) => {
            console.error(`loadtest: ${error.message}`);
            process.exit(2);
        },
    );
}
