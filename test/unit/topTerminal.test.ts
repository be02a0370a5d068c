/**
 * `npm run top` in a real terminal: tmux runs the tool (its TypeScript transpiled into a temporary
 * directory, as tsc would build bin/) against two stand-ins for vLLM services, HTTP servers in this
 * process whose /metrics change from one read to the next, and a service where nothing listens. The
 * test reads the screen with `tmux capture-pane` until the rows show the tokens per second that the
 * stand-ins' counters grew by, presses q, and checks the tool exited with 0 and gave the terminal
 * back (alternate screen left, cursor shown, raw mode off). Each test has its own tmux server (-L)
 * and session, killed afterwards whatever happened.
 */
import * as fs from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as os from "os";
import * as path from "path";
import * as ts from "typescript";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { findProjectRoot } from "../../infra/core/project";
import { InTerminal, quitWith, startInTerminal, waitFor } from "../terminal";

const ROOT = findProjectRoot(__dirname);

/**
 * The tool's files (tools/top/main.ts and every project file it imports) transpiled to CommonJS
 * under `outDir`, in the project's layout; returns the entry's path. Transpiled, not type-checked:
 * `npx tsc --noEmit` checks the types.
 */
function buildTool(outDir: string): string {
    const options: ts.CompilerOptions = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true, useDefineForClassFields: false };
    const pending = ["tools/top/main.ts"];
    const done = new Set<string>();
    while (pending.length > 0) {
        const file = pending.pop()!;
        if (done.has(file)) {
            continue;
        }
        done.add(file);
        const source = fs.readFileSync(path.join(ROOT, file), "utf8");
        for (const imported of ts.preProcessFile(source, true, true).importedFiles) {
            if (imported.fileName.startsWith(".")) {
                const base = path.posix.normalize(path.posix.join(path.posix.dirname(file), imported.fileName));
                pending.push([`${base}.ts`, `${base}/index.ts`].find((candidate) => fs.existsSync(path.join(ROOT, candidate)))!);
            }
        }
        const out = path.join(outDir, file.replace(/\.ts$/, ".js"));
        fs.mkdirSync(path.dirname(out), { recursive: true });
        fs.writeFileSync(out, ts.transpileModule(source, { compilerOptions: options, fileName: file }).outputText);
    }
    return path.join(outDir, "tools/top/main.js");
}

// ---------------------------------------------------------------------------------------------
// Stand-ins for vLLM services

/** What a stand-in served: when, and each engine's generation_tokens_total. */
interface Served {
    readonly time: number;
    readonly generated: readonly number[];
}

interface StandIn {
    readonly url: string;
    readonly served: Served[];
    close(): Promise<void>;
}

/**
 * A STAND-IN for one vLLM service's /metrics (real vLLM 0.32's series and labels, as
 * prometheus_client writes them): each engine's generation_tokens_total grows with the wall clock at
 * `ratePerSecond[engine]` tokens a second, restarting from 0 (its histogram too) at the read
 * `restartAt` of the engine (an engine restarted); num_requests_running/waiting and
 * kv_cache_usage_perc are fixed; per read, two requests had their first token within 0.25 s and two
 * more within 0.5 s. Without the key: 401.
 */
async function vllmStandIn(model: string, engines: { ratePerSecond: number; running: number; waiting: number; kv: number; restartAt?: number }[], apiKey: string): Promise<StandIn> {
    const served: Served[] = [];
    const started = engines.map(() => Date.now());
    /** The read each engine (re)started at: its histogram counts from there. */
    const startedAtRead = engines.map(() => 0);
    const server = http.createServer((req, res) => {
        if (req.headers.authorization !== `Bearer ${apiKey}`) {
            res.writeHead(401, { "content-type": "application/json" }).end('{"error":"Unauthorized"}');
            return;
        }
        if (req.url !== "/metrics") {
            res.writeHead(404).end();
            return;
        }
        const now = Date.now();
        const reads = served.length;
        engines.forEach((engine, index) => {
            if (engine.restartAt === reads) {
                started[index] = now;
                startedAtRead[index] = reads;
            }
        });
        const generated = engines.map((engine, index) => Math.floor((engine.ratePerSecond * (now - started[index])) / 1000));
        served.push({ time: now, generated });
        const labels = (index: number, extra = "") => `{engine="${index}",${extra}model_name="${model}"}`;
        const lines: string[] = [];
        const family = (name: string, type: string, samples: string[]) => lines.push(`# HELP ${name} ${name}.`, `# TYPE ${name} ${type}`, ...samples);
        family("vllm:num_requests_running", "gauge", engines.map((engine, index) => `vllm:num_requests_running${labels(index)} ${engine.running.toFixed(1)}`));
        family("vllm:num_requests_waiting", "gauge", engines.map((engine, index) => `vllm:num_requests_waiting${labels(index)} ${engine.waiting.toFixed(1)}`));
        family("vllm:kv_cache_usage_perc", "gauge", engines.map((engine, index) => `vllm:kv_cache_usage_perc${labels(index)} ${engine.kv}`));
        family("vllm:generation_tokens", "counter", [
            ...generated.map((value, index) => `vllm:generation_tokens_total${labels(index)} ${value.toFixed(1)}`),
            ...generated.map((_, index) => `vllm:generation_tokens_created${labels(index)} 1.7380000005e+09`),
        ]);
        const bounds = ["0.1", "0.25", "0.5", "1.0", "+Inf"];
        const upTo = (le: string, index: number) => (le === "0.1" ? 0 : le === "0.25" ? 2 : 4) * (reads - startedAtRead[index]);
        family(
            "vllm:time_to_first_token_seconds",
            "histogram",
            engines.flatMap((_, index) => [
                ...bounds.map((le) => `vllm:time_to_first_token_seconds_bucket${labels(index, `le="${le}",`)} ${upTo(le, index).toFixed(1)}`),
                `vllm:time_to_first_token_seconds_count${labels(index)} ${upTo("+Inf", index).toFixed(1)}`,
            ]),
        );
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(`${lines.join("\n")}\n`);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        served,
        close: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    };
}

/** The tokens per second a stand-in's counters grew by over what it served: a drop is a restart from 0. */
function servedRate(served: readonly Served[]): number {
    let tokens = 0;
    for (let index = 1; index < served.length; index++) {
        served[index].generated.forEach((value, engine) => {
            const before = served[index - 1].generated[engine];
            tokens += value >= before ? value - before : value;
        });
    }
    return tokens / ((served[served.length - 1].time - served[0].time) / 1000);
}

/** A port where nothing listens (a server's, closed). */
async function deadPort(): Promise<number> {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    return port;
}

const rowOf = (screen: string, service: string) => screen.split("\n").find((line) => line.startsWith(`${service} `));
const tokensOf = (row: string | undefined) => (row ? Number(row.trim().split(/\s+/)[2]) : NaN);

/**
 * Near what a stand-in's counters grew by over the reads the frame was made of: those served when
 * the screen was read, maybe but the last one or two (read, not drawn yet); 3 % for the rounding to
 * whole tokens and the time between the tool's clock and the stand-in's.
 */
function near(shown: number, served: readonly Served[]): boolean {
    return [0, 1, 2].some((unseen) => {
        const seen = served.slice(0, served.length - unseen);
        return seen.length >= 2 && Math.abs(shown - servedRate(seen)) <= servedRate(seen) * 0.03;
    });
}

describe("npm run top in a real terminal (tmux)", () => {
    let buildDir: string;
    let main: string;
    const cleanups: (() => Promise<void> | void)[] = [];

    beforeAll(() => {
        buildDir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-top-"));
        main = buildTool(buildDir);
    });

    afterAll(() => fs.rmSync(buildDir, { recursive: true, force: true }));

    afterEach(async () => {
        for (const cleanup of cleanups.splice(0).reverse()) {
            await cleanup();
        }
    });

    /** Runs the tool with `args` in a terminal (tmux), `env` added. */
    function startTop(args: string[], env: Record<string, string>): InTerminal {
        const terminal = startInTerminal([process.execPath, main, ...args], { dir: buildDir, env });
        cleanups.push(() => terminal.tmux.kill());
        return terminal;
    }

    it("shows the tokens per second the stand-ins served, keeps refreshing past a dead service, and quits on q giving the terminal back", async () => {
        const key = "top-test-key";
        const alpha = await vllmStandIn("stand-in/alpha", [{ ratePerSecond: 240, running: 3, waiting: 1, kv: 0.25 }], key);
        cleanups.push(() => alpha.close());
        // Two engines, 50 and 70 tokens a second; engine 1 restarts at the 4th read.
        const beta = await vllmStandIn("stand-in/beta", [{ ratePerSecond: 50, running: 0, waiting: 0, kv: 0.5 }, { ratePerSecond: 70, running: 2, waiting: 0, kv: 0.75, restartAt: 3 }], key);
        cleanups.push(() => beta.close());
        const endpoints = `alpha=${alpha.url}/v1,beta=${beta.url},gone=http://127.0.0.1:${await deadPort()}/v1`;
        const terminal = startTop(["--endpoints", endpoints, "--api-key-env", "TOP_TEST_KEY", "--interval", "0.5"], { TOP_TEST_KEY: key });

        let screen = "";
        // Until beta's engine restarted and both rows show what the counters grew by.
        await waitFor(
            () => {
                screen = terminal.tmux.screen();
                const ready = beta.served.length >= 6 && near(tokensOf(rowOf(screen, "alpha")), [...alpha.served]) && near(tokensOf(rowOf(screen, "beta")), [...beta.served]);
                return ready ? true : undefined;
            },
            20_000,
            () => `the screen:\n${screen}\nalpha served ${servedRate(alpha.served)} tok/s, beta ${beta.served.length > 1 ? servedRate(beta.served) : "-"} tok/s`,
        );
        const lines = screen.split("\n");
        expect(lines[0]).toMatch(/^vllm-fleet top {3}no stack \(--endpoints\) {3}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
        expect(lines[1]).toBe("source: each service's /metrics");
        expect(lines[3]).toMatch(/^service +model +tok\/s +run +wait +KV % +TTFT p50$/);
        expect(Math.max(...lines.map((line) => line.trimEnd().length))).toBeLessThanOrEqual(80);
        // alpha: 240 tok/s, 3 running, 1 waiting, KV 25 %; per read 2 first tokens by 0.25 s, 2 more by 0.5 s: the median 0.25 s.
        expect(rowOf(screen, "alpha")).toMatch(/^alpha +stand-in\/alpha +\d+\.\d +3 +1 +25\.0 +250 ms$/);
        expect(Math.abs(tokensOf(rowOf(screen, "alpha")) - 240)).toBeLessThan(240 * 0.03);
        // beta: 50 + 70 tok/s over its two engines but for what engine 1 counted between its last read
        // and its restart (lost, as it is to Prometheus); the restart not taken for a fall. 2 running, KV the larger: 75 %.
        expect(rowOf(screen, "beta")).toMatch(/^beta +stand-in\/beta +\d+\.\d +2 +0 +75\.0 +250 ms$/);
        expect(tokensOf(rowOf(screen, "beta"))).toBeGreaterThan(50);
        expect(tokensOf(rowOf(screen, "beta"))).toBeLessThan(120 * 1.03);
        expect(rowOf(screen, "gone")).toMatch(/^gone +- +connection refused$/);
        expect(lines.some((line) => line.startsWith("q quits; refreshed every 0.5 s"))).toBe(true);
        // Still refreshing: the stand-ins keep being read.
        const reads = alpha.served.length;
        await waitFor(() => (alpha.served.length >= reads + 2 ? true : undefined), 5000, () => `alpha read ${alpha.served.length} times`);

        await quitWith(terminal, "q", "vllm-fleet top");
    }, 60_000);

    it("quits on Ctrl-C as on q, and shows a service refusing the key as such", async () => {
        const alpha = await vllmStandIn("stand-in/alpha", [{ ratePerSecond: 100, running: 1, waiting: 0, kv: 0.1 }], "right-key");
        cleanups.push(() => alpha.close());
        const terminal = startTop(["--endpoints", `alpha=${alpha.url}`, "--api-key-env", "TOP_TEST_KEY", "--interval", "0.5"], { TOP_TEST_KEY: "wrong-key" });
        await waitFor(() => (rowOf(terminal.tmux.screen(), "alpha") ?? "").match(/^alpha +- +\/metrics: HTTP 401$/) ?? undefined, 30_000, () => `the screen:\n${terminal.tmux.screen()}`);
        await quitWith(terminal, "C-c", "vllm-fleet top");
    }, 60_000);
});
