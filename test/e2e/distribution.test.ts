/**
 * End to end on simulated Sparks: what preflight catches before any container starts (a node whose
 * image differs, a node missing a weight file, a model that cannot fit) and the image copy that
 * fixes the first. Real SSH and Docker; the GPU, the fabric link and vLLM are stand-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../../infra/automation";
import { SimCluster, onNode, putTinyModel, simStackConfig, simUp, tearDown, tempWorkspace } from "./simCluster";

const MODEL_DIR = "/home/spark/models/tiny-moe";

async function failureOf(action: Promise<unknown>): Promise<string> {
    return action.then(
        () => {
            throw new Error("expected the deployment to fail");
        },
        (error: Error) => error.message,
    );
}

function imageId(cluster: SimCluster, index: number): string {
    return onNode(cluster.nodes[index], `docker image inspect --format '{{.Id}}' ${cluster.workloadImage}`).trim();
}

function noContainers(cluster: SimCluster): void {
    for (const node of cluster.nodes) {
        expect(onNode(node, "docker ps -aq").trim()).toBe("");
    }
}

describe("preflight and image copy on 2 simulated Sparks", () => {
    const name = "e2e-dist";
    let cluster: SimCluster;
    let workspace: { dir: string; envVars: Record<string, string> };
    const stacks: Stack[] = [];

    beforeAll(async () => {
        cluster = await simUp(name, 2);
        putTinyModel(cluster, MODEL_DIR);
        workspace = tempWorkspace(`vllm-fleet-${name}-`);
    });

    afterAll(async () => {
        await tearDown({ stacks, cluster: name, workDir: workspace?.dir });
    });

    it("refuses a node whose image differs, then fixes it by copying from the first node", async () => {
        // Same tag, another image: what a node that pulled a moving tag at another time has.
        onNode(
            cluster.nodes[1],
            `docker run --name drift --entrypoint sh ${cluster.workloadImage} -c 'echo drift > /drift' && docker commit drift ${cluster.workloadImage} >/dev/null && docker rm drift >/dev/null`,
        );
        const original = imageId(cluster, 0);
        const drifted = imageId(cluster, 1);
        expect(drifted).not.toBe(original);

        const stack = await openStack(`${name}-image`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, MODEL_DIR) });
        stacks.push(stack);
        const message = await failureOf(stack.up());
        expect(message).toContain(
            `image ${cluster.workloadImage} differs across nodes: spark1 have ${original.slice(7, 19)}; spark2 have ${drifted.slice(7, 19)}`,
        );
        noContainers(cluster);

        await stack.setConfig("vllm-fleet:image", { value: JSON.stringify({ name: cluster.workloadImage, source: "copy" }) });
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        expect(imageId(cluster, 1)).toBe(original);
        const copied = /image-copied \S+ \S+ bytes=(\d+) seconds=(\d+)/.exec(up.stdout + up.stderr);
        const state = JSON.stringify(await stack.exportStack());
        const record = /image-copied [^"\\]+ bytes=(\d+) seconds=(\d+)/.exec(state) ?? copied;
        expect(record).not.toBeNull();
        const bytes = Number(record![1]);
        const seconds = Math.max(1, Number(record![2]));
        console.log(`image copy: ${(bytes / 1024 ** 2).toFixed(0)} MiB in ${seconds} s = ${(bytes / 1024 ** 2 / seconds).toFixed(1)} MiB/s`);

        await stack.destroy();
    });

    it("refuses a node missing weight files, naming the first, then fixes it by rsync over the fabric", async () => {
        onNode(cluster.nodes[1], `rm ${MODEL_DIR}/model-00001-of-00001.safetensors`);
        // Something worth timing: 256 MiB that only the first node has.
        onNode(cluster.nodes[0], `head -c 268435456 /dev/urandom > ${MODEL_DIR}/weights-extra.safetensors && chown spark ${MODEL_DIR}/weights-extra.safetensors`);
        const stack = await openStack(`${name}-weights`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, MODEL_DIR) });
        stacks.push(stack);
        const message = await failureOf(stack.up());
        expect(message).toContain(`node spark2: model directory ${MODEL_DIR} differs from spark1's: model-00001-of-00001.safetensors is missing`);
        noContainers(cluster);

        await stack.setConfig("vllm-fleet:model", { value: JSON.stringify({ path: MODEL_DIR, servedName: "tiny-moe", sync: "rsync" }) });
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const listing = (index: number) => onNode(cluster.nodes[index], `cd ${MODEL_DIR} && find . -type f -printf '%s %f\\n' | sort`);
        expect(listing(1)).toBe(listing(0));
        // The fabric carried it: the daemon on the receiving node listened on its fabric address only.
        const state = JSON.stringify(await stack.exportStack());
        expect(state).toContain(`receiving into ${MODEL_DIR} on ${cluster.nodes[1].fabricIp}:28730`);
        const synced = /weights-synced to [0-9.]+ millis=(\d+)/.exec(state);
        const sent = /sent ([0-9,]+) bytes/.exec(state);
        expect(synced).not.toBeNull();
        expect(sent).not.toBeNull();
        const bytes = Number(sent![1].replace(/,/g, ""));
        expect(bytes).toBeGreaterThan(256 * 1024 ** 2);
        const seconds = Math.max(1, Number(synced![1])) / 1000;
        console.log(`weight sync: ${(bytes / 1024 ** 2).toFixed(0)} MiB in ${seconds.toFixed(2)} s = ${(bytes / 1024 ** 2 / seconds).toFixed(1)} MiB/s`);
        // A second up changes nothing and copies nothing.
        const again = await stack.up({ expectNoChanges: true });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        await stack.destroy();
    });

    it("refuses a model that cannot fit, with the numbers, before any container, and again at preview", async () => {
        const bigDir = "/home/spark/models/too-big";
        putTinyModel(cluster, bigDir);
        // A sparse 200 GB weight file: the size is what the planner reads, no disk is used.
        for (const node of cluster.nodes) {
            onNode(node, `truncate -s 200G ${bigDir}/model-00001-of-00001.safetensors`);
        }
        const stack = await openStack(`${name}-fit`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, bigDir) });
        stacks.push(stack);
        const message = await failureOf(stack.up());
        expect(message).toMatch(/needs \d+\.\d GiB per rank \(\d+\.\d GiB of weights \+ \d+\.\d GiB runtime overhead\), spark1 has \d+\.\d GiB usable/);
        noContainers(cluster);
        // The probes' facts are in the state now: preview refuses with the same numbers.
        expect(await failureOf(stack.preview())).toMatch(/needs \d+\.\d GiB per rank/);
    });
});
