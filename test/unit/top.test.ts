/**
 * `npm run top` (tools/top/): the /metrics parser on pages shaped as real vLLM 0.32 serves them
 * (prometheus_client's text format: labels sorted, engine and model_name, vLLM's TTFT buckets), the
 * minute's window (rates across counter resets, Prometheus's histogram_quantile and its edge rules)
 * against hand-computed values, the frame, the command line, the setup from a stack's outputs, and
 * the two sources against HTTP servers in this process (stand-ins for vLLM's /metrics and for Prometheus).
 */
import * as fs from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as path from "path";
import { afterEach, describe, expect, it } from "vitest";
import { parseEndpoints, parseTopArgs } from "../../tools/top/cli";
import { parseExposition, parseSampleValue } from "../../tools/top/exposition";
import { FrameHeader, Row, formatSeconds, renderFrame } from "../../tools/top/frame";
import { SERVICE_QUERIES, parseVector } from "../../tools/top/queries";
import { resolveSetup, setupFromOutputs } from "../../tools/top/setup";
import { Sampler, TopSetup, metricsUrlOf, scrapeErrorWords } from "../../tools/top/sources";
import { drawSequence } from "../../tools/top/terminal";
import { ServiceWindow, bucketQuantile, counterIncrease, counterRate } from "../../tools/top/window";

// ---------------------------------------------------------------------------------------------
// vLLM 0.32's /metrics, as prometheus_client writes it

/** vLLM 0.32's TTFT buckets (vllm/v1/metrics/buckets.py). */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];

/** A float as prometheus_client's floatToGoString writes it: 3 -> "3.0", 1.7e9 -> "1.7e+09", inf -> "+Inf". */
function goFloat(value: number): string {
    if (value === Infinity) {
        return "+Inf";
    }
    if (value === -Infinity) {
        return "-Inf";
    }
    if (Number.isNaN(value)) {
        return "NaN";
    }
    const text = Number.isInteger(value) ? value.toFixed(1) : String(value);
    const dot = text.indexOf(".");
    if (value > 0 && dot > 6) {
        const mantissa = `${text[0]}.${text.slice(1, dot)}${text.slice(dot + 1)}`.replace(/[0.]+$/, "");
        return `${mantissa}e+0${dot - 1}`;
    }
    return text;
}

/** One engine's state, as vLLM's loggers count it. */
interface Engine {
    readonly engine: string;
    readonly running: number;
    readonly waiting: number;
    /** 0..1 */
    readonly kv: number;
    readonly generated: number;
    /** Each request's time to first token (seconds). */
    readonly ttfts: readonly number[];
}

/** A /metrics page of vLLM 0.32 serving `model` with these engines (labels sorted, as prometheus_client writes them). */
function vllmPage(model: string, engines: readonly Engine[]): string {
    const labels = (engine: Engine, extra: Record<string, string> = {}) =>
        `{${Object.entries({ engine: engine.engine, model_name: model, ...extra })
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .map(([name, value]) => `${name}="${value}"`)
            .join(",")}}`;
    const lines: string[] = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 12345.0',
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        `process_resident_memory_bytes ${goFloat(2.1e9)}`,
    ];
    const family = (name: string, type: string, help: string, samples: string[]) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples);
    const gauge = (name: string, value: (engine: Engine) => number) => engines.map((engine) => `vllm:${name}${labels(engine)} ${goFloat(value(engine))}`);
    family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", gauge("num_requests_running", (engine) => engine.running));
    family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", gauge("num_requests_waiting", (engine) => engine.waiting));
    family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", gauge("kv_cache_usage_perc", (engine) => engine.kv));
    for (const [name, value] of [
        ["prompt_tokens", (engine: Engine) => engine.generated * 3],
        ["generation_tokens", (engine: Engine) => engine.generated],
    ] as const) {
        family(`vllm:${name}`, "counter", `Number of ${name.replace("_", " ")} processed.`, [
            ...engines.map((engine) => `vllm:${name}_total${labels(engine)} ${goFloat(value(engine))}`),
            ...engines.map((engine) => `vllm:${name}_created${labels(engine)} ${goFloat(1738000000.5)}`),
        ]);
    }
    family(
        "vllm:request_success",
        "counter",
        "Count of successfully processed requests.",
        engines.flatMap((engine) => ["stop", "length", "abort"].map((reason) => `vllm:request_success_total${labels(engine, { finished_reason: reason })} ${goFloat(reason === "stop" ? engine.ttfts.length : 0)}`)),
    );
    for (const [name, observations] of [
        ["time_to_first_token_seconds", (engine: Engine) => engine.ttfts],
        ["inter_token_latency_seconds", (engine: Engine) => engine.ttfts.map((ttft) => ttft / 10)],
    ] as const) {
        family(
            `vllm:${name}`,
            "histogram",
            `Histogram of ${name.replace(/_/g, " ")}.`,
            engines.flatMap((engine) => {
                const values = observations(engine);
                return [
                    ...[...TTFT_BUCKETS, Infinity].map((bound) => `vllm:${name}_bucket${labels(engine, { le: goFloat(bound) })} ${goFloat(values.filter((value) => value <= bound).length)}`),
                    `vllm:${name}_count${labels(engine)} ${goFloat(values.length)}`,
                    `vllm:${name}_sum${labels(engine)} ${goFloat(values.reduce((sum, value) => sum + value, 0))}`,
                    `vllm:${name}_created${labels(engine)} ${goFloat(1738000000.5)}`,
                ];
            }),
        );
    }
    return `${lines.join("\n")}\n`;
}

const engine = (fields: Partial<Engine> = {}): Engine => ({ engine: "0", running: 0, waiting: 0, kv: 0, generated: 0, ttfts: [], ...fields });

describe("the /metrics parser", () => {
    const page = vllmPage("Qwen/Qwen3-0.6B", [engine({ running: 3, waiting: 1, kv: 0.42, generated: 1234, ttfts: [0.03, 0.2, 0.2, 3.0] }), engine({ engine: "1", generated: 7 })]);
    const { samples, types } = parseExposition(page);
    const find = (name: string, labels: Record<string, string>) =>
        samples.filter((sample) => sample.name === name && Object.entries(labels).every(([label, value]) => sample.labels[label] === value));

    it("reads every series real vLLM 0.32 serves that the fleet reads (test/fixtures/vllm-conformance.json)", () => {
        const fixture = JSON.parse(fs.readFileSync(path.join(__dirname, "../fixtures/vllm-conformance.json"), "utf8"));
        const names = new Set(samples.map((sample) => sample.name));
        expect((fixture["GET /metrics"].series as string[]).filter((series) => !names.has(series))).toEqual([]);
    });

    it("reads a sample's name, labels (sorted as prometheus_client writes them) and value", () => {
        expect(find("vllm:num_requests_running", { engine: "0" })).toEqual([{ name: "vllm:num_requests_running", labels: { engine: "0", model_name: "Qwen/Qwen3-0.6B" }, value: 3 }]);
        expect(find("vllm:generation_tokens_total", {}).map((sample) => [sample.labels.engine, sample.value])).toEqual([
            ["0", 1234],
            ["1", 7],
        ]);
        expect(find("vllm:kv_cache_usage_perc", { engine: "0" })[0].value).toBe(0.42);
        expect(find("vllm:request_success_total", { engine: "0", finished_reason: "stop" })[0].value).toBe(4);
        expect(find("process_resident_memory_bytes", {})[0]).toEqual({ name: "process_resident_memory_bytes", labels: {}, value: 2.1e9 });
        expect(find("vllm:generation_tokens_created", { engine: "0" })[0].value).toBe(1738000000.5);
    });

    it("reads the TTFT histogram's buckets, le=\"+Inf\" and vLLM's bounds as prometheus_client writes them", () => {
        const buckets = find("vllm:time_to_first_token_seconds_bucket", { engine: "0" });
        expect(buckets.map((sample) => sample.labels.le)).toEqual([...TTFT_BUCKETS.map(goFloat), "+Inf"]);
        expect(buckets.map((sample) => sample.labels.le).slice(-4)).toEqual(["160.0", "640.0", "2560.0", "+Inf"]);
        expect(Object.fromEntries(buckets.map((sample) => [sample.labels.le, sample.value]))).toMatchObject({ "0.04": 1, "0.25": 3, "2.5": 3, "5.0": 4, "+Inf": 4 });
        expect(find("vllm:time_to_first_token_seconds_count", { engine: "0" })[0].value).toBe(4);
    });

    it("keeps each family's # TYPE (a counter's under its name without _total)", () => {
        expect(types.get("vllm:generation_tokens")).toBe("counter");
        expect(types.get("vllm:time_to_first_token_seconds")).toBe("histogram");
        expect(types.get("vllm:num_requests_waiting")).toBe("gauge");
    });

    it("reads escapes, a trailing comma, spaces, CRLF, timestamps, NaN and infinities", () => {
        const text = [
            "# a comment that is not HELP or TYPE",
            'odd{path="C:\\\\models\\\\x",quote="say \\"hi\\"",lines="a\\nb",} 1',
            "spaced { a = \"1\" , b=\"2\" }   2.5e-3   1700000000000\r",
            "nan_gauge NaN",
            "up_inf{le=\"+Inf\"} +Inf",
            "down_inf -Inf",
            "empty_braces{} 0",
            "",
        ].join("\n");
        expect(parseExposition(text).samples).toEqual([
            { name: "odd", labels: { path: "C:\\models\\x", quote: 'say "hi"', lines: "a\nb" }, value: 1 },
            { name: "spaced", labels: { a: "1", b: "2" }, value: 0.0025, timestamp: 1700000000000 },
            { name: "nan_gauge", labels: {}, value: NaN },
            { name: "up_inf", labels: { le: "+Inf" }, value: Infinity },
            { name: "down_inf", labels: {}, value: -Infinity },
            { name: "empty_braces", labels: {}, value: 0 },
        ]);
        expect([parseSampleValue("1e+09"), parseSampleValue(".5"), parseSampleValue("-3."), parseSampleValue("inf"), parseSampleValue("0x10"), parseSampleValue("1_000")]).toEqual([1e9, 0.5, -3, Infinity, undefined, undefined]);
    });

    it("refuses what is not the format, naming the line", () => {
        const refusals: [string, RegExp][] = [
            ["<html><body>502 Bad Gateway</body></html>", /^line 1: expected a metric name/],
            ["ok 1\nvllm:x{a=\"b\"} abc", /^line 2: vllm:x: "abc" is not a number/],
            ['vllm:x{a="b} 1', /^line 1: vllm:x: the value of the label a is not closed/],
            ['vllm:x{a="b",a="c"} 1', /^line 1: vllm:x: the label a is given twice/],
            ['vllm:x{a="\\t"} 1', /^line 1: vllm:x: the label a has an unknown escape \\t/],
            ["vllm:x{a} 1", /^line 1: vllm:x: expected "=" after the label a/],
            ["vllm:x", /^line 1: vllm:x: expected a space and a value/],
            ["vllm:x 1 2 3", /^line 1: vllm:x: expected a value and at most a timestamp/],
            ["vllm:x 1 1.5", /^line 1: vllm:x: the timestamp "1.5" is not whole milliseconds/],
            ['x{a="1"} 1\nx{a="1"} 2', /^line 2: x\{a="1"\}: the same series twice/],
            ["# TYPE x countr", /^line 1: # TYPE x: expected one of counter, gauge/],
            ["# TYPE x gauge\n# TYPE x gauge", /^line 2: # TYPE x: given twice/],
        ];
        for (const [text, said] of refusals) {
            expect(() => parseExposition(text), text).toThrow(said);
        }
    });

    it("takes a label named as an object's own fields (constructor, __proto__) as any other", () => {
        const labels = parseExposition('x{constructor="a",__proto__="b"} 1').samples[0].labels;
        expect(Object.entries(labels)).toEqual([
            ["constructor", "a"],
            ["__proto__", "b"],
        ]);
    });
});

// ---------------------------------------------------------------------------------------------
// The window's maths

describe("counter increase and rate, as Prometheus's rate counts resets", () => {
    const points = (...values: number[]) => values.map((value, index) => ({ time: index * 2000, value }));

    it("is last minus first while the counter only grows", () => {
        expect(counterIncrease(points(10, 20, 35))).toBe(25);
        expect(counterRate(points(10, 20, 35))).toBe(6.25); // 25 over 4 s
    });

    it("takes a drop for a restart from 0: 100 -> 150, restart, 0 -> 20 -> 50 grew by 50 + 20 + 30", () => {
        expect(counterIncrease(points(100, 150, 20, 50))).toBe(100);
        expect(counterIncrease(points(100, 150, 0))).toBe(50);
        // Three restarts in a row: 0 -> 3, 0 -> 2, 0 -> 1.
        expect(counterIncrease(points(5, 3, 2, 1))).toBe(6);
    });

    it("has no increase or rate without two points, nor a rate without time between them", () => {
        expect(counterIncrease(points(7))).toBeUndefined();
        expect(counterIncrease([])).toBeUndefined();
        expect(counterRate([{ time: 1000, value: 1 }, { time: 1000, value: 5 }])).toBeUndefined();
    });
});

describe("histogram_quantile over classic buckets, as Prometheus computes it", () => {
    const buckets = (...pairs: [number, number][]) => pairs.map(([upperBound, count]) => ({ upperBound, count }));

    it("interpolates linearly inside the bucket holding the rank", () => {
        // 10 observations: rank 5 lies in (0.1, 0.25], which holds the 3rd to the 6th: 0.1 + 0.15 × 3/4.
        const histogram = buckets([0.1, 2], [0.25, 6], [0.5, 9], [1, 10], [Infinity, 10]);
        expect(bucketQuantile(0.5, histogram)).toBeCloseTo(0.2125, 12);
        // rank 9 is the whole of (0.25, 0.5]: its upper bound; rank 9.9: 0.5 + 0.5 × 0.9.
        expect(bucketQuantile(0.9, histogram)).toBeCloseTo(0.5, 12);
        expect(bucketQuantile(0.99, histogram)).toBeCloseTo(0.95, 12);
    });

    it("takes 0 as the first bucket's lower bound, or that bucket's bound when it is not above 0", () => {
        expect(bucketQuantile(0.25, buckets([0.5, 4], [1, 8], [Infinity, 8]))).toBeCloseTo(0.25, 12); // 0 + 0.5 × 2/4
        expect(bucketQuantile(0.5, buckets([-1, 3], [0, 4], [Infinity, 5]))).toBe(-1);
        expect(bucketQuantile(0.5, buckets([0, 3], [1, 4], [Infinity, 5]))).toBe(0);
    });

    it("gives the highest finite bound when the rank lies in the +Inf bucket", () => {
        expect(bucketQuantile(0.5, buckets([0.1, 1], [0.2, 2], [Infinity, 10]))).toBe(0.2);
    });

    it("is NaN without a +Inf bucket, with the +Inf bucket alone, or without observations; ±Inf for q outside 0..1", () => {
        expect(bucketQuantile(0.5, buckets([0.1, 1], [0.2, 2]))).toBeNaN();
        expect(bucketQuantile(0.5, buckets([Infinity, 5]))).toBeNaN();
        expect(bucketQuantile(0.5, buckets([0.1, 0], [Infinity, 0]))).toBeNaN();
        expect(bucketQuantile(0.5, [])).toBeNaN();
        expect(bucketQuantile(-0.1, buckets([0.1, 1], [Infinity, 1]))).toBe(-Infinity);
        expect(bucketQuantile(1.1, buckets([0.1, 1], [Infinity, 1]))).toBe(Infinity);
        expect(bucketQuantile(NaN, buckets([0.1, 1], [Infinity, 1]))).toBeNaN();
    });

    it("sorts the buckets, merges those of one bound and flattens a decrease", () => {
        expect(bucketQuantile(0.5, buckets([Infinity, 10], [0.25, 6], [1, 10], [0.1, 2], [0.5, 9]))).toBeCloseTo(0.2125, 12);
        expect(bucketQuantile(0.5, buckets([0.1, 1], [0.1, 1], [0.2, 4], [Infinity, 4]))).toBeCloseTo(0.1, 12); // le 0.1 holds 2: rank 2
        // 5, 3, 6 read as 5, 5, 6: rank 3 in the first bucket, 0 + 0.1 × 3/5.
        expect(bucketQuantile(0.5, buckets([0.1, 5], [0.2, 3], [Infinity, 6]))).toBeCloseTo(0.06, 12);
    });

    it("lands on a bucket's upper bound when the rank equals its count", () => {
        expect(bucketQuantile(0.5, buckets([1, 5], [2, 10], [Infinity, 10]))).toBe(1);
    });
});

describe("a service's window of the last minute", () => {
    const MODEL = "Qwen/Qwen3-0.6B";
    const at = (window: ServiceWindow, time: number, engines: Engine[]) => window.add(time, parseExposition(vllmPage(MODEL, engines)).samples);

    it("computes the figures from three reads 2 s apart, two engines, one of them restarted", () => {
        const window = new ServiceWindow();
        at(window, 0, [engine({ generated: 1000, ttfts: [0.03, 0.2] }), engine({ engine: "1", generated: 500, ttfts: [0.5] })]);
        at(window, 2000, [engine({ generated: 1100, ttfts: [0.03, 0.2, 0.07, 0.3, 0.3, 0.9] }), engine({ engine: "1", generated: 560, ttfts: [0.5] })]);
        at(window, 4000, [
            engine({ running: 3, waiting: 2, kv: 0.42, generated: 1300, ttfts: [0.03, 0.2, 0.07, 0.3, 0.3, 0.9, 0.15, 3.0] }),
            engine({ engine: "1", running: 1, kv: 0.1, generated: 20, ttfts: [] }),
        ]);
        const figures = window.figures();
        // Engine 0: 300 tokens in 4 s; engine 1: 60, then a restart and 20 more: 80 in 4 s.
        expect(figures.tokensPerSecond).toBeCloseTo(75 + 20, 12);
        expect(figures.running).toBe(4);
        expect(figures.waiting).toBe(2);
        expect(figures.kvCachePercent).toBeCloseTo(42, 12);
        // First tokens in the window: 0.07, 0.15, 0.3, 0.3, 0.9, 3.0 (engine 1 restarted, none new):
        // le 0.25 holds 2, le 0.5 holds 4; rank 3 is half of (0.25, 0.5]: 0.375.
        expect(figures.ttftP50Seconds).toBeCloseTo(0.375, 12);
        expect(window.model()).toBe(MODEL);
    });

    it("has no rate nor TTFT from one read, and no TTFT when no request had its first token in the window", () => {
        const window = new ServiceWindow();
        at(window, 0, [engine({ running: 2, generated: 10, ttfts: [0.1] })]);
        expect(window.figures()).toEqual({ tokensPerSecond: undefined, running: 2, waiting: 0, kvCachePercent: 0, ttftP50Seconds: undefined });
        at(window, 2000, [engine({ running: 2, generated: 10, ttfts: [0.1] })]);
        expect(window.figures()).toEqual({ tokensPerSecond: 0, running: 2, waiting: 0, kvCachePercent: 0, ttftP50Seconds: undefined });
    });

    it("forgets the reads older than a minute, and starts again when the clock goes back", () => {
        const window = new ServiceWindow();
        at(window, 0, [engine({ generated: 0 })]);
        at(window, 30_000, [engine({ generated: 3000 })]);
        at(window, 61_000, [engine({ generated: 3310 })]);
        expect(window.size).toBe(2);
        expect(window.figures().tokensPerSecond).toBeCloseTo(10, 12); // 310 over 31 s
        at(window, 50_000, [engine({ generated: 3400 })]);
        expect(window.size).toBe(1);
    });

    it("shows unknown figures for a page without vLLM's series", () => {
        const window = new ServiceWindow();
        window.add(0, parseExposition("other_total 1\n").samples);
        window.add(2000, parseExposition("other_total 2\n").samples);
        expect(window.figures()).toEqual({ tokensPerSecond: undefined, running: undefined, waiting: undefined, kvCachePercent: undefined, ttftP50Seconds: undefined });
        expect(window.model()).toBeUndefined();
    });
});

// ---------------------------------------------------------------------------------------------
// The frame

describe("a frame", () => {
    const header: FrameHeader = { stack: "proving-ground", time: new Date(2026, 4, 1, 9, 3, 7), source: "Prometheus http://10.230.0.10:9090", intervalSeconds: 2, interactive: true };
    const rows: Row[] = [
        { service: "big", model: "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", figures: { tokensPerSecond: 1234.56, running: 3, waiting: 0, kvCachePercent: 42, ttftP50Seconds: 0.2125 } },
        { service: "coder", model: "tiny", figures: { running: 1.5, ttftP50Seconds: 2.5 } },
        { service: "gone", error: "connection refused" },
    ];

    it("is a header, a table with the numbers right-aligned under their headings, a footer; 80 columns", () => {
        expect(renderFrame(header, rows)).toBe(
            [
                "vllm-fleet top   stack proving-ground   2026-05-01 09:03:07",
                "source: Prometheus http://10.230.0.10:9090",
                "",
                "service  model                            tok/s    run   wait    KV %   TTFT p50",
                "big      Qwen/Qwen3-Coder-30B-A3B-In~    1234.6      3      0    42.0     213 ms",
                "coder    tiny                                 -    1.5      -       -     2.50 s",
                "gone     -                             connection refused",
                "",
                "q quits; refreshed every 2 s; tok/s and TTFT p50 over the last minute",
            ].join("\n"),
        );
    });

    it("fits a narrower screen, cutting the model first and any line last", () => {
        const lines = renderFrame(header, rows, 60).split("\n");
        expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(60);
        expect(lines[3]).toBe("service  model        tok/s    run   wait    KV %   TTFT p50");
        expect(lines[4]).toBe("big      Qwen/Qw~    1234.6      3      0    42.0     213 ms");
    });

    it("names no stack with --endpoints, and has no quit hint when printed once", () => {
        const lines = renderFrame({ ...header, stack: undefined, interactive: false, source: "each service's /metrics" }, [{ service: "a-very-long-service-name", figures: {} }]).split("\n");
        expect(lines[0]).toBe("vllm-fleet top   no stack (--endpoints)   2026-05-01 09:03:07");
        expect(lines[4]).toBe("a-very-long-ser~  -" + " ".repeat(27) + "-      -      -       -          -");
        expect(lines[lines.length - 1]).toBe("tok/s and TTFT p50 over the last minute");
    });

    it("writes durations in ms under a second, else in seconds", () => {
        expect([0.0004, 0.25, 0.9996, 1, 12.5, 150.4, undefined, NaN].map(formatSeconds)).toEqual(["0 ms", "250 ms", "1.00 s", "1.00 s", "12.50 s", "150 s", "-", "-"]);
    });

    it("is drawn over the last one: cursor home, each line cleared to its end, the rest of the screen cleared", () => {
        expect(drawSequence("a\nbc")).toBe("\x1b[Ha\x1b[K\r\nbc\x1b[K\x1b[J");
        // No more lines than the screen has: the next frame lands on this one.
        expect(drawSequence("a\nbc\nd", 2)).toBe("\x1b[Ha\x1b[K\r\nbc\x1b[K\x1b[J");
    });
});

// ---------------------------------------------------------------------------------------------
// The command line and the setup

describe("the command line", () => {
    it("defaults to the selected stack, every 2 s, live", () => {
        expect(parseTopArgs([])).toEqual({ stack: undefined, intervalSeconds: 2, once: false, endpoints: undefined, prometheus: undefined, apiKeyEnv: undefined, help: false });
        expect(parseTopArgs(["--stack", "spark-duo", "--interval=0.5", "--once"])).toMatchObject({ stack: "spark-duo", intervalSeconds: 0.5, once: true });
    });

    it("takes services as NAME=URL pairs instead of a stack, a Prometheus and a key's variable", () => {
        const args = parseTopArgs(["--endpoints", "alpha=http://127.0.0.1:8000/v1,beta=http://127.0.0.1:8001", "--prometheus", "http://127.0.0.1:9090", "--api-key-env", "MY_KEY"]);
        expect([...args.endpoints!]).toEqual([
            ["alpha", "http://127.0.0.1:8000/v1"],
            ["beta", "http://127.0.0.1:8001"],
        ]);
        expect(args).toMatchObject({ prometheus: "http://127.0.0.1:9090", apiKeyEnv: "MY_KEY" });
    });

    it("refuses what it cannot use, naming the flag", () => {
        expect(() => parseTopArgs(["--interval", "0"])).toThrow(/^--interval: expected seconds from 0.2 to 30, got "0"/);
        expect(() => parseTopArgs(["--interval", "abc"])).toThrow(/^--interval: expected seconds/);
        expect(() => parseTopArgs(["--interval", "31"])).toThrow(/^--interval: expected seconds/);
        expect(() => parseTopArgs(["--interval"])).toThrow(/^--interval: expected a value after it/);
        expect(() => parseTopArgs(["--stack", "a", "--stack", "b"])).toThrow(/^--stack: given twice/);
        expect(() => parseTopArgs(["--stack", "a", "--endpoints", "x=http://h:1"])).toThrow(/give it or --stack, not both/);
        expect(() => parseTopArgs(["--api-key-env", "NOT-A-NAME"])).toThrow(/^--api-key-env: expected the name of an environment variable/);
        expect(() => parseTopArgs(["--watch"])).toThrow(/^unknown option "--watch"/);
        expect(() => parseEndpoints("alpha")).toThrow(/^--endpoints: expected NAME=URL\[,NAME=URL\.\.\.\], got "alpha"/);
        expect(() => parseEndpoints("=http://h:1")).toThrow(/^--endpoints: expected NAME=URL/);
        expect(() => parseEndpoints("a=http://h:1,a=http://h:2")).toThrow(/^--endpoints: a given twice/);
    });

    it("reads a service's /metrics at its API's root", () => {
        expect(metricsUrlOf("http://10.1.230.180:8000/v1")).toBe("http://10.1.230.180:8000/metrics");
        expect(metricsUrlOf("http://10.1.230.180:8000/v1/")).toBe("http://10.1.230.180:8000/metrics");
        expect(metricsUrlOf("http://10.1.230.180:8000")).toBe("http://10.1.230.180:8000/metrics");
        expect(metricsUrlOf("https://fleet.example/big/v1")).toBe("https://fleet.example/big/metrics");
        expect(() => metricsUrlOf("ftp://h/v1")).toThrow(/expected an http\(s\) URL/);
        expect(() => metricsUrlOf("h:8000")).toThrow(/expected an http\(s\) URL/);
    });
});

describe("the setup", () => {
    const outputs = {
        endpoint: { value: "http://10.1.230.180:8000/v1" },
        services: {
            value: {
                big: { endpoint: "http://10.1.230.180:8000/v1", model: "Qwen/Qwen3-0.6B", nodes: ["spark1", "spark2"], executor: "ray" },
                coder: { endpoint: "http://10.1.230.182:8001/v1", model: "coder", nodes: ["spark3"], executor: "mp" },
            },
        },
        apiKey: { value: "sk-fleet" },
        monitoring: { value: { endpoint: "http://10.230.0.10:9090" } },
    };

    it("is the stack's services, its key and its Prometheus", () => {
        expect(setupFromOutputs("proving-ground", outputs)).toEqual({
            stack: "proving-ground",
            services: [
                { name: "big", model: "Qwen/Qwen3-0.6B", metricsUrl: "http://10.1.230.180:8000/metrics" },
                { name: "coder", model: "coder", metricsUrl: "http://10.1.230.182:8001/metrics" },
            ],
            apiKey: "sk-fleet",
            prometheus: "http://10.230.0.10:9090",
        });
    });

    it("has no Prometheus without monitoring, no key when apiKey is \"\", and needs services", () => {
        const setup = setupFromOutputs("s", { ...outputs, apiKey: { value: "" }, monitoring: undefined });
        expect(setup).toMatchObject({ apiKey: "", prometheus: undefined });
        expect(() => setupFromOutputs("s", { apiKey: { value: "" } })).toThrow("stack s has no output services (is it deployed?)");
        expect(() => setupFromOutputs("s", { services: { value: { big: { model: "m" } } } })).toThrow("stack s: the output services.big has no endpoint");
    });

    it("takes --endpoints without reading any stack, and the key from the variable --api-key-env names", async () => {
        const noStack = () => Promise.reject(new Error("read a stack"));
        const args = parseTopArgs(["--endpoints", "alpha=http://127.0.0.1:8000/v1", "--api-key-env", "TOP_KEY"]);
        expect(await resolveSetup(args, { TOP_KEY: "k-1" }, noStack)).toEqual({
            services: [{ name: "alpha", metricsUrl: "http://127.0.0.1:8000/metrics" }],
            apiKey: "k-1",
            prometheus: undefined,
        });
        await expect(resolveSetup(args, {}, noStack)).rejects.toThrow("--api-key-env: the variable TOP_KEY is not set");
        await expect(resolveSetup(parseTopArgs(["--endpoints", "alpha=host:1"]), {}, noStack)).rejects.toThrow(/^--endpoints alpha: expected an http\(s\) URL/);
    });

    it("reads the named stack, the variable's key before the stack's", async () => {
        const asked: (string | undefined)[] = [];
        const read = async (stack?: string) => {
            asked.push(stack);
            return { stack: stack ?? "selected", outputs };
        };
        expect(await resolveSetup(parseTopArgs(["--stack", "pg"]), {}, read)).toMatchObject({ stack: "pg", apiKey: "sk-fleet" });
        expect(await resolveSetup(parseTopArgs(["--api-key-env", "K"]), { K: "mine" }, read)).toMatchObject({ stack: "selected", apiKey: "mine" });
        expect(asked).toEqual(["pg", undefined]);
    });
});

// ---------------------------------------------------------------------------------------------
// The sources, against HTTP servers in this process

interface StandIn {
    readonly url: string;
    /** The requests it was sent: path and Authorization header. */
    readonly requests: { path: string; authorization?: string }[];
    close(): Promise<void>;
}

const standIns: StandIn[] = [];

afterEach(async () => {
    await Promise.all(standIns.splice(0).map((standIn) => standIn.close()));
});

/** An HTTP server answering each request with `answer(path, n)` (n: the requests before it). */
async function standIn(answer: (path: string, n: number) => { status: number; body: string; contentType?: string } | "hang"): Promise<StandIn> {
    const requests: StandIn["requests"] = [];
    const server = http.createServer((req, res) => {
        requests.push({ path: req.url ?? "", authorization: req.headers.authorization });
        const reply = answer(req.url ?? "", requests.length - 1);
        if (reply !== "hang") {
            res.writeHead(reply.status, { "content-type": reply.contentType ?? "text/plain; version=0.0.4; charset=utf-8" }).end(reply.body);
        }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const made: StandIn = {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        requests,
        close: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    };
    standIns.push(made);
    return made;
}

/** A URL where nothing listens (a server's port, closed). */
async function closedUrl(): Promise<string> {
    const gone = await standIn(() => ({ status: 200, body: "" }));
    await gone.close();
    standIns.splice(standIns.indexOf(gone), 1);
    return gone.url;
}

/** A vLLM stand-in serving `pages` in turn (the last one from then on). */
const vllmStandIn = (pages: string[]) => standIn((pathname, n) => (pathname === "/metrics" ? { status: 200, body: pages[Math.min(n, pages.length - 1)] } : { status: 404, body: "not found" }));

describe("the services' own /metrics", () => {
    it("are read with the key into each service's window: gauges at once, rates and TTFT from the second read", async () => {
        const alpha = await vllmStandIn([
            vllmPage("tiny", [engine({ running: 2, kv: 0.1, generated: 100, ttfts: [0.03] })]),
            vllmPage("tiny", [engine({ running: 1, waiting: 4, kv: 0.3, generated: 160, ttfts: [0.03, 0.07, 0.3, 0.3] })]),
        ]);
        let clock = 1_700_000_000_000;
        const setup: TopSetup = { services: [{ name: "alpha", metricsUrl: `${alpha.url}/metrics` }], apiKey: "k-1" };
        const sampler = new Sampler(setup, 2000, fetch, () => clock);
        const first = await sampler.sample();
        expect(first.source).toBe("each service's /metrics");
        expect(first.rows).toEqual([{ service: "alpha", model: "tiny", figures: { tokensPerSecond: undefined, running: 2, waiting: 0, kvCachePercent: 10, ttftP50Seconds: undefined } }]);
        clock += 2000;
        const second = await sampler.sample();
        // 60 tokens in 2 s; first tokens 0.07, 0.3, 0.3: rank 1.5 in (0.25, 0.5] holding 2 of 3: 0.25 + 0.25 × 0.5/2.
        const figures = second.rows[0].figures!;
        expect(figures.tokensPerSecond).toBe(30);
        expect([figures.running, figures.waiting, figures.kvCachePercent]).toEqual([1, 4, 30]);
        expect(figures.ttftP50Seconds).toBeCloseTo(0.3125, 12);
        expect(alpha.requests).toEqual([
            { path: "/metrics", authorization: "Bearer k-1" },
            { path: "/metrics", authorization: "Bearer k-1" },
        ]);
    });

    it("are read without Authorization when the key is \"\"", async () => {
        const alpha = await vllmStandIn([vllmPage("tiny", [engine()])]);
        await new Sampler({ services: [{ name: "alpha", metricsUrl: `${alpha.url}/metrics` }], apiKey: "" }, 2000).sample();
        expect(alpha.requests).toEqual([{ path: "/metrics", authorization: undefined }]);
    });

    it("give a service that does not answer a row saying why, the others their figures", async () => {
        const ok = await vllmStandIn([vllmPage("tiny", [engine({ running: 1 })])]);
        const locked = await standIn(() => ({ status: 401, body: '{"error":"Unauthorized"}' }));
        const html = await standIn(() => ({ status: 200, body: "<html><body>502 Bad Gateway</body></html>", contentType: "text/html" }));
        const hung = await standIn(() => "hang");
        const setup: TopSetup = {
            services: [
                { name: "ok", model: "from-stack", metricsUrl: `${ok.url}/metrics` },
                { name: "locked", metricsUrl: `${locked.url}/metrics` },
                { name: "html", metricsUrl: `${html.url}/metrics` },
                { name: "hung", metricsUrl: `${hung.url}/metrics` },
                { name: "gone", metricsUrl: `${await closedUrl()}/metrics` },
            ],
            apiKey: "k",
        };
        const { rows } = await new Sampler(setup, 500).sample();
        expect(rows).toEqual([
            { service: "ok", model: "from-stack", figures: { tokensPerSecond: undefined, running: 1, waiting: 0, kvCachePercent: 0, ttftP50Seconds: undefined } },
            { service: "locked", model: undefined, error: "/metrics: HTTP 401" },
            { service: "html", model: undefined, error: '/metrics unreadable: line 1: expected a metric name, got "<html><body>502 Bad Gateway</body></html"' }, // its first 40 characters
            { service: "hung", model: undefined, error: "no answer in 0.5 s" },
            { service: "gone", model: undefined, error: "connection refused" },
        ]);
    });
});

describe("Prometheus as the source", () => {
    /** A Prometheus stand-in: SERVICE_QUERIES answered from `values` (query key -> service -> value); other queries refused as Prometheus does. */
    function prometheusStandIn(values: Record<string, Record<string, string>>, targets: unknown[] = [], state = { failing: false }) {
        return standIn((pathname) => {
            const url = new URL(pathname, "http://prometheus");
            if (state.failing) {
                return { status: 503, body: JSON.stringify({ status: "error", errorType: "unavailable", error: "TSDB not ready" }), contentType: "application/json" };
            }
            if (url.pathname === "/api/v1/targets") {
                return { status: 200, body: JSON.stringify({ status: "success", data: { activeTargets: targets, droppedTargets: [] } }), contentType: "application/json" };
            }
            const key = Object.entries(SERVICE_QUERIES).find(([, query]) => query === url.searchParams.get("query"))?.[0];
            if (url.pathname !== "/api/v1/query" || key === undefined) {
                return { status: 400, body: JSON.stringify({ status: "error", errorType: "bad_data", error: "unknown query" }), contentType: "application/json" };
            }
            const result = Object.entries(values[key] ?? {}).map(([service, value]) => ({ metric: { service }, value: [1777777777.123, value] }));
            return { status: 200, body: JSON.stringify({ status: "success", data: { resultType: "vector", result } }), contentType: "application/json" };
        });
    }

    const VALUES = {
        tokensPerSecond: { big: "95.5", coder: "0" },
        running: { big: "4", coder: "0" },
        waiting: { big: "2", coder: "0" },
        kvCachePercent: { big: "42.5", coder: "0" },
        ttftP50Seconds: { big: "0.375", coder: "NaN" },
        up: { big: "1", coder: "1", down: "0" },
    };

    it("answers every figure of every service with one query each; a down target's row says Prometheus's scrape error", async () => {
        const prometheus = await prometheusStandIn(VALUES, [
            { labels: { job: "vllm", service: "down" }, health: "down", lastError: 'Get "http://10.0.0.9:8002/metrics": dial tcp 10.0.0.9:8002: connect: connection refused' },
            { labels: { job: "vllm", service: "big" }, health: "up", lastError: "" },
        ]);
        const setup: TopSetup = {
            services: ["big", "coder", "down", "unknown"].map((name) => ({ name, model: `m-${name}`, metricsUrl: "http://127.0.0.1:9/metrics" })),
            apiKey: "k",
            prometheus: `${prometheus.url}/`,
        };
        const sampling = await new Sampler(setup, 2000).sample();
        expect(sampling.source).toBe(`Prometheus ${prometheus.url}/`);
        expect(sampling.rows).toEqual([
            { service: "big", model: "m-big", figures: { tokensPerSecond: 95.5, running: 4, waiting: 2, kvCachePercent: 42.5, ttftP50Seconds: 0.375 } },
            { service: "coder", model: "m-coder", figures: { tokensPerSecond: 0, running: 0, waiting: 0, kvCachePercent: 0, ttftP50Seconds: undefined } },
            { service: "down", model: "m-down", error: "down: connection refused" },
            { service: "unknown", model: "m-unknown", error: 'Prometheus does not scrape it (no up{service="unknown"})' },
        ]);
        const asked = prometheus.requests.map((request) => new URL(request.path, "http://p").searchParams.get("query")).filter((query) => query !== null);
        expect(asked.sort()).toEqual(Object.values(SERVICE_QUERIES).sort());
        expect(prometheus.requests.every((request) => request.authorization === undefined)).toBe(true);
    });

    it("falls back to each /metrics while Prometheus does not answer, says so, and goes back when it does", async () => {
        const state = { failing: true };
        const prometheus = await prometheusStandIn(VALUES, [], state);
        const big = await vllmStandIn([vllmPage("m", [engine({ running: 7 })])]);
        const setup: TopSetup = { services: [{ name: "big", metricsUrl: `${big.url}/metrics` }], apiKey: "", prometheus: prometheus.url };
        const sampler = new Sampler(setup, 2000);
        const fallen = await sampler.sample();
        expect(fallen.source).toBe(`each service's /metrics: Prometheus ${prometheus.url} did not answer (HTTP 503: unavailable: TSDB not ready)`);
        expect(fallen.rows[0].figures?.running).toBe(7);
        state.failing = false;
        const back = await sampler.sample();
        expect(back.source).toBe(`Prometheus ${prometheus.url}`);
        expect(back.rows[0].figures?.running).toBe(4);
        expect(big.requests.length).toBe(2); // read again while Prometheus was asked again
        const third = await sampler.sample();
        expect(third.source).toBe(`Prometheus ${prometheus.url}`);
        expect(big.requests.length).toBe(2); // not read while Prometheus answers
    });

    it("falls back when nothing listens where Prometheus should be", async () => {
        const big = await vllmStandIn([vllmPage("m", [engine({ running: 1 })])]);
        const gone = await closedUrl();
        const sampling = await new Sampler({ services: [{ name: "big", metricsUrl: `${big.url}/metrics` }], apiKey: "", prometheus: gone }, 2000).sample();
        expect(sampling.source).toBe(`each service's /metrics: Prometheus ${gone} did not answer (connection refused)`);
        expect(sampling.rows[0].figures?.running).toBe(1);
    });

    it("reads the API's vector answers, NaN and infinities included, and refuses what is not one", () => {
        const vector = (result: unknown[]) => JSON.stringify({ status: "success", data: { resultType: "vector", result } });
        const read = parseVector(vector([{ metric: { service: "a" }, value: [1, "1.5"] }, { metric: { service: "b" }, value: [1, "NaN"] }, { metric: { service: "c" }, value: [1, "+Inf"] }, { metric: {}, value: [1, "9"] }]));
        expect([...read]).toEqual([
            ["a", 1.5],
            ["b", NaN],
            ["c", Infinity],
        ]);
        expect(() => parseVector("<html>")).toThrow(/^not JSON/);
        expect(() => parseVector(JSON.stringify({ status: "error", errorType: "bad_data", error: "parse error" }))).toThrow("bad_data: parse error");
        expect(() => parseVector(JSON.stringify({ status: "success", data: { resultType: "matrix", result: [] } }))).toThrow('expected a vector, got "matrix"');
        expect(() => parseVector(vector([{ metric: { service: "a" }, value: [1, 2] }]))).toThrow(/a series without \[time, "value"\]/);
    });

    it("says a failed scrape in Prometheus's words without the request", () => {
        expect(scrapeErrorWords('Get "http://10.0.0.9:8002/metrics": dial tcp 10.0.0.9:8002: connect: connection refused')).toBe("connection refused");
        expect(scrapeErrorWords("server returned HTTP status 401 Unauthorized")).toBe("server returned HTTP status 401 Unauthorized");
        expect(scrapeErrorWords('Get "http://10.0.0.9:8002/metrics": context deadline exceeded')).toBe("context deadline exceeded");
    });
});
