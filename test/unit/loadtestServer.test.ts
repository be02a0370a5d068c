/**
 * The load test's server side (tools/loadtest/server*.ts): what the server saw during the run, read
 * every second from Prometheus or from the service's own /metrics, against stand-ins in this
 * process: a vLLM stand-in that serves streaming completions with a fixed capacity (the requests
 * beyond it wait) and a vLLM 0.32 /metrics page of that live state, and a Prometheus stand-in that
 * scrapes such pages (with the fleet's target labels) when asked and answers instant queries.
 */
import * as fs from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as os from "os";
import * as path from "path";
import { afterEach, describe, expect, it } from "vitest";
import { parseExposition } from "../../tools/top/exposition";
import { parseLoadtestArgs } from "../../tools/loadtest/cli";
import { formatLoadtestTable, formatServerLines, writeLoadtestOutputs } from "../../tools/loadtest/report";
import { LoadtestReport, runLoadtest } from "../../tools/loadtest/run";
import { ServerSample, ServerSide, notSampled, serverLevels } from "../../tools/loadtest/serverSampler";
import { ServerOptions, figuresOfPage, metricsSource, prometheusQueries, serverCandidates } from "../../tools/loadtest/serverSources";
import { renderLoadtestSvg } from "../../tools/loadtest/svg";
import { StackTarget, resolveTarget } from "../../tools/loadtest/target";
import { closedPort } from "./ports";

const closers: (() => Promise<void>)[] = [];
const tmpDirs: string[] = [];

afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
    for (const dir of tmpDirs.splice(0)) {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function listen(server: http.Server): Promise<string> {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(
        () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    );
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

// ---------------------------------------------------------------------------------------------
// The vLLM stand-in: completions with a capacity, and its /metrics

/** How its /metrics answers: the page, an HTTP 500, never, or a page that is not the format. */
type MetricsMode = "page" | "error" | "hang" | "html";

interface VllmStandIn {
    readonly origin: string;
    readonly endpoint: string;
    readonly metricsUrl: string;
    /** Every GET /metrics: when (ms since start), with which Authorization. */
    readonly metricsHits: { at: number; authorization?: string }[];
    /** The most /metrics requests it had in flight at once. */
    peakMetricsInFlight: number;
    mode: MetricsMode;
    /** The page as it is now (what a scrape reads). */
    page(): string;
}

/**
 * The KV cache's use as the stand-in reports it: its requests split over two engines (engine 0 takes
 * the odd one), each running one 10 % of an engine's cache, each waiting one 5 %.
 */
const engineSplit = (count: number) => [Math.ceil(count / 2), Math.floor(count / 2)];
const expectedKvPercent = (running: number, waiting: number) => Math.round((0.1 * engineSplit(running)[0] + 0.05 * engineSplit(waiting)[0]) * 100 * 1e6) / 1e6;

async function startVllmStandIn(options: { model: string; capacity: number; ttftMs: number; tokens: number; intervalMs: number; apiKey?: string }): Promise<VllmStandIn> {
    const started = Date.now();
    let running = 0;
    const queue: (() => void)[] = [];
    let generated = 0;
    let metricsInFlight = 0;
    const acquire = () => (running < options.capacity ? (running++, Promise.resolve()) : new Promise<void>((resolve) => queue.push(resolve)));
    // A slot freed goes to the first one waiting, as vLLM's scheduler takes its queue in order.
    const release = () => (queue.length > 0 ? queue.shift()!() : running--);
    const page = () => {
        const waiting = queue.length;
        const labels = (engine: number, extra = "") => `{engine="${engine}"${extra},model_name="${options.model}"}`;
        const lines = ["# HELP python_gc_objects_collected_total Objects collected during gc", "# TYPE python_gc_objects_collected_total counter", 'python_gc_objects_collected_total{generation="0"} 1234.0'];
        const family = (name: string, type: string, samples: string[]) => lines.push(`# HELP ${name} ${name}.`, `# TYPE ${name} ${type}`, ...samples);
        family("vllm:num_requests_running", "gauge", [0, 1].map((engine) => `vllm:num_requests_running${labels(engine)} ${engineSplit(running)[engine].toFixed(1)}`));
        family("vllm:num_requests_waiting", "gauge", [0, 1].map((engine) => `vllm:num_requests_waiting${labels(engine)} ${engineSplit(waiting)[engine].toFixed(1)}`));
        family(
            "vllm:kv_cache_usage_perc",
            "gauge",
            [0, 1].map((engine) => `vllm:kv_cache_usage_perc${labels(engine)} ${0.1 * engineSplit(running)[engine] + 0.05 * engineSplit(waiting)[engine]}`),
        );
        family("vllm:generation_tokens", "counter", [`vllm:generation_tokens_total${labels(0)} ${generated.toFixed(1)}`, `vllm:generation_tokens_created${labels(0)} 1738000000.5`]);
        family("vllm:time_to_first_token_seconds", "histogram", [`vllm:time_to_first_token_seconds_bucket${labels(0, ',le="+Inf"')} ${generated.toFixed(1)}`, `vllm:time_to_first_token_seconds_count${labels(0)} 0.0`]);
        return `${lines.join("\n")}\n`;
    };
    const standIn: VllmStandIn = { origin: "", endpoint: "", metricsUrl: "", metricsHits: [], peakMetricsInFlight: 0, mode: "page", page };
    const server = http.createServer((req, res) => {
        req.resume();
        req.on("end", async () => {
            if (req.url === "/metrics") {
                standIn.metricsHits.push({ at: Date.now() - started, authorization: req.headers.authorization });
                if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
                    res.writeHead(401, { "content-type": "application/json" }).end('{"error":"Unauthorized"}');
                    return;
                }
                metricsInFlight++;
                standIn.peakMetricsInFlight = Math.max(standIn.peakMetricsInFlight, metricsInFlight);
                res.on("close", () => metricsInFlight--);
                switch (standIn.mode) {
                    case "hang":
                        return;
                    case "error":
                        res.writeHead(500).end("Internal Server Error");
                        return;
                    case "html":
                        res.writeHead(200, { "content-type": "text/html" }).end("<html><body>502 Bad Gateway</body></html>\n");
                        return;
                    default:
                        res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(page());
                        return;
                }
            }
            if (req.method !== "POST" || req.url !== "/v1/completions") {
                res.writeHead(404).end();
                return;
            }
            await acquire();
            res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
            await sleep(options.ttftMs);
            for (let token = 0; token < options.tokens; token++) {
                if (token > 0) {
                    await sleep(options.intervalMs);
                }
                generated++;
                res.write(`data: ${JSON.stringify({ id: "c", object: "text_completion", model: options.model, choices: [{ index: 0, text: ` w${token}`, finish_reason: token === options.tokens - 1 ? "length" : null }] })}\n\n`);
            }
            release();
            res.end("data: [DONE]\n\n");
        });
    });
    const origin = await listen(server);
    return Object.assign(standIn, { origin, endpoint: `${origin}/v1`, metricsUrl: `${origin}/metrics` });
}

// ---------------------------------------------------------------------------------------------
// The Prometheus stand-in: scrapes its targets' pages when asked, answers instant queries

interface PrometheusStandIn {
    readonly url: string;
    /** Every query asked, in order. */
    readonly queries: string[];
}

/** The fleet's targets: each a vLLM stand-in with the labels Prometheus gives it (job, service, model). */
async function startPrometheusStandIn(targets: readonly { readonly service: string; readonly model: string; readonly standIn: VllmStandIn }[]): Promise<PrometheusStandIn> {
    const queries: string[] = [];
    const answer = (res: http.ServerResponse, status: number, body: object) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    const server = http.createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://x");
        if (url.pathname !== "/api/v1/query") {
            answer(res, 404, { status: "error", errorType: "not_found", error: "not found" });
            return;
        }
        const query = url.searchParams.get("query") ?? "";
        queries.push(query);
        // The queries the load test asks: `<sum|max> by (service) (<series>{<matchers>})[ * 100]`.
        const parsed = /^(sum|max) by \(service\) \((vllm:[a-z_]+)\{([^}]*)\}\)( \* 100)?$/.exec(query);
        if (!parsed) {
            answer(res, 400, { status: "error", errorType: "bad_data", error: `1:1: parse error: unexpected ${JSON.stringify(query.slice(0, 10))}` });
            return;
        }
        const [, aggregation, series, matcherText, times100] = parsed;
        const matchers = [...matcherText.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, label, value]) => [label, JSON.parse(`"${value}"`) as string] as const);
        const byService = new Map<string, number[]>();
        for (const target of targets) {
            const labels: Record<string, string> = { job: "vllm", service: target.service, model: target.model };
            for (const sample of parseExposition(target.standIn.page()).samples.filter((sample) => sample.name === series)) {
                const all = { ...sample.labels, ...labels };
                if (matchers.every(([label, value]) => all[label] === value)) {
                    byService.set(target.service, [...(byService.get(target.service) ?? []), sample.value]);
                }
            }
        }
        const result = [...byService].map(([service, values]) => {
            const value = (aggregation === "sum" ? values.reduce((a, b) => a + b, 0) : Math.max(...values)) * (times100 ? 100 : 1);
            return { metric: { service }, value: [Date.now() / 1000, String(value)] };
        });
        answer(res, 200, { status: "success", data: { resultType: "vector", result } });
    });
    return { url: await listen(server), queries };
}

const STAND_IN = { model: "chat-moe", capacity: 2, ttftMs: 60, tokens: 6, intervalMs: 40 } as const;

/** Samples within a level's span but clear of its edges (a read there may see the next level's arrivals). */
const inside = (server: ServerSide, level: number) => {
    const span = server.levels[level];
    return server.samples.filter((sample) => sample.t > span.fromS + 0.05 && sample.t < span.toS - 0.05);
};

// ---------------------------------------------------------------------------------------------

describe("the server's side from its own /metrics", () => {
    it("reads running, waiting (added over the engines) and KV % (the highest) every interval, with the key, and peaks per level", async () => {
        const vllm = await startVllmStandIn({ ...STAND_IN, apiKey: "sk-fleet" });
        const report = await runLoadtest({
            endpoint: vllm.endpoint,
            model: "chat-moe",
            apiKey: "sk-fleet",
            concurrency: 4,
            requests: 6,
            server: { services: { chat: { endpoint: vllm.endpoint, model: "chat-moe" } }, apiKey: "sk-fleet", intervalMs: 100 },
        });
        const { server } = report;
        expect(server.source).toBe(`metrics ${vllm.metricsUrl}`);
        expect(server.reason).toBe("the stack has no monitoring");
        expect(server.failed).toBe(0);
        expect(vllm.metricsHits.every((hit) => hit.authorization === "Bearer sk-fleet")).toBe(true);
        // The load is the same with the sampling beside it: no error, 4 in flight at the second level.
        expect(report.levels.map((level) => level.summary.errors)).toEqual([0, 0]);
        expect(report.levels[1].summary.peakInFlight).toBe(4);

        const end = server.levels[1].toS;
        expect(server.samples.length).toBeGreaterThanOrEqual(Math.floor(end / 0.1) - 3);
        expect(server.samples.length).toBeLessThanOrEqual(Math.ceil(end / 0.1) + 1);
        expect(server.samples[0].t).toBeLessThan(0.05);
        for (let index = 1; index < server.samples.length; index++) {
            expect(server.samples[index].t - server.samples[index - 1].t).toBeGreaterThanOrEqual(0.099);
        }
        // One page per read: its figures belong together.
        for (const sample of server.samples) {
            expect(sample.kvPercent).toBeCloseTo(expectedKvPercent(sample.running, sample.waiting), 9);
        }
        // One at a time: one running, none waiting; four at a time on a capacity of two: two and two.
        expect(inside(server, 0).every((sample) => sample.running <= 1 && sample.waiting === 0)).toBe(true);
        expect(inside(server, 0).some((sample) => sample.running === 1)).toBe(true);
        expect(server.levels.map((level) => level.concurrency)).toEqual([1, 4]);
        expect(server.levels[1]).toMatchObject({ peakRunning: 2, peakWaiting: 2 });
        expect(server.levels[1].peakKvPercent).toBeCloseTo(15, 9); // 0.15000000000000002 on the page
        expect(server.levels[0].fromS).toBeCloseTo(0, 2);
        expect(server.levels[1].fromS).toBeCloseTo(server.levels[0].toS, 2);
        expect(server.levels[0].samples + server.levels[1].samples).toBe(server.samples.length);

        const table = formatLoadtestTable(report);
        expect(table).toContain(`server side, from metrics ${vllm.metricsUrl}: ${server.samples.length} samples every 0.1 s (the stack has no monitoring)`);
        expect(table).toContain("  concurrency 4: peak running 2, peak waiting 2, peak KV 15 %");
    });

    it("reads at most once a second by default, one read at a time, each given up after 2 s and counted, and the load goes on", async () => {
        const vllm = await startVllmStandIn({ ...STAND_IN, tokens: 10, intervalMs: 100 });
        const started = Date.now();
        const run = runLoadtest({ endpoint: vllm.endpoint, model: "chat-moe", concurrency: 2, requests: 3, server: { metrics: [vllm.metricsUrl] } });
        // The first reads are answered; then /metrics stops answering.
        await sleep(1500);
        vllm.mode = "hang";
        const report = await run;
        const tookMs = Date.now() - started;
        const { server } = report;
        expect(server.source).toBe(`metrics ${vllm.metricsUrl}`);
        expect(server.reason).toBeUndefined();
        expect(report.levels.every((level) => level.summary.errors === 0)).toBe(true);
        // Reads on a 1 s grid, never two in flight: at 0 s (the one that chose the source, just before
        // the first level) and 1 s answered, at 2 s none.
        expect(vllm.peakMetricsInFlight).toBe(1);
        const reads = vllm.metricsHits;
        for (let index = 1; index < reads.length; index++) {
            expect(reads[index].at - reads[index - 1].at).toBeGreaterThanOrEqual(990);
        }
        expect(server.samples.map((sample) => Math.round(sample.t))).toEqual([0, 1]);
        expect(server.failed).toBeGreaterThanOrEqual(1);
        expect(server.errors).toEqual({ "no answer in 2 s": server.failed });
        // Stopping waits for the read in flight, its deadline at most.
        expect(tookMs).toBeLessThan(server.levels[1].toS * 1000 + 2500 + 1000);
    });

    it("counts a failed read (HTTP 500, a page that is not /metrics) and goes on reading", async () => {
        const vllm = await startVllmStandIn({ ...STAND_IN, tokens: 8 });
        const run = runLoadtest({ endpoint: vllm.endpoint, model: "chat-moe", concurrency: 2, requests: 4, server: { metrics: [vllm.metricsUrl], intervalMs: 100 } });
        await sleep(300);
        vllm.mode = "error";
        await sleep(300);
        vllm.mode = "html";
        await sleep(300);
        vllm.mode = "page";
        const { server } = await run;
        expect(server.failed).toBeGreaterThanOrEqual(4);
        expect(Object.keys(server.errors).sort()).toEqual(["/metrics unreadable: line 1: expected a metric name, got \"<html><body>502 Bad Gateway</body></html\"", "HTTP 500"].sort());
        // Samples before and after the failures: two stretches with a gap between.
        const gap = server.samples.findIndex((sample, index) => index > 0 && sample.t - server.samples[index - 1].t > 0.25);
        expect(gap).toBeGreaterThan(0);
        expect(server.samples.at(-1)!.t).toBeGreaterThan(0.9);
        // The chart breaks its lines there: two stretches per series, three series.
        const svg = renderLoadtestSvg({ ...(await reportOf(server)) });
        expect(svg.match(/<polyline /g)).toHaveLength(6);
    });
});

describe("the server's side from Prometheus", () => {
    it("asks Prometheus first, for the service of the endpoint and its model, and reads no /metrics itself", async () => {
        const chat = await startVllmStandIn(STAND_IN);
        const other = await startVllmStandIn({ ...STAND_IN, model: "small-moe" });
        const prometheus = await startPrometheusStandIn([
            { service: "chat", model: "chat-moe", standIn: chat },
            { service: "small", model: "small-moe", standIn: other },
        ]);
        const stack = async (): Promise<StackTarget> => ({
            stack: "fleet",
            endpoint: chat.endpoint,
            apiKey: "fleet-key",
            services: { chat: { endpoint: chat.endpoint, model: "chat-moe" }, small: { endpoint: other.endpoint, model: "small-moe" } },
            prometheus: prometheus.url,
        });
        const target = await resolveTarget(parseLoadtestArgs(["--concurrency", "4", "--requests", "6"], "/tmp"), {}, stack);
        expect(target.server).toMatchObject({ prometheus: prometheus.url, apiKey: "fleet-key", services: { chat: { model: "chat-moe" } } });
        const report = await runLoadtest({ endpoint: target.endpoint, model: "chat-moe", concurrency: 4, requests: 6, server: { ...target.server, intervalMs: 100 } });
        const { server } = report;
        expect(server.source).toBe(`prometheus ${prometheus.url}`);
        expect(server.reason).toBeUndefined();
        expect(chat.metricsHits).toEqual([]);
        const asked = prometheusQueries("chat-moe", "chat");
        expect(asked.running).toBe('sum by (service) (vllm:num_requests_running{job="vllm",model="chat-moe",service="chat"})');
        expect(new Set(prometheus.queries)).toEqual(new Set([asked.running, asked.waiting, asked.kvPercent]));
        // Three queries a read, a read an interval (the first one chose the source).
        expect(prometheus.queries.length).toBe(3 * (server.samples.length + server.failed));
        expect(server.levels[1]).toMatchObject({ peakRunning: 2, peakWaiting: 2 });
        expect(server.levels[1].peakKvPercent).toBeCloseTo(15, 9);
        expect(inside(server, 0).every((sample) => sample.running <= 1 && sample.waiting === 0)).toBe(true);
    });

    it("falls back to /metrics when Prometheus does not answer or has no series of the model, and says why", async () => {
        const chat = await startVllmStandIn(STAND_IN);
        const down = `http://127.0.0.1:${await closedPort()}`;
        const services = { chat: { endpoint: chat.endpoint, model: "chat-moe" } };
        const refused = await runLoadtest({ endpoint: chat.endpoint, model: "chat-moe", concurrency: 1, requests: 2, server: { prometheus: down, services, intervalMs: 200 } });
        expect(refused.server.source).toBe(`metrics ${chat.metricsUrl}`);
        expect(refused.server.reason).toBe(`prometheus ${down}: connection refused`);
        expect(refused.server.samples.length).toBeGreaterThan(0);

        // Prometheus scrapes the service under another model's name: no series for this one.
        const elsewhere = await startPrometheusStandIn([{ service: "chat", model: "renamed", standIn: chat }]);
        const empty = await runLoadtest({ endpoint: chat.endpoint, model: "chat-moe", concurrency: 1, requests: 2, server: { prometheus: elsewhere.url, services, intervalMs: 200 } });
        expect(empty.server.source).toBe(`metrics ${chat.metricsUrl}`);
        expect(empty.server.reason).toBe(`prometheus ${elsewhere.url}: no series for ${prometheusQueries("chat-moe", "chat").running}`);
        expect(elsewhere.queries.length).toBe(3); // the probe only
        expect(formatServerLines(empty.server)[0]).toContain(`(prometheus ${elsewhere.url}: no series for sum by (service)`);
    });

    it("says why the server's side was not sampled when nothing answers, and measures the load as before", async () => {
        const chat = await startVllmStandIn({ ...STAND_IN, apiKey: "right" });
        const down = `http://127.0.0.1:${await closedPort()}`;
        const options: ServerOptions = { prometheus: down, services: { chat: { endpoint: chat.endpoint, model: "chat-moe" } }, apiKey: "wrong" };
        const report = await runLoadtest({ endpoint: chat.endpoint, model: "chat-moe", apiKey: "right", concurrency: 2, requests: 2, server: options });
        expect(report.server).toEqual({
            source: "none",
            reason: `prometheus ${down}: connection refused; metrics ${chat.metricsUrl}: HTTP 401`,
            intervalMs: 1000,
            samples: [],
            failed: 0,
            errors: {},
            levels: [],
        });
        expect(report.levels.map((level) => level.summary.ok)).toEqual([2, 2]);
        expect(chat.metricsHits).toHaveLength(1); // the one try
        expect(formatLoadtestTable(report).split("\n").at(-1)).toBe(`server side: not sampled (prometheus ${down}: connection refused; metrics ${chat.metricsUrl}: HTTP 401)`);
        const svg = renderLoadtestSvg(report);
        expect(svg).toContain(`server side: not sampled (prometheus ${down}: connection refused; metrics ${chat.metricsUrl}: HTTP 401)`);
        expect(svg).not.toContain("<polyline");

        // A bare endpoint: no stack read, no flag; and a program that asks for no server side.
        const bare = await resolveTarget(parseLoadtestArgs(["--endpoint", chat.endpoint], "/tmp"), { VLLM_API_KEY: "right" }, () => Promise.reject(new Error("no stack is read")));
        const alone = await runLoadtest({ endpoint: bare.endpoint, model: "chat-moe", apiKey: bare.apiKey, concurrency: 1, requests: 1, server: bare.server });
        expect(alone.server).toMatchObject({ source: "none", reason: "no stack read with --endpoint alone: give --prometheus URL or --metrics URL", samples: [] });
        const unasked = await runLoadtest({ endpoint: chat.endpoint, model: "chat-moe", apiKey: "right", concurrency: 1, requests: 1 });
        expect(unasked.server).toMatchObject({ source: "none", reason: "not asked for: no Prometheus or /metrics given" });
        expect(alone.levels[0].summary.ok).toBe(1);
    });
});

describe("where the server's side is read", () => {
    it("takes --prometheus and --metrics over the stack's, and the stack's key for /metrics", async () => {
        const stack = async (): Promise<StackTarget> => ({
            stack: "fleet",
            endpoint: "http://10.0.0.1:8000/v1",
            apiKey: "vllm-key",
            services: { big: { endpoint: "http://10.0.0.1:8000/v1", model: "big" } },
            prometheus: "http://10.0.0.1:9090",
        });
        const args = (argv: string[]) => parseLoadtestArgs(argv, "/tmp");
        expect((await resolveTarget(args(["--api-key-env", "GATEWAY_KEY"]), { GATEWAY_KEY: "gw" }, stack)).server).toEqual({
            prometheus: "http://10.0.0.1:9090",
            metrics: undefined,
            services: { big: { endpoint: "http://10.0.0.1:8000/v1", model: "big" } },
            apiKey: "vllm-key",
            none: undefined,
        });
        const flagged = await resolveTarget(args(["--prometheus", "http://p:9090/", "--metrics", "http://n1:8000/v1"]), {}, stack);
        expect(flagged.server).toMatchObject({ prometheus: "http://p:9090", metrics: ["http://n1:8000/metrics"] });
        expect((await resolveTarget(args(["--endpoint", "http://x:1/v1", "--metrics", "http://x:1/metrics"]), { VLLM_API_KEY: "k" }, stack)).server).toMatchObject({
            metrics: ["http://x:1/metrics"],
            apiKey: "k",
            services: undefined,
        });
        expect(() => args(["--prometheus", "p:9090"])).toThrow('--prometheus: expected an http(s) URL such as http://host:9090, got "p:9090"');
        expect(() => args(["--metrics", "ftp://x/metrics"])).toThrow("--metrics: expected an http(s) URL such as http://host:8000/metrics");
    });

    it("names the service of the endpoint; through a gateway, every service of the model, added up", async () => {
        const blue = await startVllmStandIn({ ...STAND_IN, model: "coder" });
        const green = await startVllmStandIn({ ...STAND_IN, model: "coder" });
        const services = { coder: { endpoint: blue.endpoint, model: "coder" }, coder2: { endpoint: green.endpoint, model: "coder" }, chat: { endpoint: "http://n9:8000/v1", model: "chat" } };
        const own = serverCandidates({ prometheus: "http://p:9090", services }, `${blue.endpoint}/`, "coder");
        expect(own.sources.map((source) => source.label)).toEqual(["prometheus http://p:9090", `metrics ${blue.metricsUrl}`]);
        const gateway = serverCandidates({ prometheus: "http://p:9090", services }, "http://gateway:4000/v1", "coder");
        expect(gateway.sources.map((source) => source.label)).toEqual(["prometheus http://p:9090", `metrics ${blue.metricsUrl} + ${green.metricsUrl}`]);
        expect(prometheusQueries("coder").waiting).toBe('sum by (service) (vllm:num_requests_waiting{job="vllm",model="coder"})');
        expect(serverCandidates({ services }, "http://gateway:4000/v1", "none-such")).toMatchObject({ sources: [], missing: ["the stack has no monitoring", "no service of the stack serves none-such"] });

        // Three requests on blue (two running, one waiting), one on green.
        const load = [blue, blue, blue, green].map((standIn) => fetch(`${standIn.endpoint}/completions`, { method: "POST", body: "{}" }).then((response) => response.text()));
        await sleep(50);
        const figures = await metricsSource([blue.metricsUrl, green.metricsUrl], undefined).read();
        expect(figures).toMatchObject({ running: 3, waiting: 1 });
        expect(figures.kvPercent).toBeCloseTo(expectedKvPercent(2, 1), 9);
        await Promise.all(load);
        green.mode = "error";
        await expect(metricsSource([blue.metricsUrl, green.metricsUrl], undefined).read()).rejects.toThrow(`${green.metricsUrl}: HTTP 500`);
    });

    it("reads a page strictly: every figure must be there", () => {
        expect(() => figuresOfPage('vllm:num_requests_running{engine="0"} 1.0\nvllm:kv_cache_usage_perc{engine="0"} 0.5\n')).toThrow("/metrics has no vllm:num_requests_waiting");
        expect(() => figuresOfPage("<html>")).toThrow(/^\/metrics unreadable: line 1:/);
        expect(figuresOfPage("vllm:num_requests_running 1\nvllm:num_requests_running{engine=\"1\"} 2\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.25\n")).toEqual({ running: 3, waiting: 0, kvPercent: 25 });
    });
});

// ---------------------------------------------------------------------------------------------

const sample = (t: number, running: number, waiting: number, kvPercent: number): ServerSample => ({ t, running, waiting, kvPercent });

/** A report around a server side (the levels' figures made up; they are not what is looked at). */
async function reportOf(server: ServerSide): Promise<LoadtestReport> {
    return {
        tool: "vllm-fleet loadtest",
        when: "2026-12-02T20:00:00.000Z",
        endpoint: "http://10.230.0.10:8000/v1",
        model: "tiny<moe>",
        api: "completions",
        requestsPerLevel: 4,
        maxTokens: 16,
        prompt: "p",
        timeoutMs: 1000,
        apiKeySource: "none",
        levels: server.levels.map((level) => ({
            summary: {
                concurrency: level.concurrency,
                requests: 4,
                ok: 4,
                errors: 0,
                errorsByKind: {},
                wallMs: (level.toS - level.fromS) * 1000,
                peakInFlight: level.concurrency,
                ttftMs: { p50: 100, p95: 120, mean: 105 },
                latencyMs: { p50: 400, p95: 450, mean: 410 },
                tokensPerSecondPerRequest: { p50: 20, p95: 25, mean: 21 },
                outputTokens: 64,
                outputTokensPerSecond: 30,
                requestsPerSecond: 2,
            },
            requests: [],
        })),
        server,
    };
}

describe("the server side's summary and chart", () => {
    const samples = [sample(0, 1, 0, 10), sample(1, 1, 0, 12.5), sample(2, 4, 3, 40.25), sample(3, 4, 6, 55), sample(5, 2, 0, 30)];
    const spans = [
        { concurrency: 1, fromMs: 0, toMs: 2000 },
        { concurrency: 8, fromMs: 2000, toMs: 5000 },
        { concurrency: 16, fromMs: 5000, toMs: 5000.5 },
    ];

    it("peaks per level within its span, the last level's end included; none when no sample fell in it", () => {
        expect(serverLevels(samples, spans)).toEqual([
            { concurrency: 1, fromS: 0, toS: 2, samples: 2, peakRunning: 1, peakWaiting: 0, peakKvPercent: 12.5 },
            { concurrency: 8, fromS: 2, toS: 5, samples: 2, peakRunning: 4, peakWaiting: 6, peakKvPercent: 55 },
            { concurrency: 16, fromS: 5, toS: 5.0005, samples: 1, peakRunning: 2, peakWaiting: 0, peakKvPercent: 30 },
        ]);
        expect(serverLevels(samples.slice(0, 4), spans)[2]).toMatchObject({ samples: 0, peakRunning: null, peakWaiting: null, peakKvPercent: null });
    });

    it("writes it into loadtest.json and draws the server's two panels, each level's span marked, its peaks under them", async () => {
        const server: ServerSide = {
            source: "prometheus http://10.230.0.10:9090",
            intervalMs: 1000,
            samples,
            failed: 1,
            errors: { "no answer in 2 s": 1 },
            levels: serverLevels(samples.slice(0, 4), spans),
        };
        const report = await reportOf(server);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "loadtest-server-"));
        tmpDirs.push(dir);
        const written = writeLoadtestOutputs(report, dir);
        const json = JSON.parse(fs.readFileSync(written.json, "utf8"));
        expect(json.server.source).toBe("prometheus http://10.230.0.10:9090");
        expect(json.server.samples[2]).toEqual({ t: 2, running: 4, waiting: 3, kvPercent: 40.25 });
        expect(json.server.levels[1]).toMatchObject({ concurrency: 8, peakWaiting: 6 });

        const svg = fs.readFileSync(written.svg, "utf8");
        for (const text of ["server: requests running and waiting", "server: KV cache usage", "requests", "percent", "running", "waiting", "KV cache used", "seconds since the first level started"]) {
            expect(svg).toContain(`>${text}<`);
        }
        expect(svg).toContain("from prometheus http://10.230.0.10:9090: 5 samples, one every 1 s, 1 read failed");
        // The missing second (4 s) breaks each line: two stretches a series, three series.
        expect(svg.match(/<polyline /g)).toHaveLength(6);
        expect(svg.match(/<circle /g)).toHaveLength(15);
        expect(svg).toContain("<title>3.0 s: waiting 6</title>");
        // Each level's span on both panels, named, its peaks in its tooltip and in a line under the panels.
        expect(svg.match(/>concurrency 8</g)).toHaveLength(2);
        expect(svg).toContain("<title>concurrency 8, 2.0–5.0 s: peak running 4, peak waiting 6, peak KV 55 %</title>");
        expect(svg).toContain(">concurrency 1 (0.0–2.0 s): peak running 1, peak waiting 0, peak KV 12.5 %<");
        expect(svg).toContain(">concurrency 16 (5.0–5.0 s): peak running -, peak waiting -, peak KV - % (no sample in its span)<");
        expect(svg).toContain("tiny&lt;moe&gt;");
        // The level panels above are drawn as before: 2 panels x 2 series x 3 levels bars.
        expect(svg.match(/<rect [^>]*fill="#(4c6ef5|e8590c)"><title>/g)).toHaveLength(12);
        const height = Number(/height="(\d+)"/.exec(svg)![1]);
        expect(height).toBeGreaterThan(370 + 300);

        expect(formatServerLines(server)).toEqual([
            "server side, from prometheus http://10.230.0.10:9090: 5 samples every 1 s, 1 failed (1 × no answer in 2 s)",
            "  concurrency 1: peak running 1, peak waiting 0, peak KV 12.5 %",
            "  concurrency 8: peak running 4, peak waiting 6, peak KV 55 %",
            "  concurrency 16: peak running -, peak waiting -, peak KV - % (no sample in its span)",
        ]);
        expect(formatServerLines(notSampled("why"))).toEqual(["server side: not sampled (why)"]);
    });
});
