/** `npm run status`'s report (tools/statusReport.ts) from one read of the fleet. */
import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../infra/core/config";
import { parseObservation } from "../../infra/core/observe";
import { gatewayReport, monitoringReport, statusReport, watchdogLines } from "../../tools/statusReport";
import { sparkProbeOutput } from "./mocks";
import { sparkDuo } from "./stacks";

const config = parseFleetConfig(sparkDuo);
const container = (running: boolean, restarts: number) =>
    JSON.stringify({ name: "/vllm-fleet-ray", id: "x", status: running ? "running" : "exited", running, restarting: false, exitCode: running ? 0 : 137, restartCount: restarts, startedAt: "2026-12-02T20:00:00Z", labels: { "vllm-fleet.revision": "r1" } });
const head = (completion: string, workerRunning = true) => [
    parseObservation(
        "spark1",
        [
            sparkProbeOutput("192.168.200.12", "10.1.230.180"),
            "### containers",
            container(true, 1),
            "### serve",
            "process yes",
            "token t",
            "### endpoint",
            "health 200",
            completion,
            "### ray-nodes",
            "192.168.200.12 1",
            "192.168.200.13 1",
            "### watchdog",
            JSON.stringify([{ time: "2026-12-02T20:01:00Z", event: "restart", detail: "3 completions failed; restarted vllm serve" }]),
        ].join("\n"),
    ),
    parseObservation("spark2", [sparkProbeOutput("192.168.200.13", "10.1.230.181"), "### containers", container(workerRunning, 0)].join("\n")),
];

describe("statusReport", () => {
    it("says serving, per node: containers with state and restarts, Ray's nodes by fabric IP, health, completion, watchdog", () => {
        const report = statusReport(config, head("completion ok"));
        expect(report.serving).toBe(true);
        expect(report.text).toContain("spark1 (aurora@10.1.230.180:22)  fabric 192.168.200.12 on enp1s0f1np1");
        expect(report.text).toMatch(/vllm-fleet-ray +running  restarts 1  started 2026-12-02T20:00:00Z  revision r1/);
        expect(report.text).toContain("ray nodes alive: 192.168.200.12 (1 GPU), 192.168.200.13 (1 GPU)");
        expect(report.text).toContain("completion: answered");
        expect(report.text).toContain("2026-12-02T20:01:00Z  restart  3 completions failed; restarted vllm serve");
        expect(report.text.endsWith("serving: yes")).toBe(true);
    });

    it("names the image with the vLLM and Ray the last up found in it, and says when none was checked", () => {
        const report = statusReport(config, head("completion ok"), undefined, { name: "vllm-node:2026", vllm: "0.34.0", ray: "none" });
        expect(report.text.split("\n")[0]).toBe("image vllm-node:2026: vLLM 0.34.0, Ray not installed (as the last up's argument check found them)");
        expect(statusReport(config, head("completion ok")).text.split("\n")[0]).toMatch(/^image: no up has checked it yet/);
    });

    it("says not serving when a completion fails or a serving container is down", () => {
        expect(statusReport(config, head("completion fail HTTP 500")).serving).toBe(false);
        const down = statusReport(config, head("completion ok", false));
        expect(down.serving).toBe(false);
        expect(down.text).toMatch(/vllm-fleet-ray +exited \(exit 137\)/);
        expect(down.text.endsWith("serving: NO")).toBe(true);
    });
});

describe("watchdogLines", () => {
    it("reads the watchdog's state file, or says it is not there", () => {
        expect(watchdogLines(undefined)).toEqual(["watchdog: not running"]);
        expect(watchdogLines("[]")).toEqual(["watchdog: running, nothing to report"]);
        expect(watchdogLines("{oops")[0]).toMatch(/^watchdog: unreadable state/);
    });
});

describe("the gateway's row", () => {
    const gateway = {
        node: "spark3",
        endpoint: "http://10.1.230.182:4000/v1",
        routes: { big: { service: "big", url: "http://192.168.200.12:8000" }, coder: { service: "coder", url: "http://192.168.200.14:8001" } },
    };
    const workers = (...pairs: [string, string][]) => ({ json: JSON.stringify({ workers: pairs.map(([url, model]) => ({ url, model_id: model, is_healthy: true })) }) });
    const both = workers(["http://192.168.200.12:8000", "big"], ["http://192.168.200.14:8001", "coder"]);

    it("says where it answers and that every route is registered and up", () => {
        const report = gatewayReport(gateway, { workers: both, completions: { big: { status: 200, detail: "" }, coder: { status: 200, detail: "" } } });
        expect(report.text.split("\n")).toEqual([
            "gateway on spark3: http://10.1.230.182:4000/v1",
            "  router: answering, 2 workers registered",
            "  big -> service big http://192.168.200.12:8000: registered, up",
            "  coder -> service coder http://192.168.200.14:8001: registered, up",
            "gateway serving: yes",
        ]);
        expect(report.serving).toBe(true);
    });

    it("names a route that is down, with the gateway's answer, and one the router lacks", () => {
        const report = gatewayReport(gateway, {
            workers: workers(["http://192.168.200.12:8000", "big"]),
            completions: { big: { status: 200, detail: "" }, coder: { status: 503, detail: "No available workers (all circuits open or unhealthy)" } },
        });
        expect(report.text).toContain("  coder -> service coder http://192.168.200.14:8001: NOT registered, DOWN (HTTP 503: No available workers (all circuits open or unhealthy))");
        expect(report.text).toContain("  big -> service big http://192.168.200.12:8000: registered, up");
        expect(report.serving).toBe(false);
    });

    it("says when the router does not answer at all", () => {
        const report = gatewayReport(gateway, { workers: { error: "connect ECONNREFUSED 10.1.230.182:4000" }, completions: { big: { status: 0, detail: "fetch failed" }, coder: { status: 0, detail: "fetch failed" } } });
        expect(report.text).toContain("  router: not answering (connect ECONNREFUSED 10.1.230.182:4000)");
        expect(report.text).toContain("  big -> service big http://192.168.200.12:8000: unknown, DOWN (no answer: fetch failed)");
        expect(report.serving).toBe(false);
    });
});

describe("monitoringReport", () => {
    const monitoring = { node: "spark1", endpoint: "http://10.1.230.180:9090", targets: ["vllm 192.168.200.12:8000", "node 192.168.200.12:9100"] };
    const target = (job: string, instance: string, health: string, lastError = "") => ({ labels: { job, instance }, health, lastError });

    it("counts the targets up, names each one down with Prometheus's reason, and lists the alerts firing and pending", () => {
        const text = monitoringReport(
            monitoring,
            {
                targets: { activeTargets: [target("vllm", "192.168.200.12:8000", "down", "connection refused"), target("node", "192.168.200.12:9100", "up"), target("prometheus", "127.0.0.1:9090", "up")] },
                alerts: {
                    alerts: [
                        { labels: { alertname: "ServiceDown", service: "vllm" }, annotations: { summary: "service vllm does not answer at 192.168.200.12:8000 (its /metrics)" }, state: "firing", activeAt: "2026-12-07T03:00:00Z" },
                        { labels: { alertname: "NodeMemoryLow", node: "spark2" }, state: "pending", activeAt: "2026-12-07T03:00:50Z" },
                        { labels: { alertname: "Gone" }, state: "inactive" },
                    ],
                },
            },
            new Date("2026-12-07T03:01:00Z"),
        );
        expect(text.split("\n")).toEqual([
            "monitoring on spark1: http://10.1.230.180:9090",
            "  targets: 1 of 2 up",
            "  target vllm 192.168.200.12:8000 DOWN (connection refused)",
            "  alert ServiceDown FIRING for 60 s: service vllm does not answer at 192.168.200.12:8000 (its /metrics)",
            '  alert NodeMemoryLow pending for 10 s: {"alertname":"NodeMemoryLow","node":"spark2"}',
        ]);
    });

    it("says when no alert fires, and when Prometheus does not answer", () => {
        const calm = monitoringReport(monitoring, { targets: { activeTargets: [target("vllm", "192.168.200.12:8000", "up")] }, alerts: { alerts: [] } });
        expect(calm.split("\n").slice(1)).toEqual(["  targets: 1 of 1 up", "  alerts: none firing"]);
        expect(monitoringReport(monitoring, { error: "fetch failed" })).toBe("monitoring on spark1: http://10.1.230.180:9090\n  Prometheus: not answering (fetch failed)");
    });
});
