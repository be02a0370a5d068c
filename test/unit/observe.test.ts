/**
 * Reconciliation against the hosts (infra/core/observe.ts, reconcile.ts): what the read of the nodes finds, and which
 * containers a run replaces because of it. Pure tests first, then the program under mocks.
 */
import { describe, expect, it } from "vitest";
import { LiveContainer, NodeObservation, checkOwnership, parseObservation } from "../../infra/core/observe";
import { DEFAULT_CONTAINERS, REVISION_LABEL } from "../../infra/core/names";
import { reconcile } from "../../infra/core/reconcile";
import { MockRun, changedInputs as changed, liveAfter, runProgram, sparkProbeOutput } from "./mocks";
import { sparkDuo } from "./stacks";

const probe = (node: string) => sparkProbeOutput(node === "spark1" ? "192.168.200.12" : "192.168.200.13", node === "spark1" ? "10.1.230.180" : "10.1.230.181");

function container(name: string, revision: string, state: Partial<LiveContainer> = {}): LiveContainer {
    return { name, id: `${name}-${revision}`, status: "running", running: true, restarting: false, exitCode: 0, restartCount: 0, startedAt: "", labels: { [REVISION_LABEL]: revision }, ...state };
}
const facts = parseObservation("x", probe("spark1")).facts;
function observed(node: string, containers: LiveContainer[], extra: Partial<NodeObservation> = {}): NodeObservation {
    return { node, facts, containers, ...extra };
}
const serving = { serve: { running: true, token: "t1" }, endpoint: { health: "200", completionOk: true, detail: "" } };
const nodes = [
    { name: "spark1", host: "a", user: "u", port: 22 },
    { name: "spark2", host: "b", user: "u", port: 22 },
];
let counter = 0;
const fresh = () => `new${++counter}`;

describe("parseObservation", () => {
    it("reads the containers, vllm serve in the head, the endpoint and the watchdog", () => {
        const text = [
            probe("spark1"),
            "### containers",
            JSON.stringify({ name: "/vllm-fleet-ray", id: "abc", status: "exited", running: false, restarting: false, exitCode: 137, restartCount: 2, startedAt: "t", labels: { [REVISION_LABEL]: "r1" } }),
            "### serve",
            "process no",
            "token r9",
            "### endpoint",
            "health 503",
            "completion fail HTTP 500",
            "### watchdog",
            '[{"event":"restart"}]',
        ].join("\n");
        const observation = parseObservation("spark1", text);
        expect(observation.containers).toEqual([expect.objectContaining({ name: "vllm-fleet-ray", running: false, exitCode: 137, restartCount: 2 })]);
        expect(observation.serve).toEqual({ running: false, token: "r9" });
        expect(observation.endpoint).toEqual({ health: "503", completionOk: false, detail: "HTTP 500" });
        expect(observation.watchdog).toBe('[{"event":"restart"}]');
        expect(observation.facts.gpus).toHaveLength(1);
    });
});

describe("reconcile, ray executor", () => {
    const config = { executor: "ray" as const, nodes, containers: DEFAULT_CONTAINERS };

    it("keeps every revision of a healthy cluster and says nothing", () => {
        const result = reconcile(config, [observed("spark1", [container("vllm-fleet-ray", "h")], serving), observed("spark2", [container("vllm-fleet-ray", "w")])], fresh);
        expect(result).toMatchObject({ revisions: { spark1: "h", spark2: "w" }, serveToken: "t1", findings: [], deployed: true });
    });

    it("gives a first deployment new revisions, without findings", () => {
        const result = reconcile(config, [observed("spark1", []), observed("spark2", [])], fresh);
        expect(result.deployed).toBe(false);
        expect(result.findings).toEqual([]);
        expect(result.revisions.spark1).toMatch(/^new/);
    });

    it.each([
        ["exited", { running: false, status: "exited", exitCode: 137 }, "is exited (exit 137, 0 restarts)"],
        ["stuck restarting", { restarting: true, status: "restarting", exitCode: 1, restartCount: 10 }, "is restarting (exit 1, 10 restarts)"],
    ])("replaces a worker that is %s, and only it (vLLM starts again)", (_label, state, words) => {
        const result = reconcile(config, [observed("spark1", [container("vllm-fleet-ray", "h")], { ...serving, endpoint: { health: "503", completionOk: false, detail: "HTTP 500" } }), observed("spark2", [container("vllm-fleet-ray", "w", state)])], fresh);
        expect(result.revisions.spark1).toBe("h");
        expect(result.revisions.spark2).toMatch(/^new/);
        expect(result.serveToken).toMatch(/^new/);
        expect(result.findings[0]).toBe(`node spark2: container vllm-fleet-ray ${words}; up replaces a Ray worker`);
    });

    it("replaces a head paused by hand (Docker counts it running; nothing in it answers)", () => {
        const paused = reconcile(config, [observed("spark1", [container("vllm-fleet-ray", "h", { status: "paused" })], { ...serving, endpoint: { health: "none", completionOk: false, detail: "no answer" } }), observed("spark2", [container("vllm-fleet-ray", "w")])], fresh);
        expect(paused.revisions.spark1).toMatch(/^new/);
        expect(paused.revisions.spark2).toBe("w");
        expect(paused.findings[0]).toBe("node spark1: container vllm-fleet-ray is paused (exit 0, 0 restarts); up replaces the Ray head and its workers");
    });

    it("replaces a missing head (its workers follow through its id)", () => {
        const result = reconcile(config, [observed("spark1", [], { serve: { running: false, token: "" } }), observed("spark2", [container("vllm-fleet-ray", "w")])], fresh);
        expect(result.revisions.spark1).toMatch(/^new/);
        expect(result.findings[0]).toBe("node spark1: container vllm-fleet-ray is missing; up replaces the Ray head and its workers");
    });

    it("starts vllm serve again when it is gone, or when the endpoint does not answer, keeping the Ray containers", () => {
        const gone = reconcile(config, [observed("spark1", [container("vllm-fleet-ray", "h")], { ...serving, serve: { running: false, token: "t1" } }), observed("spark2", [container("vllm-fleet-ray", "w")])], fresh);
        expect(gone.revisions).toEqual({ spark1: "h", spark2: "w" });
        expect(gone.serveToken).toMatch(/^new/);
        expect(gone.findings).toEqual(["node spark1: vllm serve is not running; up starts vllm serve again"]);
        const wedged = reconcile(config, [observed("spark1", [container("vllm-fleet-ray", "h")], { ...serving, endpoint: { health: "200", completionOk: false, detail: "TimeoutError" } }), observed("spark2", [container("vllm-fleet-ray", "w")])], fresh);
        expect(wedged.serveToken).toMatch(/^new/);
        expect(wedged.findings).toEqual(["node spark1: the endpoint does not answer a completion (TimeoutError); up starts vllm serve again"]);
    });
});

describe("reconcile, mp executor", () => {
    const config = { executor: "mp" as const, nodes, containers: DEFAULT_CONTAINERS };

    it("keeps a serving group", () => {
        const result = reconcile(config, [observed("spark1", [container("vllm-fleet-vllm", "a")], serving), observed("spark2", [container("vllm-fleet-vllm", "b")])], fresh);
        expect(result.revisions).toEqual({ spark1: "a", spark2: "b" });
        expect(result.findings).toEqual([]);
    });

    it("replaces the whole group when one rank is dead, or when the endpoint does not answer", () => {
        const dead = reconcile(config, [observed("spark1", [container("vllm-fleet-vllm", "a")], serving), observed("spark2", [container("vllm-fleet-vllm", "b", { running: false, status: "exited", exitCode: 1 })])], fresh);
        expect(dead.revisions.spark1).toBe(dead.revisions.spark2);
        expect(dead.revisions.spark1).toMatch(/^new/);
        expect(dead.findings).toEqual(["node spark2: container vllm-fleet-vllm is exited (exit 1, 0 restarts); up replaces every vLLM rank (the group restarts as one)"]);
        const wedged = reconcile(config, [observed("spark1", [container("vllm-fleet-vllm", "a")], { endpoint: { health: "503", completionOk: false, detail: "HTTP 500" } }), observed("spark2", [container("vllm-fleet-vllm", "b")])], fresh);
        expect(wedged.revisions.spark1).toMatch(/^new/);
        expect(wedged.findings[0]).toContain("node spark1: the endpoint does not answer a completion (HTTP 500)");
    });
});

/** live.sh's output after `run`, with one node's serving container changed by `edit`. */
function liveWith(run: MockRun, node: string, edit: (line: string) => string): (name: string) => string {
    const live = liveAfter(run);
    return (name: string) => (name === node ? live(name).split("\n").map((line) => (line.startsWith("{") ? edit(line) : line)).join("\n") : live(name));
}

describe("the program replaces only what the hosts show broken", async () => {
    const duo = { ...sparkDuo, containerDriver: "ssh", commandRunner: "builtin" };
    const first = await runProgram(duo, probe);

    it("changes nothing after a healthy run", async () => {
        expect(changed(first, await runProgram(duo, probe, undefined, liveAfter(first)))).toEqual([]);
    });

    it("ray: a dead worker is replaced and vllm serve started again; the head stays", async () => {
        const live = liveWith(first, "spark2", (line) => line.replace('"running":true', '"running":false').replace('"status":"running"', '"status":"exited"'));
        const broken = (node: string) => (node === "spark1" ? liveAfter(first)(node).replace("completion ok", "completion fail HTTP 500") : live(node));
        expect(changed(first, await runProgram(duo, probe, undefined, broken))).toEqual(["ray-spark2-ray-worker", "vllm-serve"]);
    });

    it("ray: a head node that lost its containers gets a new head, vllm serve and watchdog (workers follow the head's new id)", async () => {
        const live = liveWith(first, "spark1", () => "");
        expect(changed(first, await runProgram(duo, probe, undefined, live))).toEqual(["ray-spark1-ray-head", "vllm-serve", "vllm-watchdog"]);
    });

    it("a stopped watchdog is replaced, and nothing else", async () => {
        const live = liveWith(first, "spark1", (line) => (line.includes("vllm-fleet-watchdog") ? line.replace('"running":true', '"running":false') : line));
        expect(changed(first, await runProgram(duo, probe, undefined, live))).toEqual(["vllm-watchdog"]);
    });

    it("mp: a dead headless rank replaces both ranks", async () => {
        const mp = { ...duo, executor: "mp" };
        const firstMp = await runProgram(mp, probe);
        const live = liveWith(firstMp, "spark2", (line) => line.replace('"running":true', '"running":false'));
        expect(changed(firstMp, await runProgram(mp, probe, undefined, live))).toEqual(["vllm-spark1-rank0", "vllm-spark2-rank1"]);
    });
});

describe("nodes are never shared with another stack by accident", async () => {
    const duo = { ...sparkDuo, containerDriver: "ssh", commandRunner: "builtin" };
    const first = await runProgram(duo, probe);

    it("reads the containers of others that the stack would touch", () => {
        const text = [probe("spark2"), "### containers", "### foreign", "vllm-fleet-ray\tprod\tUp 3 hours", "vllm-fleet-watchdog\t\tExited (0) 2 days ago", ""].join("\n");
        expect(parseObservation("spark2", text).foreign).toEqual([
            { name: "vllm-fleet-ray", stack: "prod", status: "Up 3 hours" },
            { name: "vllm-fleet-watchdog", stack: "", status: "Exited (0) 2 days ago" },
        ]);
    });

    it("refuses, naming node, container and owner, one line each", () => {
        const foreign = [
            { ...observed("spark1", []), foreign: [] },
            { ...observed("spark2", []), foreign: [{ name: "vllm-fleet-ray", stack: "prod", status: "Up 3 hours" }, { name: "vllm-fleet-vllm", stack: "", status: "Created" }] },
        ];
        expect(() => checkOwnership("dev", foreign)).toThrow(
            /^node spark2: container vllm-fleet-ray \(Up 3 hours\) belongs to the stack prod, not to dev; .*pulumi destroy --stack prod.*\nnode spark2: container vllm-fleet-vllm \(Created\) was not made by a vllm-fleet stack .*docker rm -f vllm-fleet-vllm/,
        );
        expect(() => checkOwnership("dev", [observed("spark1", []), observed("spark2", [])])).not.toThrow();
    });

    it("refuses at preview before any resource is registered when another stack serves on a node", async () => {
        const live = (node: string) => (node === "spark2" ? `${liveAfter(first)(node)}### foreign\nvllm-fleet-ray\tprod\tUp 3 hours\n` : liveAfter(first)(node));
        await expect(runProgram(duo, probe, undefined, live)).rejects.toThrow(/node spark2: container vllm-fleet-ray \(Up 3 hours\) belongs to the stack prod/);
    });
});
