/** `npm run status`'s report (tools/statusReport.ts) from one read of the fleet. */
import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../infra/core/config";
import { parseObservation } from "../../infra/core/observe";
import { statusReport, watchdogLines } from "../../tools/statusReport";
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
