/**
 * End to end on two simulated Sparks: the monitoring (issue 33), with a service (mp, TP 2), the
 * gateway on spark2 and Prometheus on spark1 (the proving ground's monitoring image: Debian's
 * Prometheus and node exporter).
 * - after `up`, every target is up: the service's /metrics (with the key), the gateway's router and
 *   each node's exporter on its fabric address; nothing answers on the exporters' port on the
 *   management network;
 * - after a load test through the gateway, the service's generation-token counter in Prometheus grew
 *   by the tokens the load test received (within 5%), and the router's metrics counted the requests;
 * - the service stopped: ServiceDown fires within a minute and `npm run status` lists it; a plain
 *   `up` repairs the service and the alert clears;
 * - a second service added: its target is there and up, Prometheus's container kept (same id);
 * - `npm run top -- --stack` in a real terminal (tmux), as a user runs it: the service's row from
 *   Prometheus during a load, then q gives the terminal back;
 * - destroy leaves no container, and removes the data directory as removeDataOnDestroy says.
 * Prometheus's own memory and CPU during the load test are logged (its self-scrape; docs/monitoring.md).
 * Real SSH, Docker, Prometheus, node exporter and vllm-router; the GPU, the fabric and vLLM are stand-ins.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { dashboardPanels } from "../../infra/core/plan";
import { runLoadtest } from "../../tools/loadtest/run";
import { stackStatus } from "../../tools/status";
import { REPO_ROOT } from "../automation";
import { quitWith, startInTerminal, waitFor } from "../terminal";
import { SimCluster, TINY_MODEL_DIR, onNode, simDeployment, tearDown } from "./simCluster";

const STACK = "e2e-monitoring";
const MONITORING_IMAGE = "vllm-fleet-sim/monitoring:current";
const model = (servedName: string) => ({ path: TINY_MODEL_DIR, servedName });
const CHAT = { name: "chat", nodes: ["spark1", "spark2"], executor: "mp", parallelism: { tensor: 2 }, model: model("chat-moe"), vllm: { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.25 } };
const SMALL = { name: "small", nodes: ["spark2"], executor: "mp", parallelism: { tensor: 1 }, model: model("small-moe"), vllm: { port: 8002, masterPort: 29502, maxModelLen: 2048, gpuMemoryUtilization: 0.2 } };
const MONITORING = {
    node: "spark1",
    scrapeIntervalSeconds: 2,
    image: { name: MONITORING_IMAGE, source: "present" },
    nodeExporter: { image: { name: MONITORING_IMAGE, source: "present" } },
};
const PROMETHEUS = "vllm-fleet-prometheus-e2e-monitoring";
const DATA_DIR = `/var/lib/vllm-fleet/prometheus/${STACK}`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One instant query against Prometheus: each series' labels and value. */
async function query(endpoint: string, promql: string): Promise<{ metric: Record<string, string>; value: number }[]> {
    const response = await fetch(`${endpoint}/api/v1/query?query=${encodeURIComponent(promql)}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await response.json()) as { status: string; error?: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
    if (body.status !== "success") {
        throw new Error(`${promql}: ${body.error}`);
    }
    return body.data.result.map((series) => ({ metric: series.metric, value: Number(series.value[1]) }));
}

/** The alerts Prometheus has in `state` (firing, pending). */
async function alerts(endpoint: string, state: string): Promise<{ labels: Record<string, string> }[]> {
    const body = (await (await fetch(`${endpoint}/api/v1/alerts`, { signal: AbortSignal.timeout(10_000) })).json()) as { data: { alerts: { labels: Record<string, string>; state: string }[] } };
    return body.data.alerts.filter((alert) => alert.state === state);
}

/** Polls `probe` every second until it returns a value, or fails after `seconds` with what it last saw. */
async function within<T>(seconds: number, what: string, probe: () => Promise<T | undefined>): Promise<{ value: T; seconds: number }> {
    const start = Date.now();
    let last: unknown;
    while (Date.now() - start < seconds * 1000) {
        try {
            const value = await probe();
            if (value !== undefined) {
                return { value, seconds: (Date.now() - start) / 1000 };
            }
        } catch (error) {
            last = error;
        }
        await sleep(1000);
    }
    throw new Error(`${what}: not within ${seconds} s${last ? ` (${String(last)})` : ""}`);
}

/** Every container of the stack on every node (`spark1/<name>`), and its id. */
function containers(cluster: SimCluster): Record<string, string> {
    return Object.fromEntries(
        cluster.nodes.flatMap((node) =>
            onNode(node, `docker ps -a --filter label=vllm-fleet.stack=${STACK} --format '{{.Names}} {{.ID}}'`)
                .split("\n")
                .filter((line) => line !== "")
                .map((line) => [`spark${node.index + 1}/${line.split(" ")[0]}`, line.split(" ")[1]]),
        ),
    );
}

describe("monitoring on two simulated Sparks: Prometheus, the node exporters, the alerts", () => {
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;
    let envVars: Record<string, string>;
    let endpoint = "";
    let apiKey = "";
    let gatewayEndpoint = "";
    const timings: Record<string, number> = {};

    beforeAll(async () => {
        ({ cluster, stack, workDir, envVars } = await simDeployment(STACK, 2, {}, { monitoring: true }));
        for (const key of ["model", "vllm", "image"]) {
            await stack.removeConfig(`vllm-fleet:${key}`);
        }
        await setServices([CHAT]);
        await stack.setConfig("vllm-fleet:gateway", { value: JSON.stringify({ node: "spark2", port: 4000, image: { name: cluster.workloadImage } }) });
        await stack.setConfig("vllm-fleet:monitoring", { value: JSON.stringify(MONITORING) });
        // A stopped service must stay down until `up` (the watchdog would bring it back first).
        await stack.setConfig("vllm-fleet:supervision", { value: JSON.stringify({ watchdog: false }) });
    });

    afterAll(async () => {
        console.log(`monitoring e2e timings (s): ${JSON.stringify(timings)}`);
        await tearDown({ stacks: [stack], cluster: STACK, workDir });
    });

    async function setServices(services: readonly Record<string, unknown>[]): Promise<void> {
        const image = { name: cluster.workloadImage };
        await stack.setConfig("vllm-fleet:services", { value: JSON.stringify(services.map((service) => ({ image, ...service }))) });
    }

    it("scrapes every target up after up: the service with the key, the router, each node's exporter on its fabric address only", async () => {
        const started = Date.now();
        const up = await stack.up();
        timings.up = (Date.now() - started) / 1000;
        expect(up.summary.result).toBe("succeeded");
        const monitoring = up.outputs.monitoring.value as { node: string; endpoint: string; targets: string[] };
        apiKey = String(up.outputs.apiKey.value);
        gatewayEndpoint = String(up.outputs.gatewayEndpoint.value);
        endpoint = monitoring.endpoint;
        const [spark1, spark2] = cluster.nodes;
        expect(monitoring.endpoint).toBe(`http://${spark1.mgmtIp}:9090`);
        expect(monitoring.targets.sort()).toEqual(
            [`vllm ${spark1.fabricIp}:8000`, `gateway ${spark2.fabricIp}:29000`, `node ${spark1.fabricIp}:9100`, `node ${spark2.fabricIp}:9100`].sort(),
        );
        const upSeries = await query(endpoint, "up");
        expect(upSeries.map((series) => `${series.metric.job} ${series.value}`).sort()).toEqual(["gateway 1", "node 1", "node 1", "prometheus 1", "vllm 1"]);
        // Every series carries the stack, and the service's its name and model.
        const running = await query(endpoint, 'vllm:num_requests_running{job="vllm"}');
        expect(running[0].metric).toMatchObject({ stack: STACK, service: "chat", model: "chat-moe", node: "spark1" });
        // The fabric's bytes by device, on each node: the fabric interface is there by name.
        const fabric = await query(endpoint, 'node_network_receive_bytes_total{job="node"}');
        for (const node of ["spark1", "spark2"]) {
            const device = fabric.find((series) => series.metric.node === node)!.metric.fabric_device;
            expect(fabric.some((series) => series.metric.node === node && series.metric.device === device), node).toBe(true);
        }
        // The exporter listens on the fabric address only: nothing answers on the management one.
        const onMgmt = onNode(spark1, `curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://${spark2.mgmtIp}:9100/metrics || true`);
        expect(onMgmt).toBe("000");
        // The key is in Prometheus's container as a file only its user reads, on no command line.
        expect(onNode(spark1, `docker exec ${PROMETHEUS} stat -c '%u %a' /etc/vllm-fleet/prometheus/state/key`).trim()).toBe("65534 400");
        expect(onNode(spark1, `docker inspect ${PROMETHEUS} --format '{{json .Args}} {{json .Config.Env}}'`)).not.toContain(apiKey);
        // The data directory belongs to Prometheus's user.
        expect(onNode(spark1, `stat -c '%u' ${DATA_DIR}`).trim()).toBe("65534");
    });

    it("counts the tokens a load test through the gateway received, within 5%, and the router's requests", async () => {
        const generated = async () => (await query(endpoint, 'sum(vllm:generation_tokens_total{job="vllm",service="chat"})'))[0]?.value ?? 0;
        const routedTotal = async () => (await query(endpoint, 'sum(vllm_router_requests_total{job="gateway"})'))[0]?.value ?? 0;
        const before = await generated();
        const routedBefore = await routedTotal();
        const loadStarted = Date.now();
        const report = await runLoadtest({ endpoint: gatewayEndpoint, model: "chat-moe", apiKey, concurrency: 4, requests: 40, maxTokens: 24, timeoutMs: 60_000, server: { prometheus: endpoint, apiKey } });
        await logPrometheusUsage(Math.ceil((Date.now() - loadStarted) / 1000));
        // The report's server side, from Prometheus (a run this short gets a sample or two).
        expect(report.server.source).toBe(`prometheus ${endpoint}`);
        expect(report.server.samples.length).toBeGreaterThanOrEqual(1);
        const received = report.levels.reduce((sum, level) => sum + level.summary.outputTokens, 0);
        const ok = report.levels.reduce((sum, level) => sum + level.summary.ok, 0);
        expect(ok).toBe(80);
        expect(received).toBeGreaterThan(0);
        // Two scrapes later the counter holds every request.
        const grew = await within(30, "the counter grew by the tokens received", async () => {
            const growth = (await generated()) - before;
            return Math.abs(growth - received) <= received * 0.05 ? growth : undefined;
        });
        console.log(`generation tokens: load test received ${received}, Prometheus counted ${grew.value}`);
        // The router's own metrics (through the gateway's node's fabric address) counted requests too.
        await within(20, "the router's request counter grew", async () => ((await routedTotal()) > routedBefore ? true : undefined));
    });

    /**
     * Prometheus's own resident memory (its peak) and CPU (cores, on average) over the last
     * `seconds` and a scrape or two, from its self-scrape: a figure for the docs, logged.
     */
    async function logPrometheusUsage(seconds: number): Promise<void> {
        await sleep(2 * MONITORING.scrapeIntervalSeconds * 1000);
        const window = `${seconds + 2 * MONITORING.scrapeIntervalSeconds}s`;
        const [memory] = await query(endpoint, `max_over_time(process_resident_memory_bytes{job="prometheus"}[${window}])`);
        const [cpu] = await query(endpoint, `rate(process_cpu_seconds_total{job="prometheus"}[${window}])`);
        const [series] = await query(endpoint, 'prometheus_tsdb_head_series{job="prometheus"}');
        const [targets] = await query(endpoint, "count(up)");
        expect(memory.value).toBeGreaterThan(0);
        expect(Number.isFinite(cpu.value)).toBe(true);
        timings.prometheusRssMiB = Math.round(memory.value / 2 ** 20);
        timings.prometheusCpuCores = Number(cpu.value.toFixed(3));
        console.log(
            `Prometheus during the load test (${window}, ${targets.value} targets scraped every ${MONITORING.scrapeIntervalSeconds} s, ${series.value} series): ` +
                `resident memory at most ${timings.prometheusRssMiB} MiB, CPU ${timings.prometheusCpuCores} cores on average`,
        );
    }

    it("answers every query of the dashboard's panels with data after the load", async () => {
        const nodes = cluster.nodes.map((node) => ({ name: `spark${node.index + 1}`, fabric: { ip: node.fabricIp, interface: node.fabricIface } }));
        const exprs = dashboardPanels(nodes).flatMap((row) => row.panels.flatMap((panel) => panel.queries.map((query) => ({ what: `${row.row} / ${panel.title}`, expr: query.expr }))));
        expect(exprs.length).toBeGreaterThanOrEqual(14);
        // Rates need a scrape after the load: asked again until every query has data, for at most a minute.
        let empty: string[] = [];
        await within(60, "every panel's query has data", async () => {
            empty = [];
            for (const { what, expr } of exprs) {
                const result = await query(endpoint, expr);
                if (!result.some((series) => Number.isFinite(series.value))) {
                    empty.push(`${what}: ${expr} -> ${JSON.stringify(result)}`);
                }
            }
            return empty.length === 0 ? true : undefined;
        }).catch(() => undefined);
        expect(empty).toEqual([]);
    });

    it("shows the service from Prometheus in npm run top (tmux) run as a user runs it, and quits on q", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-top-e2e-"));
        // The user's command in the project, with this stack's backend; npm compiles the tool first.
        const terminal = startInTerminal(["npm", "run", "--silent", "top", "--", "--stack", STACK], { dir, cwd: REPO_ROOT, env: envVars });
        try {
            const frame = (screen: string) => screen.includes(`vllm-fleet top   stack ${STACK}`) && screen.includes(`source: Prometheus ${endpoint}`);
            await waitFor(() => (frame(terminal.tmux.screen()) ? true : undefined), 300_000, () => `no frame of the stack; the screen:\n${terminal.tmux.screen()}`);
            // A load through the gateway while it watches: the row shows the tokens per second Prometheus counted.
            const load = runLoadtest({ endpoint: gatewayEndpoint, model: "chat-moe", apiKey, levels: [2], requests: 8, maxTokens: 24, timeoutMs: 60_000 });
            load.catch(() => undefined); // awaited below; not left unhandled when the screen check fails first
            let screen = "";
            const row = await waitFor(
                () => {
                    screen = terminal.tmux.screen();
                    const found = screen.split("\n").find((line) => line.startsWith("chat "));
                    const match = found?.match(/^chat +chat-moe +(\d+\.\d) +\d+ +\d+ +\d+\.\d +\d+ ms$/);
                    return match && Number(match[1]) > 0 ? found : undefined;
                },
                60_000,
                () => `no row of chat with tokens per second; the screen:\n${screen}`,
            );
            console.log(`npm run top: ${row}`);
            expect((await load).levels[0].summary.ok).toBe(8);
            expect(screen).not.toMatch(/^small /m);
            await quitWith(terminal, "q", "vllm-fleet top");
        } finally {
            terminal.tmux.kill();
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("fires ServiceDown within a minute of the service stopping, lists it in status, and clears it after a plain up", async () => {
        const [spark1] = cluster.nodes;
        onNode(spark1, "docker stop vllm-fleet-chat-vllm >/dev/null");
        const stopped = Date.now();
        const fired = await within(90, "ServiceDown fires", async () => ((await alerts(endpoint, "firing")).some((alert) => alert.labels.alertname === "ServiceDown" && alert.labels.service === "chat") ? true : undefined));
        timings.alertFired = (Date.now() - stopped) / 1000;
        expect(timings.alertFired).toBeLessThanOrEqual(60);
        expect(fired.value).toBe(true);
        const status = await stackStatus(stack.workspace, STACK);
        expect(status.text).toMatch(/alert ServiceDown FIRING for \d+ s: service chat does not answer/);
        const repairStarted = Date.now();
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        await within(60, "ServiceDown clears", async () => ((await alerts(endpoint, "firing")).some((alert) => alert.labels.alertname === "ServiceDown") ? undefined : true));
        timings.alertCleared = (Date.now() - repairStarted) / 1000;
        expect((await stackStatus(stack.workspace, STACK)).text).toContain("alerts: none firing");
    });

    it("adds a second service's target in place: Prometheus keeps its container, the new target is up", async () => {
        const before = containers(cluster);
        await setServices([CHAT, SMALL]);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const after = containers(cluster);
        expect(after[`spark1/${PROMETHEUS}`]).toBe(before[`spark1/${PROMETHEUS}`]);
        const monitoring = up.outputs.monitoring.value as { targets: string[] };
        expect(monitoring.targets).toContain(`vllm ${cluster.nodes[1].fabricIp}:8002`);
        const small = await query(endpoint, 'up{job="vllm",service="small"}');
        expect(small.map((series) => series.value)).toEqual([1]);
    });

    it("destroys every container and removes the data directory as removeDataOnDestroy says", async () => {
        const [spark1] = cluster.nodes;
        expect(onNode(spark1, `test -d ${DATA_DIR} && echo kept`).trim()).toBe("kept");
        await stack.setConfig("vllm-fleet:monitoring", { value: JSON.stringify({ ...MONITORING, removeDataOnDestroy: true }) });
        const up = await stack.up();
        expect(up.summary.resourceChanges?.replace ?? 0).toBe(0);
        await stack.destroy();
        expect(Object.keys(containers(cluster))).toEqual([]);
        expect(onNode(spark1, `test -e ${DATA_DIR} && echo there || echo gone`).trim()).toBe("gone");
    });
});
