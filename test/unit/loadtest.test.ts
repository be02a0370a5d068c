/**
 * `npm run loadtest` (tools/loadtest/): its measurements against an HTTP server in this process
 * that streams server-sent events with known delays and token counts (and fails on cue), the
 * percentile maths, the command line, the SVG; and the vLLM stand-in's streaming
 * (test/sim/workload/.../api_server.py), run by python3 with a fake engine.
 */
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as os from "os";
import * as path from "path";
import { afterEach, describe, expect, it } from "vitest";
import { LoadtestArgs, parseLoadtestArgs } from "../../tools/loadtest/cli";
import { RequestRecord, chunkText, readSse } from "../../tools/loadtest/client";
import { formatLoadtestTable, writeLoadtestOutputs } from "../../tools/loadtest/report";
import { LoadtestReport, levelsOf, runLoadtest } from "../../tools/loadtest/run";
import { notSampled } from "../../tools/loadtest/serverSampler";
import { percentile, summarizeLevel } from "../../tools/loadtest/stats";
import { niceStep, renderLoadtestSvg } from "../../tools/loadtest/svg";
import { resolveTarget } from "../../tools/loadtest/target";
import { closedPort } from "./ports";

// ---------------------------------------------------------------------------------------------
// A scripted OpenAI-compatible server

/** What the server does with one streaming request. */
interface Script {
    /** Answer this status with `errorBody` instead of a stream. */
    readonly status?: number;
    readonly errorBody?: string;
    /** Delay before the first token (ms). */
    readonly ttftMs?: number;
    /** Tokens to stream, one chunk each. */
    readonly tokens?: number;
    /** Delay between two tokens (ms). */
    readonly intervalMs?: number;
    /** Send a usage chunk when the request asks for it (default true). */
    readonly usage?: boolean;
    /** Report this many completion tokens in the usage chunk instead of `tokens`. */
    readonly usageTokens?: number;
    /** After this many tokens: `end` the response without [DONE], or `destroy` the socket. */
    readonly cutAfter?: { readonly tokens: number; readonly how: "end" | "destroy" };
    /** Never answer. */
    readonly hang?: boolean;
    /** After the first token, an error event (as vLLM sends when generation fails mid-stream). */
    readonly errorEvent?: string;
}

interface Arrival {
    readonly n: number;
    readonly path: string;
    readonly body: any;
    readonly authorization?: string;
    /** Requests in flight at the server when this one arrived, itself included. */
    readonly inFlight: number;
}

interface ScriptedServer {
    readonly endpoint: string;
    readonly arrivals: Arrival[];
    close(): Promise<void>;
}

const servers: ScriptedServer[] = [];
const children: ChildProcess[] = [];
const tmpDirs: string[] = [];

afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.close()));
    for (const child of children.splice(0)) {
        child.kill("SIGKILL");
    }
    for (const dir of tmpDirs.splice(0)) {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts a server whose n-th streaming request (0-based, over the whole run) follows `script(n)`. */
async function startServer(script: (n: number, arrival: Arrival) => Script, options: { apiKey?: string; models?: string[] } = {}): Promise<ScriptedServer> {
    const arrivals: Arrival[] = [];
    let inFlight = 0;
    let next = 0;
    const server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (chunk) => chunks.push(chunk));
        req.on("end", async () => {
            if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
                res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: "Unauthorized" }));
                return;
            }
            if (req.method === "GET" && req.url === "/v1/models") {
                const data = (options.models ?? ["model-a", "model-b"]).map((id) => ({ id, object: "model" }));
                res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data }));
                return;
            }
            const body = JSON.parse(Buffer.concat(chunks).toString() || "{}");
            inFlight++;
            let counted = true;
            const release = () => {
                if (counted) {
                    counted = false;
                    inFlight--;
                }
            };
            res.on("close", release);
            const arrival: Arrival = { n: next++, path: req.url ?? "", body, authorization: req.headers.authorization, inFlight };
            arrivals.push(arrival);
            const plan = script(arrival.n, arrival);
            if (plan.hang) {
                return;
            }
            if (plan.status !== undefined) {
                res.writeHead(plan.status, { "content-type": "application/json" }).end(plan.errorBody ?? "");
                return;
            }
            const chat = req.url === "/v1/chat/completions";
            const head = { id: `id-${arrival.n}`, object: chat ? "chat.completion.chunk" : "text_completion", created: 1, model: body.model };
            const tokens = plan.tokens ?? 5;
            res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
            const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
            if (chat) {
                // As vLLM: the role first, with empty content, at once.
                send({ ...head, choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] });
            }
            await sleep(plan.ttftMs ?? 0);
            for (let token = 0; token < tokens; token++) {
                if (token > 0) {
                    await sleep(plan.intervalMs ?? 0);
                }
                if (plan.cutAfter && token === plan.cutAfter.tokens) {
                    if (plan.cutAfter.how === "destroy") {
                        res.destroy();
                    } else {
                        res.end();
                    }
                    return;
                }
                if (plan.errorEvent && token === 1) {
                    send({ error: { object: "error", message: plan.errorEvent, type: "InternalServerError", param: null, code: 500 } });
                    break;
                }
                const last = token === tokens - 1 ? "length" : null;
                const piece = `${token === 0 ? "" : " "}w${token}`;
                send({ ...head, choices: [chat ? { index: 0, delta: { content: piece }, finish_reason: last } : { index: 0, text: piece, finish_reason: last }] });
            }
            if ((plan.usage ?? true) && body.stream_options?.include_usage) {
                const completion = plan.usageTokens ?? tokens;
                send({ ...head, choices: [], usage: { prompt_tokens: 3, total_tokens: 3 + completion, completion_tokens: completion } });
            }
            res.end("data: [DONE]\n\n");
        });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const scripted: ScriptedServer = {
        endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
        arrivals,
        close: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    };
    servers.push(scripted);
    return scripted;
}

const ok = (records: readonly RequestRecord[]) => records.filter((record) => !record.error);

// ---------------------------------------------------------------------------------------------

describe("percentile", () => {
    it("interpolates linearly between the closest ranks, as numpy.percentile does", () => {
        const values = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5]; // unsorted on purpose
        expect(percentile(values, 50)).toBeCloseTo(5.5, 12);
        expect(percentile(values, 95)).toBeCloseTo(9.55, 12); // numpy.percentile(range(1, 11), 95)
        expect(percentile(values, 90)).toBeCloseTo(9.1, 12);
        expect(percentile(values, 0)).toBe(1);
        expect(percentile(values, 100)).toBe(10);
        expect(percentile([100, 200], 95)).toBeCloseTo(195, 12);
        expect(percentile([100, 200, 400], 50)).toBe(200);
        expect(values).toEqual([10, 1, 9, 2, 8, 3, 7, 4, 6, 5]); // the input is not sorted in place
    });

    it("gives the one value of one, null for none, and refuses p outside 0..100", () => {
        expect(percentile([42], 95)).toBe(42);
        expect(percentile([], 50)).toBeNull();
        expect(() => percentile([1], 101)).toThrow(/0\.\.100/);
        expect(() => percentile([1], NaN)).toThrow(/0\.\.100/);
    });
});

describe("summarizeLevel", () => {
    const record = (index: number, fields: Partial<RequestRecord>): RequestRecord => ({
        index,
        concurrency: 4,
        startMs: 0,
        ttftMs: 100,
        totalMs: 1000,
        outputTokens: 10,
        tokenSource: "usage",
        contentChunks: 10,
        tokensPerSecond: 10,
        finishReason: "length",
        ...fields,
    });

    it("counts only the successful requests in times and throughput, and the failures by kind", () => {
        const records = [
            record(0, { ttftMs: 100, tokensPerSecond: 20, outputTokens: 10 }),
            record(1, { ttftMs: 300, tokensPerSecond: 40, outputTokens: 30 }),
            record(2, { ttftMs: 5, outputTokens: 999, error: { kind: "http", status: 500, message: "boom" } }),
            record(3, { ttftMs: null, outputTokens: 0, error: { kind: "http", status: 500, message: "boom" } }),
            record(4, { ttftMs: null, outputTokens: 0, error: { kind: "timeout", message: "late" } }),
        ];
        const summary = summarizeLevel(4, records, 2000, 4);
        expect(summary).toMatchObject({ concurrency: 4, requests: 5, ok: 2, errors: 3, wallMs: 2000, peakInFlight: 4, outputTokens: 40 });
        expect(summary.errorsByKind).toEqual({ "HTTP 500": 2, timeout: 1 });
        expect(summary.ttftMs).toEqual({ p50: 200, p95: 290, mean: 200 });
        expect(summary.tokensPerSecondPerRequest.p50).toBe(30);
        expect(summary.outputTokensPerSecond).toBe(20); // 40 tokens in 2 s
        expect(summary.requestsPerSecond).toBe(1); // 2 answered in 2 s
    });

    it("has null percentiles when nothing succeeded", () => {
        const summary = summarizeLevel(1, [record(0, { ttftMs: null, error: { kind: "network", message: "ECONNREFUSED" } })], 10, 1);
        expect(summary.ttftMs).toEqual({ p50: null, p95: null, mean: null });
        expect(summary.outputTokensPerSecond).toBe(0);
    });
});

describe("chunkText", () => {
    it("takes a completion's text, a chat delta's content and its reasoning, not the role", () => {
        expect(chunkText({ choices: [{ index: 0, text: " w1" }] })).toBe(" w1");
        expect(chunkText({ choices: [{ index: 0, delta: { role: "assistant", content: "" } }] })).toBe("");
        expect(chunkText({ choices: [{ index: 0, delta: { reasoning: "hmm", reasoning_content: "hmm" } }] })).toBe("hmm");
        expect(chunkText({ choices: [{ index: 0, delta: { reasoning_content: "older" } }] })).toBe("older");
        expect(chunkText({ choices: [], usage: { completion_tokens: 3 } })).toBe("");
    });
});

describe("readSse", () => {
    it("joins events split anywhere across reads, CRLF or LF, several data lines, and a last event without a blank line", async () => {
        const text = 'data: {"a":1}\r\n\r\n: a comment\nevent: x\ndata: line1\ndata:line2\n\ndata: [DONE]';
        const encoded = new TextEncoder().encode(text);
        // Split into 3-byte reads, so lines and even the bytes of a character are cut.
        const stream = new ReadableStream<Uint8Array>({
            start(controller) {
                for (let at = 0; at < encoded.length; at += 3) {
                    controller.enqueue(encoded.slice(at, at + 3));
                }
                controller.close();
            },
        });
        const events: string[] = [];
        await readSse(stream, (data) => events.push(data));
        expect(events).toEqual(['{"a":1}', "line1\nline2", "[DONE]"]);
    });
});

describe("runLoadtest against a server with known timing", () => {
    it("measures TTFT, tokens/s and throughput the server produced, with C requests really in flight", async () => {
        const TTFT = 200;
        const INTERVAL = 40;
        const TOKENS = 5;
        const server = await startServer(() => ({ ttftMs: TTFT, intervalMs: INTERVAL, tokens: TOKENS }));
        const report = await runLoadtest({ endpoint: server.endpoint, model: "m", concurrency: 4, requests: 8, maxTokens: 64, prompt: "hello" });

        expect(report.levels.map((level) => level.summary.concurrency)).toEqual([1, 4]);
        // The server's view: 8 requests one at a time, then 8 with exactly 4 in flight at the peak.
        expect(server.arrivals).toHaveLength(16);
        expect(Math.max(...server.arrivals.slice(0, 8).map((a) => a.inFlight))).toBe(1);
        expect(Math.max(...server.arrivals.slice(8).map((a) => a.inFlight))).toBe(4);
        expect(report.levels[1].summary.peakInFlight).toBe(4);
        expect(server.arrivals[0].body).toEqual({ model: "m", max_tokens: 64, stream: true, stream_options: { include_usage: true }, prompt: "hello" });
        expect(server.arrivals[0].path).toBe("/v1/completions");

        const decodeFloorMs = (TOKENS - 1) * INTERVAL;
        const NOMINAL_RATE = ((TOKENS - 1) / decodeFloorMs) * 1000;
        for (const level of report.levels) {
            expect(level.requests).toHaveLength(8);
            for (const record of level.requests) {
                expect(record.error).toBeUndefined();
                expect(record.ttftMs!).toBeGreaterThanOrEqual(TTFT - 1); // timers may fire a hair early
                expect(record.ttftMs!).toBeLessThan(TTFT + 1500);
                expect(record.totalMs).toBeGreaterThanOrEqual(TTFT + decodeFloorMs - 1);
                expect(record.outputTokens).toBe(TOKENS);
                expect(record.tokenSource).toBe("usage");
                expect(record.contentChunks).toBe(TOKENS);
                expect(record.finishReason).toBe("length");
                // 4 tokens after the first, sent over at least 160 ms: 25 tokens/s at most, give or take
                // the event loop (server and client share it) being late to see the first one.
                expect(record.tokensPerSecond!).toBeLessThanOrEqual(NOMINAL_RATE * 1.5);
                expect(record.tokensPerSecond!).toBeGreaterThan(2);
            }
            const { summary } = level;
            expect(summary.ttftMs.p50!).toBeGreaterThanOrEqual(TTFT - 1);
            expect(summary.ttftMs.p95!).toBeGreaterThanOrEqual(summary.ttftMs.p50!);
            expect(summary.tokensPerSecondPerRequest.p50!).toBeLessThanOrEqual(NOMINAL_RATE * 1.1);
            expect(summary.tokensPerSecondPerRequest.p50!).toBeGreaterThan(NOMINAL_RATE / 3);
            expect(summary.errors).toBe(0);
            expect(summary.outputTokens).toBe(8 * TOKENS);
            expect(summary.outputTokensPerSecond).toBeCloseTo((8 * TOKENS) / (summary.wallMs / 1000), 9);
            expect(summary.requestsPerSecond).toBeCloseTo(8 / (summary.wallMs / 1000), 9);
        }
        const [one, four] = report.levels.map((level) => level.summary);
        // One at a time: 8 requests back to back; four at a time: two rounds.
        expect(one.wallMs).toBeGreaterThanOrEqual(8 * (TTFT + decodeFloorMs) - 5);
        expect(four.wallMs).toBeGreaterThanOrEqual(2 * (TTFT + decodeFloorMs) - 5);
        expect(four.wallMs).toBeLessThan(one.wallMs / 2);
        expect(four.outputTokensPerSecond).toBeGreaterThan(2 * one.outputTokensPerSecond);
        expect(four.requestsPerSecond).toBeLessThanOrEqual(4 / ((TTFT + decodeFloorMs) / 1000) * 1.02);
        // Requests of a level start as slots free: at concurrency 1 each starts after the one before ended.
        const sequential = report.levels[0].requests;
        for (let i = 1; i < sequential.length; i++) {
            expect(sequential[i].startMs).toBeGreaterThanOrEqual(sequential[i - 1].startMs + sequential[i - 1].totalMs - 1);
        }
    });

    it("asks /v1/models for the model when none is given, and sends the key as a bearer token", async () => {
        const server = await startServer(() => ({ tokens: 2 }), { apiKey: "sk-secret-123", models: ["served-model", "other"] });
        const report = await runLoadtest({ endpoint: `${server.endpoint}/`, apiKey: "sk-secret-123", apiKeySource: "env VLLM_API_KEY", concurrency: 2, requests: 2 });
        expect(report.model).toBe("served-model");
        expect(report.endpoint).toBe(server.endpoint);
        expect(server.arrivals.every((a) => a.body.model === "served-model" && a.authorization === "Bearer sk-secret-123")).toBe(true);
        expect(report.apiKeySource).toBe("env VLLM_API_KEY");
        expect(JSON.stringify(report)).not.toContain("sk-secret-123");
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "loadtest-"));
        tmpDirs.push(dir);
        const written = writeLoadtestOutputs(report, path.join(dir, "out"));
        expect(fs.readFileSync(written.json, "utf8")).not.toContain("sk-secret-123");
        expect(fs.readFileSync(written.svg, "utf8")).not.toContain("sk-secret-123");
    });

    it("counts the chunks with text when the server sends no usage, and ignores the chat role chunk for TTFT", async () => {
        const server = await startServer(() => ({ ttftMs: 150, intervalMs: 10, tokens: 7, usage: false }));
        const report = await runLoadtest({ endpoint: server.endpoint, model: "m", api: "chat", concurrency: 1, requests: 3, prompt: "hi" });
        expect(report.levels).toHaveLength(1); // concurrency 1: one level
        expect(server.arrivals[0].path).toBe("/v1/chat/completions");
        expect(server.arrivals[0].body.messages).toEqual([{ role: "user", content: "hi" }]);
        for (const record of report.levels[0].requests) {
            expect(record.error).toBeUndefined();
            expect(record.tokenSource).toBe("chunks");
            expect(record.outputTokens).toBe(7);
            // The role chunk (empty content) came at once; the first token only after 150 ms.
            expect(record.ttftMs!).toBeGreaterThanOrEqual(149);
        }
    });

    it("takes the token count from usage when it differs from the chunks (several tokens per chunk)", async () => {
        const server = await startServer(() => ({ ttftMs: 0, intervalMs: 20, tokens: 4, usageTokens: 12 }));
        const report = await runLoadtest({ endpoint: server.endpoint, model: "m", concurrency: 1, requests: 1 });
        const [record] = report.levels[0].requests;
        expect(record).toMatchObject({ outputTokens: 12, contentChunks: 4, tokenSource: "usage" });
        // 11 tokens after the first over at least 60 ms.
        expect(record.tokensPerSecond!).toBeCloseTo(11 / ((record.totalMs - record.ttftMs!) / 1000), 9);
    });

    it("records HTTP errors with the status and the body, broken streams, refused connections and timeouts", async () => {
        const server = await startServer((n) => {
            switch (n) {
                case 1:
                    return { status: 500, errorBody: JSON.stringify({ error: { message: "EngineCore encountered an issue", code: 500 } }) };
                case 2:
                    return { status: 429, errorBody: "slow down" };
                case 3:
                    return { tokens: 5, cutAfter: { tokens: 2, how: "end" } };
                case 4:
                    return { tokens: 5, cutAfter: { tokens: 2, how: "destroy" } };
                case 5:
                    return { hang: true };
                case 6:
                    return { tokens: 5, errorEvent: "Engine died mid-generation" };
                default:
                    return { tokens: 3 };
            }
        });
        const report = await runLoadtest({ endpoint: server.endpoint, model: "m", concurrency: 1, requests: 9, timeoutMs: 400 });
        const records = report.levels[0].requests;
        expect(records.map((record) => record.error?.kind ?? "ok")).toEqual(["ok", "http", "http", "stream", "network", "timeout", "stream", "ok", "ok"]);
        expect(records[1].error).toMatchObject({ status: 500 });
        expect(records[1].error!.message).toContain("EngineCore encountered an issue");
        expect(records[2].error).toEqual({ kind: "http", status: 429, message: "slow down" });
        expect(records[3].error!.message).toContain("[DONE]");
        expect(records[3].ttftMs).not.toBeNull(); // two tokens came before the stream ended
        expect(records[5].totalMs).toBeGreaterThanOrEqual(399);
        expect(records[5].totalMs).toBeLessThan(2000);
        expect(records[6].error!.message).toBe("Engine died mid-generation");
        const { summary } = report.levels[0];
        expect(summary).toMatchObject({ requests: 9, ok: 3, errors: 6, outputTokens: 9 });
        expect(summary.errorsByKind).toEqual({ "HTTP 500": 1, "HTTP 429": 1, stream: 2, network: 1, timeout: 1 });
        const table = formatLoadtestTable(report);
        expect(table).toMatch(/concurrency 1: 1 × HTTP 500, 1 × HTTP 429, 2 × stream, 1 × network, 1 × timeout; first: HTTP 500 .*EngineCore/);

        // A port nobody listens on: every request a network error, and the run still reports.
        const refused = await runLoadtest({ endpoint: `http://127.0.0.1:${await closedPort()}/v1`, model: "m", concurrency: 2, requests: 2 });
        expect(refused.levels.map((level) => level.summary.errorsByKind)).toEqual([{ network: 2 }, { network: 2 }]);
        expect(refused.levels[0].requests[0].error!.message).toMatch(/ECONNREFUSED/);
    });

    it("counts 401s as errors with a wrong key, and says so when the model list is refused", async () => {
        const server = await startServer(() => ({ tokens: 2 }), { apiKey: "right" });
        const report = await runLoadtest({ endpoint: server.endpoint, model: "m", apiKey: "wrong", concurrency: 3, requests: 3 });
        expect(report.levels.map((level) => level.summary.errorsByKind)).toEqual([{ "HTTP 401": 3 }, { "HTTP 401": 3 }]);
        expect(report.levels[1].requests[0].error!.message).toContain("Unauthorized");
        await expect(runLoadtest({ endpoint: server.endpoint, concurrency: 1, requests: 1 })).rejects.toThrow(/GET http:\/\/127\.0\.0\.1:\d+\/v1\/models: HTTP 401/);
    });
});

// ---------------------------------------------------------------------------------------------

describe("the command line", () => {
    const cwd = "/home/user/work";

    it("has the documented defaults", () => {
        expect(parseLoadtestArgs([], cwd)).toEqual({
            endpoint: undefined,
            stack: undefined,
            model: undefined,
            api: "completions",
            concurrency: 8,
            requests: 16,
            maxTokens: 128,
            prompt: expect.any(String),
            timeoutMs: 120_000,
            out: "/home/user/work/loadtest-out",
            apiKeyEnv: undefined,
            help: false,
        });
    });

    it("reads every option, in both spellings", () => {
        const args = parseLoadtestArgs(
            ["--endpoint", "http://h:8000/v1", "--stack=sim", "--model", "tiny-moe", "--api", "chat", "--concurrency", "4", "--requests=10", "--max-tokens", "32", "--prompt=--a prompt-", "--timeout", "2.5", "--out", "res", "--api-key-env", "MY_KEY"],
            cwd,
        );
        expect(args).toMatchObject({ endpoint: "http://h:8000/v1", stack: "sim", model: "tiny-moe", api: "chat", concurrency: 4, requests: 10, maxTokens: 32, prompt: "--a prompt-", timeoutMs: 2500, out: "/home/user/work/res", apiKeyEnv: "MY_KEY" });
        expect(levelsOf({ concurrency: 4 })).toEqual([1, 4]);
        expect(levelsOf({ concurrency: 1 })).toEqual([1]);
    });

    it("refuses bad values naming the flag and what it expected", () => {
        const refuse = (argv: string[]) => expect(() => parseLoadtestArgs(argv, cwd));
        refuse(["--concurrency", "0"]).toThrow('--concurrency: expected a whole number of at least 1, got "0"');
        refuse(["--requests", "ten"]).toThrow('--requests: expected a whole number of at least 1, got "ten"');
        refuse(["--max-tokens", "1.5"]).toThrow("--max-tokens: expected a whole number");
        refuse(["--endpoint"]).toThrow("--endpoint: expected a value after it");
        refuse(["--endpoint", "--stack", "sim"]).toThrow("--endpoint: expected a value after it");
        refuse(["--endpoint", "ftp://h/v1"]).toThrow('--endpoint: expected an http(s) URL such as http://host:8000/v1, got "ftp://h/v1"');
        refuse(["--api", "responses"]).toThrow('--api: expected completions or chat, got "responses"');
        refuse(["--timeout", "0"]).toThrow("--timeout: expected a number of seconds above 0");
        refuse(["--api-key-env", "MY-KEY"]).toThrow("--api-key-env: expected the name of an environment variable");
        refuse(["--concurency", "4"]).toThrow(/unknown option "--concurency"; expected one of .*--concurrency/);
        refuse(["--model", "a", "--model", "b"]).toThrow("--model: given twice");
    });

    it("reads the stack for the endpoint and its key; an explicit endpoint alone reads no stack", async () => {
        const args = (argv: string[]): LoadtestArgs => parseLoadtestArgs(argv, cwd);
        const stacksRead: (string | undefined)[] = [];
        const readStack = async (stack?: string) => {
            stacksRead.push(stack);
            return { stack: stack ?? "selected", endpoint: "http://10.230.0.10:8000/v1", apiKey: "stack-key" };
        };
        const env = { VLLM_API_KEY: "env-key", OTHER: "other-key" };

        expect(await resolveTarget(args([]), env, readStack)).toEqual({
            endpoint: "http://10.230.0.10:8000/v1",
            apiKey: "stack-key",
            apiKeySource: "stack selected output apiKey",
            stack: "selected",
            server: expect.anything(),
        });
        expect(await resolveTarget(args(["--endpoint", "http://x:1/v1"]), env, readStack)).toEqual({ endpoint: "http://x:1/v1", apiKey: "env-key", apiKeySource: "env VLLM_API_KEY", stack: undefined, server: expect.anything() });
        expect(stacksRead).toEqual([undefined]);
        expect(await resolveTarget(args(["--endpoint", "http://x:1/v1", "--stack", "sim"]), env, readStack)).toMatchObject({ endpoint: "http://x:1/v1", apiKey: "stack-key", stack: "sim" });
        expect(await resolveTarget(args(["--api-key-env", "OTHER"]), env, readStack)).toMatchObject({ apiKey: "other-key", apiKeySource: "env OTHER" });
        expect(await resolveTarget(args(["--endpoint", "http://x:1/v1"]), {}, readStack)).toEqual({ endpoint: "http://x:1/v1", apiKeySource: "none", stack: undefined, server: expect.anything() });

        const madeKey = async () => ({ stack: "sim", endpoint: "http://e/v1", apiKey: "made-key" });
        expect(await resolveTarget(args([]), env, madeKey)).toMatchObject({ apiKey: "made-key", apiKeySource: "stack sim output apiKey" });
        const noKey = async () => ({ stack: "sim", endpoint: "http://e/v1" });
        expect(await resolveTarget(args(["--stack", "sim"]), env, noKey)).toMatchObject({ apiKey: "env-key", apiKeySource: "env VLLM_API_KEY" });
        const notDeployed = async () => ({ stack: "sim" });
        await expect(resolveTarget(args(["--stack", "sim"]), env, notDeployed)).rejects.toThrow("stack sim has no output endpoint (is it deployed?); give --endpoint URL");

        // A stack of services: --service takes that service's endpoint and model.
        const fleet = async () => ({
            stack: "fleet",
            endpoint: "http://n1:8000/v1",
            apiKey: "fleet-key",
            services: { big: { endpoint: "http://n1:8000/v1", model: "big" }, coder: { endpoint: "http://n3:8001/v1", model: "coder" } },
        });
        expect(await resolveTarget(args(["--service", "coder"]), env, fleet)).toEqual({
            endpoint: "http://n3:8001/v1",
            model: "coder",
            apiKey: "fleet-key",
            apiKeySource: "stack fleet output apiKey",
            stack: "fleet",
            server: expect.anything(),
        });
        expect(await resolveTarget(args(["--service", "coder", "--model", "other"]), env, fleet)).toMatchObject({ endpoint: "http://n3:8001/v1", model: "other" });
        await expect(resolveTarget(args(["--service", "chat"]), env, fleet)).rejects.toThrow("--service: stack fleet has no service chat; expected one of: big, coder");
    });
});

// ---------------------------------------------------------------------------------------------

describe("renderLoadtestSvg", () => {
    const level = (concurrency: number, ttft: number | null, errors: number) => ({
        summary: summarizeLevel(
            concurrency,
            [
                ...(ttft === null ? [] : [{ index: 0, concurrency, startMs: 0, ttftMs: ttft, totalMs: ttft + 100, outputTokens: 11, tokenSource: "usage" as const, contentChunks: 11, tokensPerSecond: 100, finishReason: "length" }]),
                ...Array.from({ length: errors }, (_, i) => ({ index: i + 1, concurrency, startMs: 0, ttftMs: null, totalMs: 5, outputTokens: 0, tokenSource: "chunks" as const, contentChunks: 0, tokensPerSecond: null, finishReason: null, error: { kind: "http" as const, status: 500, message: "x" } })),
            ],
            1000,
            concurrency,
        ),
        requests: [],
    });
    const report: LoadtestReport = {
        tool: "vllm-fleet loadtest",
        when: "2026-12-02T20:00:00.000Z",
        endpoint: "http://10.230.0.10:8000/v1",
        model: "tiny<moe>&co",
        api: "completions",
        requestsPerLevel: 16,
        maxTokens: 128,
        prompt: "p",
        timeoutMs: 1000,
        apiKeySource: "none",
        levels: [level(1, 250, 0), level(8, 900, 2), level(16, null, 3)],
        server: notSampled("no stack read with --endpoint alone: give --prometheus URL or --metrics URL"),
    };

    it("draws a bar per level and series with its value, the axes and their labels, failures and missing values", () => {
        const svg = renderLoadtestSvg(report);
        expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
        expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
        expect(svg).toContain("serving benchmark, tiny&lt;moe&gt;&amp;co");
        expect(svg).not.toContain("tiny<moe>");
        for (const label of ["time to first token", "output tokens per second", "milliseconds", "tokens / second", "concurrency (requests in flight)", "p50", "p95", "per request, p50", "total of the level"]) {
            expect(svg).toContain(label);
        }
        // Two levels answered: 2 panels x 2 series x 2 levels bars, each with a tooltip; the third level has none.
        expect(svg.match(/<rect [^>]*><title>/g)).toHaveLength(8);
        expect(svg.match(/>n\/a</g)).toHaveLength(4);
        expect(svg).toContain("concurrency 8: time to first token, p95: 900 milliseconds");
        expect(svg).toContain(">2 of 3 failed<");
        expect(svg).toContain(">3 of 3 failed<");
        expect(svg).toContain("5 failed");
        // The TTFT axis runs to a round number above the tallest bar.
        expect(svg).toMatch(/text-anchor="end" fill="#868e96">1000</);
        // The server's side, not sampled: one line saying why, and no panel of it.
        expect(svg).toContain("server side: not sampled (no stack read with --endpoint alone: give --prometheus URL or --metrics URL)");
        expect(svg).not.toContain("server: requests running and waiting");
    });

    it("picks round tick steps", () => {
        expect(niceStep(900)).toBe(200);
        expect(niceStep(50)).toBe(10);
        expect(niceStep(0.7)).toBe(0.2);
        expect(niceStep(0)).toBe(1);
    });
});

// ---------------------------------------------------------------------------------------------
// The vLLM stand-in's stream, measured by the same code

const WORKLOAD = path.join(__dirname, "..", "sim", "workload");
const STANDIN_SERVER = `
import json, socket, sys, types
sys.path.insert(0, sys.argv[1])
from vllm.entrypoints.openai import api_server


class Engine:  # two ranks that always answer
    def execute(self, request_id):
        return [{"rank": 0, "ip": "192.168.200.10"}, {"rank": 1, "ip": "192.168.200.11"}]


server = api_server.Server(types.SimpleNamespace(api_key=None), Engine(), ["tiny-moe"], "/models/tiny-moe", 4096, 643232)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
httpd = api_server._HTTPServer(sock, server.handler())
print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
httpd.serve_forever()
`;

/** Starts the stand-in's HTTP server with a fake engine; resolves its /v1 endpoint. */
async function startStandin(tokenIntervalSeconds: number): Promise<string> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "loadtest-standin-"));
    tmpDirs.push(dir);
    const script = path.join(dir, "serve.py");
    fs.writeFileSync(script, STANDIN_SERVER);
    const child = spawn("python3", [script, WORKLOAD], {
        env: { ...process.env, VLLM_SIM_TOKEN_INTERVAL: String(tokenIntervalSeconds), PYTHONDONTWRITEBYTECODE: "1" },
        stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    return new Promise<string>((resolve, reject) => {
        let stdout = "";
        child.stdout!.on("data", (chunk) => {
            stdout += chunk;
            const line = stdout.split("\n")[0];
            if (stdout.includes("\n")) {
                resolve(`http://127.0.0.1:${JSON.parse(line).port}/v1`);
            }
        });
        child.on("exit", (code) => reject(new Error(`the stand-in exited (${code}): ${stderr}`)));
    });
}

/** The raw events of one streaming request. */
async function rawStream(url: string, body: object): Promise<{ contentType: string; events: string[] }> {
    const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const events: string[] = [];
    await readSse(response.body!, (data) => events.push(data));
    return { contentType: response.headers.get("content-type") ?? "", events };
}

describe("the vLLM stand-in's streaming", () => {
    const RANKS_TEXT = "ranks: 0@192.168.200.10 1@192.168.200.11";

    it("streams a chunk per token as vLLM does, the text joined being the non-streaming text", async () => {
        const endpoint = await startStandin(0.01);
        const plain = (await (await fetch(`${endpoint}/completions`, { method: "POST", body: JSON.stringify({ model: "tiny-moe", prompt: "hi" }) })).json()) as any;
        expect(plain.choices[0].text).toBe(RANKS_TEXT);
        expect(plain.usage.completion_tokens).toBe(3);

        const completion = await rawStream(`${endpoint}/completions`, { model: "tiny-moe", prompt: "hi", stream: true, stream_options: { include_usage: true } });
        expect(completion.contentType).toBe("text/event-stream; charset=utf-8");
        expect(completion.events.at(-1)).toBe("[DONE]");
        const chunks = completion.events.slice(0, -1).map((event) => JSON.parse(event));
        expect(chunks).toHaveLength(4); // 3 tokens + usage
        expect(chunks.slice(0, 3).map((chunk) => chunk.choices[0].text).join("")).toBe(RANKS_TEXT);
        expect(chunks.slice(0, 3).map((chunk) => chunk.choices[0].finish_reason)).toEqual([null, null, "length"]);
        expect(Object.keys(chunks[0])).toEqual(["id", "object", "created", "model", "choices", "usage"]);
        expect(chunks[0]).toMatchObject({ object: "text_completion", model: "tiny-moe", usage: null });
        expect(chunks[0].choices[0]).toEqual({ index: 0, text: "ranks:", logprobs: null, finish_reason: null, stop_reason: null, prompt_token_ids: null, token_ids: null });
        expect(chunks[3]).toEqual({ id: chunks[0].id, object: "text_completion", created: chunks[0].created, model: "tiny-moe", choices: [], usage: { prompt_tokens: 1, total_tokens: 4, completion_tokens: 3 } });

        const chat = await rawStream(`${endpoint}/chat/completions`, { model: "tiny-moe", messages: [{ role: "user", content: "hi" }], stream: true });
        const chatChunks = chat.events.slice(0, -1).map((event) => JSON.parse(event));
        expect(chat.events.at(-1)).toBe("[DONE]");
        expect(chatChunks).toHaveLength(4); // role + 3 tokens, no usage unasked
        expect(chatChunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.id.startsWith("chatcmpl-"))).toBe(true);
        expect(chatChunks[0].choices[0]).toEqual({ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null });
        expect(chatChunks.slice(1).map((chunk) => chunk.choices[0].delta.content).join("")).toBe(RANKS_TEXT);
        expect(chatChunks[3].choices[0]).toEqual({ index: 0, delta: { content: " 1@192.168.200.11" }, logprobs: null, finish_reason: "stop", stop_reason: null, token_ids: null });
    });

    it("is paced per token, which the load test measures", async () => {
        const INTERVAL_S = 0.1;
        const endpoint = await startStandin(INTERVAL_S);
        for (const api of ["completions", "chat"] as const) {
            const report = await runLoadtest({ endpoint, api, concurrency: 3, requests: 3 });
            expect(report.model).toBe("tiny-moe");
            for (const level of report.levels) {
                expect(level.summary.errors).toBe(0);
                for (const record of level.requests) {
                    expect(record).toMatchObject({ outputTokens: 3, contentChunks: 3, tokenSource: "usage" });
                    expect(record.ttftMs!).toBeGreaterThanOrEqual(INTERVAL_S * 1000 - 1);
                    // 2 tokens after the first, 100 ms apart: 10 tokens/s at most, give or take jitter.
                    expect(record.tokensPerSecond!).toBeLessThanOrEqual(15);
                    expect(record.tokensPerSecond!).toBeGreaterThan(1);
                }
            }
            expect(report.levels[0].summary.tokensPerSecondPerRequest.p50!).toBeLessThanOrEqual(11);
            // Three in flight at once take about as long as one (the stand-in serves them in threads).
            expect(report.levels[1].summary.wallMs).toBeLessThan(report.levels[0].summary.wallMs / 1.5);
        }
    });
});
