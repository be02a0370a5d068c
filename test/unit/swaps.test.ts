/**
 * Swaps (plan/swaps.ts), table-driven and without mocks: what runs now is read from containers as
 * live.sh reports them (labels, `.Args`, the Ray head's serve arguments); the plan says blue/green
 * when both services fit side by side, stop first with the memory numbers or the port otherwise,
 * refuses with `swap: refuseDowntime`, stays silent about a plain removal, and warns about a served
 * name or model changed in place.
 */
import { describe, expect, it } from "vitest";
import { parseFleetConfig, serviceConfig } from "../../infra/core/config";
import { GIB } from "../../infra/core/fit";
import { REVISION_LABEL, ROLE_LABEL, SERVICE_LABEL, STACK_LABEL, serviceContainers } from "../../infra/core/names";
import { LiveContainer, NodeObservation, parseObservation } from "../../infra/core/observe";
import { RANK_KEEPER_PATH, RunningService, SwapError, SwapService, planSwaps, runningServices, vllmServeArgs } from "../../infra/core/plan";

const quad = {
    nodes: [1, 2, 3, 4].map((index) => ({ name: `spark${index}`, host: `10.1.230.${179 + index}` })),
    ssh: { user: "aurora" },
    fabric: { subnet: "192.168.200.0/24" },
};
const image = { name: "nvcr.io/nvidia/vllm:25.11-py3" };
const entry = (name: string, extra: Record<string, unknown>) => ({ name, image, model: { path: `/models/${name}`, servedName: "coder" }, ...extra });

/** The services of a stack, each as it sees the config (its utilization as given, else the budgets' 0.9). */
function services(entries: readonly Record<string, unknown>[], extra: Record<string, unknown> = {}): SwapService[] {
    const config = parseFleetConfig({ ...quad, services: entries, ...extra });
    return config.services.map((service) => ({ name: service.name, config: serviceConfig(config, service, 0.9), keyPrefix: service.keyPrefix }));
}

/** A running container of the stack as live.sh reports it. */
function container(name: string, service: string, role: string, args: readonly string[]): LiveContainer {
    return {
        name,
        id: `${name}-id`,
        status: "running",
        running: true,
        restarting: false,
        exitCode: 0,
        restartCount: 0,
        startedAt: "2026-12-05T04:00:00Z",
        labels: { [STACK_LABEL]: "unit", [SERVICE_LABEL]: service, [ROLE_LABEL]: role, [REVISION_LABEL]: "r1" },
        image: image.name,
        args,
    };
}

/** What the read finds of `running` (one service, as planned from `entry`): an mp service's ranks, or a Ray cluster with vllm serve in its head. */
function observed(running: SwapService): NodeObservation[] {
    const { config, name } = running;
    const names = serviceContainers(name);
    const nodes = config.nodes.map((node) => node.name);
    return nodes.map((node, index) => {
        const mp = { nnodes: nodes.length, nodeRank: index, masterAddr: "192.168.200.10", masterPort: config.vllm.masterPort };
        const containers =
            config.executor === "mp"
                ? [container(names.vllm, name, index === 0 ? "vllm-rank0" : "vllm-headless", [RANK_KEEPER_PATH, "vllm", ...vllmServeArgs(config, "0.0.0.0", mp)])]
                : [container(names.ray, name, index === 0 ? "ray-head" : "ray-worker", ["start", "--block", ...(index === 0 ? ["--head", "--port", String(config.ray.port)] : [])])];
        if (index === 0) {
            containers.push(container(names.watchdog, name, "watchdog", ["-c", "watchdog"]));
        }
        const serveArgs = config.executor === "ray" && index === 0 ? { [names.ray]: vllmServeArgs(config, "0.0.0.0") } : {};
        return { node, facts: {} as NodeObservation["facts"], containers, serveArgs };
    });
}

const MEMORY = 112 * GIB;
const plan = (config: readonly SwapService[], running: readonly RunningService[], policy: "stopFirst" | "refuseDowntime" = "stopFirst") =>
    planSwaps({ services: config, running, memoryBytes: () => MEMORY, policy });

const CODER = entry("coder", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8001, masterPort: 29501, gpuMemoryUtilization: 0.4 } });
const coderRunning = () => runningServices(observed(services([CODER])[0]));

describe("runningServices", () => {
    it("reads an mp service from its ranks' arguments: nodes, served name, model, port, share, rendezvous port", () => {
        expect(coderRunning()).toEqual([
            {
                name: "coder",
                executor: "mp",
                firstNode: "spark3",
                nodes: ["spark3", "spark4"],
                containers: { spark3: ["vllm-fleet-coder-vllm", "vllm-fleet-coder-watchdog"], spark4: ["vllm-fleet-coder-vllm"] },
                servedName: "coder",
                model: "/models/coder",
                image: image.name,
                port: 8001,
                gpuMemoryUtilization: 0.4,
                masterPort: 29501,
                rayPort: undefined,
            },
        ]);
    });

    it("reads a ray service from the serve arguments in its head, and its GCS port from the head's", () => {
        const big = services([entry("big", { nodes: ["spark1", "spark2"], model: { path: "/models/big", servedName: "big" }, vllm: { port: 8000, gpuMemoryUtilization: 0.6 }, ray: { port: 6380 } })])[0];
        expect(runningServices(observed(big))[0]).toMatchObject({ name: "big", executor: "ray", firstNode: "spark1", nodes: ["spark1", "spark2"], servedName: "big", port: 8000, gpuMemoryUtilization: 0.6, rayPort: 6380 });
    });

    it("counts a node read once per service once, and leaves stopped containers out", () => {
        const reads = observed(services([CODER])[0]);
        const stopped = reads.map((read) => ({ ...read, containers: read.containers.map((one) => ({ ...one, running: false, status: "exited" })) }));
        expect(runningServices([...reads, ...reads])).toHaveLength(1);
        expect(runningServices([...reads, ...reads])[0].containers.spark3).toHaveLength(2);
        expect(runningServices(stopped)).toEqual([]);
    });

    it("parses what live.sh prints: each container's image and arguments, the other Ray heads' serve arguments, the own head's", () => {
        const output = [
            "### containers",
            JSON.stringify({ name: "/vllm-fleet-old-ray", id: "abc", status: "running", running: true, restarting: false, exitCode: 0, restartCount: 0, startedAt: "x", labels: {}, image: "img:1", args: ["start", "--head"] }),
            "### serve-args",
            'vllm-fleet-old-ray\t["serve","/models/a","--served-model-name","a"]',
            "vllm-fleet-broken-ray\t",
            "### serve",
            "process yes",
            "token t1",
            'args ["serve","/models/b","--port","8000"]',
        ].join("\n");
        const observation = parseObservation("spark1", output);
        expect(observation.containers[0]).toMatchObject({ name: "vllm-fleet-old-ray", image: "img:1", args: ["start", "--head"] });
        expect(observation.serveArgs).toEqual({ "vllm-fleet-old-ray": ["serve", "/models/a", "--served-model-name", "a"] });
        expect(observation.serve).toEqual({ running: true, token: "t1", args: ["serve", "/models/b", "--port", "8000"] });
    });
});

describe("planSwaps", () => {
    const cases: { title: string; next: Record<string, unknown>; mode?: "blue-green" | "stop-first"; reason?: RegExp }[] = [
        {
            title: "fits on the same nodes (0.4 + 0.4, another port): blue/green",
            next: entry("coder2", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8003, masterPort: 29503, gpuMemoryUtilization: 0.4 } }),
            mode: "blue-green",
        },
        {
            title: "on other nodes, same port: blue/green",
            next: entry("coder2", { nodes: ["spark1", "spark2"], executor: "mp", vllm: { port: 8001, masterPort: 29501, gpuMemoryUtilization: 0.9 } }),
            mode: "blue-green",
        },
        {
            title: "memory does not fit (0.4 held + 0.7 planned): stop first, with the numbers",
            next: entry("coder2", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8003, masterPort: 29503, gpuMemoryUtilization: 0.7 } }),
            mode: "stop-first",
            reason: /spark3 \(112\.0 GiB\): memory: coder holds 0\.4 \(44\.8 GiB\) while it runs, and the services planned there take 0\.7 \(78\.4 GiB\) \(coder2 0\.7\): 1\.1 of the node together, more than 1/,
        },
        {
            title: "the same API port on the first node: stop first, naming the port and the key",
            next: entry("coder2", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8001, masterPort: 29503, gpuMemoryUtilization: 0.4 } }),
            mode: "stop-first",
            reason: /spark3: port 8001, vllm-fleet:services\[0\]\.vllm\.port of coder2, is the API port of coder, held while it runs/,
        },
        {
            title: "the same rendezvous port: stop first",
            next: entry("coder2", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8003, masterPort: 29501, gpuMemoryUtilization: 0.4 } }),
            mode: "stop-first",
            reason: /port 29501, vllm-fleet:services\[0\]\.vllm\.masterPort of coder2, is the mp rendezvous port of coder/,
        },
    ];

    it.each(cases)("$title", ({ next, mode, reason }) => {
        const result = plan(services([next]), coderRunning());
        expect(result.swaps).toEqual([expect.objectContaining({ servedName: "coder", from: "coder", to: "coder2", mode })]);
        if (mode === "blue-green") {
            expect(result.stopsBefore).toEqual({});
            expect(result.warnings).toEqual([]);
            expect(result.notes).toEqual([expect.stringMatching(/^swap of model "coder" from service coder to service coder2: blue\/green/)]);
        } else {
            expect(result.swaps[0].reasons.join("\n")).toMatch(reason!);
            // Every node of the old service, the watchdog first (it would start vLLM again).
            expect(result.stopsBefore).toEqual({
                coder2: [
                    { service: "coder", node: "spark3", containers: ["vllm-fleet-coder-watchdog", "vllm-fleet-coder-vllm"] },
                    { service: "coder", node: "spark4", containers: ["vllm-fleet-coder-vllm"] },
                ],
            });
            expect(result.warnings).toHaveLength(1);
            expect(result.warnings[0]).toMatch(/^swap of model "coder" from service coder to service coder2 stops coder first \(not blue\/green\)/);
            expect(result.warnings[0]).toContain('"coder" is not served until coder2 is ready: at most 1800 s (timeouts.vllmReadySeconds');
            expect(result.warnings[0]).toMatch(reason!);
        }
    });

    it("two Ray clusters on one node: stop first", () => {
        const big = services([entry("big", { nodes: ["spark1", "spark2"], vllm: { port: 8000, gpuMemoryUtilization: 0.3 } })])[0];
        const next = services([entry("big2", { nodes: ["spark2"], vllm: { port: 8005, gpuMemoryUtilization: 0.3 } })]);
        const result = plan(next, runningServices(observed(big)));
        expect(result.swaps[0]).toMatchObject({ mode: "stop-first", reasons: [expect.stringMatching(/^spark2: two Ray clusters on one node/)] });
        expect(result.stopsBefore.big2.map((stop) => stop.node)).toEqual(["spark1", "spark2"]);
    });

    it("with swap refuseDowntime, a swap that would stop first is refused, naming the service, the model and the reason", () => {
        const next = services([entry("coder2", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8001, masterPort: 29503, gpuMemoryUtilization: 0.4 } })], { swap: "refuseDowntime" });
        expect(() => plan(next, coderRunning(), next[0].config.swap)).toThrow(SwapError);
        expect(() => plan(next, coderRunning(), "refuseDowntime")).toThrow(/swap of model "coder" from service coder to service coder2 refused \(vllm-fleet:swap is refuseDowntime\).*port 8001/);
    });

    it("a plain removal is no swap: nothing to say, nothing to stop", () => {
        const other = services([entry("other", { nodes: ["spark1", "spark2"], executor: "mp", model: { path: "/models/other", servedName: "other" }, vllm: { port: 8001, masterPort: 29501 } })]);
        expect(plan(other, coderRunning())).toEqual({ swaps: [], stopsBefore: {}, warnings: [], notes: [] });
    });

    it("a removal in the way of a new service (not its name) stops it first, and says so without calling it a swap", () => {
        const other = services([entry("other", { nodes: ["spark3"], executor: "mp", model: { path: "/models/other", servedName: "other" }, vllm: { port: 8001, masterPort: 29505, gpuMemoryUtilization: 0.3 } })]);
        const result = plan(other, coderRunning());
        expect(result.swaps).toEqual([]);
        expect(result.stopsBefore.other.map((stop) => stop.node)).toEqual(["spark3", "spark4"]);
        expect(result.warnings).toEqual([expect.stringMatching(/^service other starts only once coder, which leaves the config, has stopped .*port 8001/)]);
    });

    it("a service that keeps running and its settings: no swap, no warning", () => {
        expect(plan(services([CODER]), coderRunning())).toEqual({ swaps: [], stopsBefore: {}, warnings: [], notes: [] });
    });

    it("a served name or model changed in place (same service) is a replacement with downtime, and suggests a new service", () => {
        const renamed = services([{ ...CODER, model: { path: "/models/coder-v2", servedName: "coder-v2" } }]);
        const result = plan(renamed, coderRunning());
        expect(result.stopsBefore).toEqual({});
        expect(result.warnings).toEqual([
            expect.stringMatching(
                /^service coder changes what it serves in place \(served name "coder" -> "coder-v2", model \/models\/coder -> \/models\/coder-v2\): a replacement with downtime, "coder" is not served .* declare the new model as a new service \(e\.g\. coder-2/,
            ),
        ]);
    });

    it("counts every share planned on the node beside the old one (a service that stays, and the new one)", () => {
        const stays = entry("small", { nodes: ["spark3"], executor: "mp", model: { path: "/models/small", servedName: "small" }, vllm: { port: 8009, masterPort: 29509, gpuMemoryUtilization: 0.3 } });
        const next = entry("coder2", { nodes: ["spark3", "spark4"], executor: "mp", vllm: { port: 8003, masterPort: 29503, gpuMemoryUtilization: 0.4 } });
        const running = [...coderRunning(), ...runningServices(observed(services([stays])[0]))];
        const result = plan(services([stays, next]), running);
        expect(result.swaps[0].mode).toBe("stop-first");
        expect(result.swaps[0].reasons).toEqual([expect.stringContaining("the services planned there take 0.7 (78.4 GiB) (small 0.3 + coder2 0.4): 1.1 of the node together")]);
    });
});

