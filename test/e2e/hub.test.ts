/**
 * End to end on 2 simulated Sparks: the model from the Hugging Face Hub (`model.source: hub`),
 * served by the hub stand-in (test/sim/hub/hub-standin.py) on the cluster's management network and
 * downloaded by the huggingface_hub inside the workload image: on the first node only, then copied
 * by the weight sync; a second up downloads nothing; a gated repo needs the secret hfToken; a
 * transfer broken mid-file resumes. Real SSH, Docker, huggingface_hub and Ray; the Hub, the GPU, the
 * fabric link and vLLM are stand-ins.
 */
import * as crypto from "crypto";
import * as fs from "fs";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { HubStandIn, commitOf, startHubStandIn } from "./hubStandIn";
import { SimCluster, TINY_MODEL_CONFIG, complete, failureOf, onNode, simStackConfig, simUp, tearDown, tempWorkspace, timer } from "./simCluster";

const timings: Record<string, number> = {};
const timed = timer(timings);

/** The tiny model of the other e2e tests (simCluster's putTinyModel), as a Hub repo holds it. */
const TINY_CONFIG = TINY_MODEL_CONFIG;
// 24 MiB: more than huggingface_hub's 10 MiB read chunk, so a transfer broken at 12 MiB has kept
// 10 MiB to resume from.
const WEIGHTS = crypto.randomBytes(24 * 1024 * 1024);
const WEIGHTS_SHA256 = crypto.createHash("sha256").update(WEIGHTS).digest("hex");
const FILES = { "config.json": TINY_CONFIG, "README.md": "# tiny-moe\nThe e2e tests' model.\n", "model-00001-of-00001.safetensors": WEIGHTS };

const REPO = { id: "fleet/tiny-moe", commit: commitOf("tiny-moe"), files: FILES };
const GATED = { id: "fleet/tiny-moe-gated", commit: commitOf("tiny-moe-gated"), files: FILES, gated: true };
const FLAKY = { id: "fleet/tiny-moe-flaky", commit: commitOf("tiny-moe-flaky"), files: FILES, dropOnce: { file: "model-00001-of-00001.safetensors", after: 12 * 1024 * 1024 } };

describe("the model from the Hub (hub stand-in) on 2 simulated Sparks", () => {
    const name = "e2e-hub";
    let cluster: SimCluster;
    let hub: HubStandIn | undefined;
    let workspace: { dir: string; envVars: Record<string, string> };
    const stacks: Stack[] = [];

    beforeAll(async () => {
        cluster = await timed("sim-up", () => simUp(name, 2));
        hub = await startHubStandIn(cluster, [REPO, GATED, FLAKY]);
        workspace = tempWorkspace(`vllm-fleet-${name}-`);
    });

    afterAll(async () => {
        try {
            hub?.stop();
        } finally {
            await tearDown({ stacks, cluster: name, workDir: workspace?.dir });
            console.log(`timings (s): ${JSON.stringify(timings)}`);
        }
    });

    /** A stack of the cluster whose model is `repo` from the hub stand-in, in `dir`. */
    async function hubStack(suffix: string, repo: { id: string; commit: string }, dir: string): Promise<Stack> {
        const model = { path: dir, servedName: "tiny-moe", source: "hub", repo: repo.id, revision: repo.commit, hubEndpoint: hub!.endpoint };
        const stack = await openStack(`${name}-${suffix}`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, dir, { model }) });
        stacks.push(stack);
        return stack;
    }

    const listing = (index: number, dir: string) => onNode(cluster.nodes[index], `cd ${dir} && find . -maxdepth 1 -type f -printf '%s %f\\n' | sort`);
    const weightsSha = (index: number, dir: string) => onNode(cluster.nodes[index], `sha256sum ${dir}/model-00001-of-00001.safetensors | cut -d' ' -f1`).trim();

    it("downloads on the first node only, copies to the others, serves; a second up changes nothing and downloads nothing", async () => {
        const dir = "/home/spark/models/hub-tiny";
        const stack = await hubStack("tiny", REPO, dir);
        const preview = await timed("preview", () => stack.preview());
        expect(preview.changeSummary.create).toBeGreaterThan(0);
        expect(hub!.requests()).toEqual([]); // preview downloads nothing

        const up = await timed("cold-up", () => stack.up());
        expect(up.summary.result).toBe("succeeded");
        const requests = hub!.requests().filter((request) => request.path.includes(REPO.id));
        expect(requests.length).toBeGreaterThan(0);
        expect([...new Set(requests.map((request) => request.client))]).toEqual([cluster.nodes[0].mgmtIp]);
        expect(requests.filter((request) => request.method === "GET" && request.path.endsWith(".safetensors")).map((request) => request.bytes)).toEqual([WEIGHTS.length]);
        expect(listing(0, dir)).toBe(listing(1, dir));
        expect(listing(0, dir)).toContain(`${WEIGHTS.length} model-00001-of-00001.safetensors`);
        expect(weightsSha(1, dir)).toBe(WEIGHTS_SHA256);
        const state = JSON.stringify(await stack.exportStack());
        expect(state).toMatch(new RegExp(`hub-downloaded ${REPO.id}@${REPO.commit}`));
        expect(up.outputs.completion.value).toContain(cluster.nodes[1].fabricIp);
        const text = (await complete(up.outputs.endpoint.value, "tiny-moe", (up.outputs.apiKey?.value as string | undefined) ?? "")).choices[0].text;
        for (const node of cluster.nodes) {
            expect(text).toContain(node.fabricIp);
        }

        const before = hub!.requests().length;
        const again = await timed("noop-up", () => stack.up({ expectNoChanges: true }));
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        expect(hub!.requests().length).toBe(before);
        await timed("destroy", () => stack.destroy());
    });

    it("refuses a gated repo without the secret hfToken, naming it (HTTP 401), and downloads it with the token", async () => {
        const dir = "/home/spark/models/hub-gated";
        const stack = await hubStack("gated", GATED, dir);
        const message = await timed("gated-refused", () => failureOf(stack.up()));
        expect(message).toContain(`refuses ${GATED.id} without a token (HTTP 401`);
        expect(message).toContain("the repo is gated; set the secret vllm-fleet:hfToken");
        // Nothing started: the serving containers wait for the model.
        expect(onNode(cluster.nodes[0], "docker ps -q --filter name=vllm-fleet").trim()).toBe("");

        await stack.setConfig("vllm-fleet:hfToken", { value: "hf_wrong-token", secret: true });
        const wrong = await failureOf(stack.up());
        expect(wrong).toContain(`refuses the token vllm-fleet:hfToken for ${GATED.id} (HTTP 401: Invalid credentials in Authorization header)`);
        expect(wrong).not.toContain("hf_wrong-token");

        await stack.setConfig("vllm-fleet:hfToken", { value: hub!.token, secret: true });
        const up = await timed("gated-up", () => stack.up());
        expect(up.summary.result).toBe("succeeded");
        expect(hub!.requests().filter((request) => request.path.includes(GATED.id) && request.status === 200).every((request) => request.auth)).toBe(true);
        expect(weightsSha(1, dir)).toBe(WEIGHTS_SHA256);
        // The stack's state on disk holds the token only encrypted (exportStack shows secrets decrypted).
        const stateFiles = (fs.readdirSync(path.join(workspace.dir, "state"), { recursive: true }) as string[])
            .map((file) => path.join(workspace.dir, "state", file))
            .filter((file) => fs.statSync(file).isFile());
        expect(stateFiles.some((file) => file.endsWith(`${name}-gated.json`))).toBe(true);
        for (const file of stateFiles) {
            expect(fs.readFileSync(file, "utf8")).not.toContain(hub!.token);
        }
        await timed("gated-destroy", () => stack.destroy());
    });

    it("resumes a transfer broken mid-file with a Range request", async () => {
        const dir = "/home/spark/models/hub-flaky";
        const stack = await hubStack("flaky", FLAKY, dir);
        const up = await timed("flaky-up", () => stack.up());
        expect(up.summary.result).toBe("succeeded");
        const gets = hub!.requests().filter((request) => request.method === "GET" && request.path.includes(`${FLAKY.id}/resolve/`) && request.path.endsWith(".safetensors"));
        expect(gets.map((request) => [request.status, request.range, request.bytes])).toEqual([
            [200, null, 12 * 1024 * 1024],
            [206, `bytes=${10 * 1024 * 1024}-`, WEIGHTS.length - 10 * 1024 * 1024],
        ]);
        expect(weightsSha(0, dir)).toBe(WEIGHTS_SHA256);
        expect(weightsSha(1, dir)).toBe(WEIGHTS_SHA256);
        await timed("flaky-destroy", () => stack.destroy());
    });
});
