/**
 * End to end on simulated Sparks, through the real Pulumi engine: the Ray backend with the ssh
 * container driver. Real SSH, Docker and Ray; the GPU, the fabric link and vLLM are stand-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { RAY_CONTAINER } from "../../infra/core/names";
import { SIM_VLLM, SimCluster, TINY_MODEL_DIR as MODEL_DIR, complete, offFabric, onNode, simDeployment, simStackConfig, tearDown, timer, trafficOf } from "./simCluster";
const timings: Record<string, number> = {};
const timed = timer(timings);

/** The node IPs the Ray cluster itself reports (NodeManagerAddress of every live node). */
function rayNodeIps(cluster: SimCluster): string[] {
    const script = `import ray; ray.init(address="auto", logging_level="ERROR"); print("\\n".join(sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])))`;
    return onNode(cluster.nodes[0], `docker exec ${RAY_CONTAINER} python3 -c '${script}'`).trim().split("\n");
}

function containerIds(cluster: SimCluster): string[] {
    return cluster.nodes.map((node) => onNode(node, `docker inspect --format '{{.Id}}' ${RAY_CONTAINER}`).trim());
}

// Two nodes; three Ray nodes, each registered and serving on its own fabric interface, are the
// case of fabric.test.ts.
// The head node keeps its images in Docker's containerd image store (the default of fresh Docker 29
// installs), the worker in the classic one: the read of the nodes, the containers, the watchdog and
// their replacement work on either.
describe("Ray backend on 2 simulated Sparks (the head on the containerd image store)", () => {
    const nodes = 2;
    const name = "e2e-ray2";
    let cluster: SimCluster;
    let stack: Stack;
    let second: Stack | undefined;
    let workDir: string;
    let envVars: Record<string, string>;

    beforeAll(async () => {
        ({ cluster, stack, workDir, envVars } = await simDeployment(name, nodes, { parallelism: { tensor: nodes } }, { stores: ["containerd", "classic"] }));
    });

    afterAll(async () => {
        await tearDown({ stacks: [second, stack], cluster: name, workDir });
        console.log(`timings (s) for ${nodes} nodes: ${JSON.stringify(timings)}`);
    });

    it("comes up and answers a completion that names every fabric address", async () => {
        const up = await timed(`${nodes}-cold-up`, () => stack.up());
        expect(up.summary.result).toBe("succeeded");
        const fabricIps = cluster.nodes.map((node) => node.fabricIp);
        expect(Object.values(up.outputs.fabricIps.value).sort()).toEqual([...fabricIps].sort());
        expect(up.outputs.endpoint.value).toBe(`http://${cluster.nodes[0].sshHost}:8000/v1`);

        const text = (await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value)).choices[0].text;
        for (const ip of fabricIps) {
            expect(text).toContain(ip);
        }
        for (const node of cluster.nodes) {
            expect(text).not.toContain(node.mgmtIp);
        }
    });

    it("has every Ray node registered under its fabric address and none under a management one", () => {
        expect(rayNodeIps(cluster)).toEqual(cluster.nodes.map((node) => node.fabricIp).sort());
        // The autoscaler's summary lags node registration ("No cluster status"): ask until it is there.
        const status = onNode(
            cluster.nodes[0],
            `for i in $(seq 1 20); do s=$(docker exec ${RAY_CONTAINER} ray status 2>&1); case "$s" in *" GPU"*) break;; esac; sleep 2; done; printf '%s' "$s"`,
        );
        expect(status).toMatch(new RegExp(`/${nodes}\\.0 GPU`)); // every node's GPU counted
        for (const node of cluster.nodes) {
            expect(status).not.toContain(node.mgmtIp);
        }
    });

    // Per completion the stand-in's driver calls each rank's Ray actor (real Ray: a task pushed to
    // the worker's node at the address it registered, about 700 bytes, and its reply); what Ray
    // sends on its own flows idle too and is taken away. On the fabric only the direction the work
    // is handed out is read: Ray's own reports from the worker to the head come in bursts larger
    // than the replies.
    it("carries the ranks' traffic on the fabric interfaces, none on the worker node's management one", async () => {
        const outputs = await stack.outputs();
        const traffic = await trafficOf(cluster, async () => {
            for (let index = 0; index < 100; index++) {
                await complete(outputs.endpoint.value as string, "tiny-moe", outputs.apiKey.value as string);
            }
        });
        console.log(`100 completions (stand-in, Ray): ${JSON.stringify(traffic)}`);
        expect(offFabric(traffic, 100 * 90, "handed out")).toEqual([]);
    });

    it("reports no changes on a second up and touches no host", async () => {
        const before = containerIds(cluster);
        const again = await timed(`${nodes}-noop-up`, () => stack.up({ expectNoChanges: true }));
        expect(again.summary.result).toBe("succeeded");
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        expect(containerIds(cluster)).toEqual(before);
    });

    it("refuses a second stack aimed at its nodes at preview and at up, naming node, container and owning stack; the first serves on with the same containers, and the second's destroy touches none", async () => {
        const owned = () =>
            cluster.nodes.map((node) => onNode(node, `docker ps -a --filter label=vllm-fleet.stack=${stack.name} --format '{{.Names}} {{.ID}} {{.State}}'`).trim());
        const before = owned();
        expect(before.every((lines) => lines.includes(`${RAY_CONTAINER} `) && lines.split("\n").every((line) => line.endsWith(" running")))).toBe(true);
        second = await openStack(`${name}-second`, { workDir, envVars, config: simStackConfig(cluster, MODEL_DIR, { parallelism: { tensor: nodes } }) });
        const refusal = new RegExp(`node spark1: container ${RAY_CONTAINER} \\(Up .*?\\) belongs to the stack ${stack.name}, not to ${name}-second; .*pulumi destroy --stack ${stack.name}`);
        await expect(second.preview()).rejects.toThrow(refusal);
        await expect(second.up()).rejects.toThrow(refusal);
        // Its destroy has nothing of its own to remove and removes nothing of the first's.
        const destroyed = await second.destroy();
        expect(destroyed.summary.result).toBe("succeeded");
        expect(owned()).toEqual(before);
        const outputs = await stack.outputs();
        expect((await complete(outputs.endpoint.value as string, "tiny-moe", outputs.apiKey.value as string)).choices[0].text).toMatch(/^ranks: /);
    });

    it("applies a max-model-len change to the vLLM service only", async () => {
        const before = containerIds(cluster);
        const watchdogId = () => onNode(cluster.nodes[0], "docker inspect --format '{{.Id}}' vllm-fleet-watchdog").trim();
        const watchdogBefore = watchdogId();
        await stack.setConfig("vllm-fleet:vllm", { value: JSON.stringify({ ...SIM_VLLM, maxModelLen: 2048 }) });
        const preview = await stack.preview();
        // vllm serve restarts in place after the image's vLLM checked its new arguments; each
        // node's fabric check runs again once vLLM serves again. The watchdog, which takes the
        // serve arguments from the Ray head, keeps running (its container among those below).
        expect(preview.changeSummary.update).toBe(2);
        expect(preview.changeSummary.replace ?? 0).toBe(nodes);
        expect(preview.changeSummary.create ?? 0).toBe(0);
        expect(preview.stdout).toMatch(/~ .*vllm-serve/);
        expect(preview.stdout).toMatch(/~ .*vllm-args-check/);
        expect(preview.stdout).not.toMatch(/vllm-watchdog/);
        expect(preview.stdout).toMatch(/\+-.*vllm-fabric-spark1/);

        const up = await timed(`${nodes}-vllm-change`, () => stack.up());
        expect(up.summary.resourceChanges?.update).toBe(2);
        expect(up.summary.resourceChanges?.replace).toBe(nodes);
        expect(containerIds(cluster)).toEqual(before);
        const models = (await (await fetch(`${up.outputs.endpoint.value}/models`, { headers: { Authorization: `Bearer ${up.outputs.apiKey.value}` } })).json()) as {
            data: { id: string; max_model_len: number }[];
        };
        expect(models.data[0]).toMatchObject({ id: "tiny-moe", max_model_len: 2048 });
        // The watchdog ran on, and would start vllm serve again with the new arguments.
        expect(watchdogId()).toBe(watchdogBefore);
        const args = JSON.parse(onNode(cluster.nodes[0], `docker exec ${RAY_CONTAINER} cat /tmp/vllm-fleet-serve.args`)) as string[];
        expect(args[args.indexOf("--max-model-len") + 1]).toBe("2048");
    });

    it("shows the phases of a slow vLLM start in up's output while the readiness gate waits", async () => {
        // The stand-in's start takes 24 s (test/sim/workload/vllm/v1/worker/gpu_model_runner.py reads
        // the pace from this file in the Ray head, where vllm serve runs); a change of max-model-len
        // restarts vllm serve once. The gate reads the log every 5 s: weights (~12 s), compiling
        // (~6 s) and CUDA graphs (~6 s) each span at least one read.
        const paceFile = "/tmp/vllm-sim-start-seconds";
        onNode(cluster.nodes[0], `docker exec ${RAY_CONTAINER} sh -c 'echo 24 > ${paceFile}'`);
        try {
            await stack.setConfig("vllm-fleet:vllm", { value: JSON.stringify({ ...SIM_VLLM, maxModelLen: 3072 }) });
            let output = "";
            const up = await timed(`${nodes}-slow-start`, () => stack.up({ onOutput: (text) => (output += text) }));
            expect(up.summary.result).toBe("succeeded");
            // The builtin runner prints each progress line as `vllm-serve: <phase>` while the step runs.
            const phases = [...output.matchAll(/vllm-serve: (?!still )([^\n]+)/g)].map((match) => match[1].trim());
            const distinct = phases.filter((phase, index) => phases.indexOf(phase) === index);
            const order = ["loading the model", "loading weights", "model loaded", "compiling", "compiled", "profiling memory", "KV cache allocated", "capturing CUDA graphs", "CUDA graphs captured", "engine ready", "starting the API server", "API server up"];
            const ranks = distinct.map((phase) => order.findIndex((start) => phase.startsWith(start)));
            expect(ranks.every((rank) => rank >= 0)).toBe(true);
            expect(new Set(ranks).size).toBeGreaterThanOrEqual(2);
            // First seen in the order of the start.
            expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
        } finally {
            onNode(cluster.nodes[0], `docker exec ${RAY_CONTAINER} rm -f ${paceFile}`);
        }
    });

    it("replaces the workers after a replaced head, which they then join (no worker tied to the old cluster)", async () => {
        const before = containerIds(cluster);
        const headUrn = (await stack.exportStack()).deployment.resources.find((r: { urn: string }) => r.urn.endsWith("::ray-spark1-ray-head")).urn;
        const up = await timed(`${nodes}-head-replaced`, () => stack.up({ replace: [headUrn] }));
        expect(up.summary.result).toBe("succeeded");
        const after = containerIds(cluster);
        after.forEach((id, index) => expect(id).not.toBe(before[index]));
        expect(rayNodeIps(cluster)).toEqual(cluster.nodes.map((node) => node.fabricIp).sort());
        const text = (await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value)).choices[0].text;
        for (const node of cluster.nodes) {
            expect(text).toContain(node.fabricIp);
        }
    });

    it("fails within a minute on a dead host, naming it", async () => {
        // An address on the cluster's own (internal) management network where no node answers.
        const deadHost = cluster.nodes[0].sshHost.replace(/\.\d+$/, ".99");
        const dead = await openStack(`${name}-dead`, {
            workDir,
            envVars,
            config: simStackConfig({ ...cluster, nodes: [{ ...cluster.nodes[0], name: "dead", index: 8, sshHost: deadHost }] }, MODEL_DIR, {
                parallelism: { tensor: 1 },
            }),
        });
        try {
            const start = Date.now();
            const failure = await dead.up().then(
                () => undefined,
                (error: Error) => error,
            );
            expect((Date.now() - start) / 1000).toBeLessThan(60);
            expect(failure?.message).toContain(`node spark9 (spark@${deadHost}:22): ssh failed`);
        } finally {
            await dead.workspace.removeStack(dead.name, { force: true }).catch(() => undefined);
        }
    });

    it("destroys everything it made on every node", async () => {
        const destroy = await timed(`${nodes}-destroy`, () => stack.destroy());
        expect(destroy.summary.result).toBe("succeeded");
        for (const node of cluster.nodes) {
            expect(onNode(node, `docker ps -aq --filter label=vllm-fleet.stack=${name}`).trim()).toBe("");
            expect(onNode(node, "docker ps -aq").trim()).toBe("");
            // Bracketed first letters keep grep from matching its own command line.
            expect(onNode(node, "ps -eo args | grep -E '[r]aylet|[g]cs_server|[v]llm serve' || true").trim()).toBe("");
        }
    });
});
