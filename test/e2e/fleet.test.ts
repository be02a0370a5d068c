/**
 * End to end on four simulated Sparks: a fleet of services in one stack (issue 23).
 * - big (ray, TP 2) on spark1-2 and coder (mp, TP 2) on spark3-4 serve side by side, each from
 *   every rank of its own nodes.
 * - small (mp, TP 1) added on spark1 beside big: the preview shows small's creates only, and big's
 *   and coder's containers keep their ids.
 * - coder's maxModelLen changed: only coder's containers are replaced.
 * - small removed: only small's containers go.
 * Real SSH, Docker and Ray; the GPU, the fabric link and vLLM are stand-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { SimCluster, complete, onNode, simDeployment, tearDown } from "./simCluster";
import { TINY_MODEL_DIR } from "./simCluster";

const model = (servedName: string) => ({ path: TINY_MODEL_DIR, servedName });
const BIG = { name: "big", nodes: ["spark1", "spark2"], executor: "ray", parallelism: { tensor: 2 }, model: model("big-moe"), vllm: { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.6 } };
const CODER = { name: "coder", nodes: ["spark3", "spark4"], executor: "mp", parallelism: { tensor: 2 }, model: model("coder-moe"), vllm: { port: 8001, maxModelLen: 4096 } };
const SMALL = { name: "small", nodes: ["spark1"], executor: "mp", parallelism: { tensor: 1 }, model: model("small-moe"), vllm: { port: 8002, maxModelLen: 2048, masterPort: 29502 } };

/** Every container of the stack, name -> id, on every node (`spark1/vllm-fleet-big-ray`). */
function containerIds(cluster: SimCluster, stack: string): Record<string, string> {
    return Object.fromEntries(
        cluster.nodes.flatMap((node) =>
            onNode(node, `docker ps -a --filter label=vllm-fleet.stack=${stack} --format '{{.Names}} {{.ID}}' 2>/dev/null || true`)
                .split("\n")
                .filter((line) => line !== "")
                .map((line) => [`spark${node.index + 1}/${line.split(" ")[0]}`, line.split(" ")[1]]),
        ),
    );
}

/** The ids of the containers of `service`, by the name above. */
function idsOf(ids: Record<string, string>, service: string): Record<string, string> {
    return Object.fromEntries(Object.entries(ids).filter(([name]) => name.includes(`/vllm-fleet-${service}-`)));
}

/** The names of the resources a preview would change, by operation (the URN's last part). */
async function previewChanges(stack: Stack): Promise<Record<string, string[]>> {
    const changes: Record<string, string[]> = {};
    await stack.preview({
        onEvent: (event) => {
            const meta = event.resourcePreEvent?.metadata;
            if (meta && meta.op !== "same" && meta.type !== "pulumi:providers:pulumi-nodejs") {
                (changes[meta.op] ??= []).push(meta.urn.split("::").pop()!);
            }
        },
    });
    for (const list of Object.values(changes)) {
        list.sort();
    }
    return changes;
}

/** The services output of an up: each service's endpoint and model. */
type ServiceOutputs = Record<string, { endpoint: string; model: string; nodes: string[] }>;

describe("a fleet of three services on four simulated Sparks", () => {
    const name = "e2e-fleet";
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, 4, {}, {}));
        // The services form: none of the single-model keys at the top.
        for (const key of ["model", "vllm", "image"]) {
            await stack.removeConfig(`vllm-fleet:${key}`);
        }
        await setServices([BIG, CODER]);
    });

    afterAll(async () => {
        await tearDown({ stacks: [stack], cluster: name, workDir });
    });

    async function setServices(services: readonly Record<string, unknown>[]): Promise<void> {
        const image = { name: cluster.workloadImage };
        await stack.setConfig("vllm-fleet:services", { value: JSON.stringify(services.map((service) => ({ image, ...service }))) });
    }

    /** Each service answers on its own endpoint, from every rank of its own nodes. */
    async function expectServing(outputs: ServiceOutputs, apiKey: string, names: readonly string[]): Promise<void> {
        expect(Object.keys(outputs).sort()).toEqual([...names].sort());
        for (const service of names) {
            const { endpoint, model: served, nodes } = outputs[service];
            const body = await complete(endpoint, served, apiKey);
            const ips = nodes.map((node) => cluster.nodes[Number(node.replace("spark", "")) - 1].fabricIp);
            expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort(), service).toEqual(ips.sort());
        }
    }

    it("serves big (ray) on spark1-2 and coder (mp) on spark3-4, each from its own nodes", async () => {
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder"]);
        const names = Object.keys(containerIds(cluster, name)).sort();
        expect(names).toEqual([
            "spark1/vllm-fleet-big-ray",
            "spark1/vllm-fleet-big-watchdog",
            "spark2/vllm-fleet-big-ray",
            "spark3/vllm-fleet-coder-vllm",
            "spark3/vllm-fleet-coder-watchdog",
            "spark4/vllm-fleet-coder-vllm",
        ]);
    });

    it("adds small beside big on spark1: the preview creates small's only, and no other container changes", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, CODER, SMALL]);
        const changes = await previewChanges(stack);
        expect(Object.keys(changes).filter((op) => op !== "update" || changes[op].some((resource) => resource !== "default"))).toEqual(["create"]);
        expect(changes.create.every((resource) => resource.startsWith("small-") || resource === "spark1-small-image"), changes.create.join(" ")).toBe(true);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder", "small"]);
        const after = containerIds(cluster, name);
        expect(Object.keys(idsOf(after, "small")).sort()).toEqual(["spark1/vllm-fleet-small-vllm", "spark1/vllm-fleet-small-watchdog"]);
        expect({ ...idsOf(after, "big"), ...idsOf(after, "coder") }).toEqual({ ...idsOf(before, "big"), ...idsOf(before, "coder") });
    });

    it("changes coder's maxModelLen: coder's containers are replaced, big's and small's keep their ids", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, { ...CODER, vllm: { ...CODER.vllm, maxModelLen: 2048 } }, SMALL]);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const after = containerIds(cluster, name);
        expect({ ...idsOf(after, "big"), ...idsOf(after, "small") }).toEqual({ ...idsOf(before, "big"), ...idsOf(before, "small") });
        expect(idsOf(after, "coder")["spark3/vllm-fleet-coder-vllm"]).not.toBe(idsOf(before, "coder")["spark3/vllm-fleet-coder-vllm"]);
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder", "small"]);
    });

    it("removes small: only small's containers go", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, { ...CODER, vllm: { ...CODER.vllm, maxModelLen: 2048 } }]);
        const changes = await previewChanges(stack);
        expect(changes.delete.every((resource) => resource.startsWith("small-") || resource === "spark1-small-image"), changes.delete.join(" ")).toBe(true);
        expect(changes.create ?? []).toEqual([]);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const after = containerIds(cluster, name);
        expect(idsOf(after, "small")).toEqual({});
        expect(after).toEqual({ ...idsOf(before, "big"), ...idsOf(before, "coder") });
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder"]);
    });

    it("reports no changes on a second up, and destroys every container it started", async () => {
        const again = await stack.up({ expectNoChanges: true });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        await stack.destroy();
        for (const node of cluster.nodes) {
            expect(onNode(node, "docker ps -aq").trim()).toBe("");
        }
    });
});
