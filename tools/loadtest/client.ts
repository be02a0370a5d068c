/**
 * The load test's requests: streaming completions to an OpenAI-compatible endpoint (HTTP, server-sent
 * events), each measured on its own: the time to the first generated token, the total time, the
 * output tokens and the decode rate after the first token. Only Node's built-ins (fetch).
 */
import { performance } from "perf_hooks";

/** Which OpenAI route the requests go to. */
export type LoadtestApi = "completions" | "chat";

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

const EXCERPT_CHARS = 200;

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
export interface RequestPlan {
    readonly url: string;
    readonly headers: Record<string, string>;
    readonly body: string;
    readonly timeoutMs: number;
}

/** The request every one of a run's requests is: the route, the headers (with the key) and the streaming body. */
export function requestPlan(endpoint: string, model: string, api: LoadtestApi, prompt: string, maxTokens: number, apiKey: string | undefined, timeoutMs: number): RequestPlan {
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
export async function measureRequest(plan: RequestPlan, index: number, concurrency: number, levelStart: number): Promise<RequestRecord> {
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
