/**
 * End to end on simulated Sparks: vLLM's native multi-node executor (`mp`), and switching a running
 * stack from Ray to mp. Real SSH, Docker and Ray; the GPU, the fabric link and vLLM are stand-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { Api, conformanceDifferences, observeRankDeath, observeServing } from "./conformance";
import { SIM_VLLM, SimCluster, complete, offFabric, onNode, simDeployment, tearDown, trafficOf } from "./simCluster";

/** The serving container running on each node (the watchdog beside them left out). */
function servingContainers(cluster: SimCluster): string[] {
    return cluster.nodes.map((node) => onNode(node, "docker ps --format '{{.Names}}' | grep -v watchdog || true").trim());
}

// Two mp nodes are the fleet's coder service (fleet.test.ts); three ranks rendezvous here.
describe.each([{ nodes: 3, name: "e2e-mp3" }])("mp executor on $nodes simulated Sparks", ({ nodes, name }) => {
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, nodes, { executor: "mp", parallelism: { tensor: nodes } }));
    });

    afterAll(async () => {
        await tearDown({ stacks: [stack], cluster: name, workDir });
    });

    it("comes up with rank 0 and headless ranks answering on their fabric addresses", async () => {
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const body = await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value);
        expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort()).toEqual(cluster.nodes.map((node) => node.fabricIp).sort());
        expect(servingContainers(cluster)).toEqual(cluster.nodes.map(() => "vllm-fleet-vllm"));
        // Every node's stand-in RDMA devices reached its rank: NCCL chose RoCE everywhere.
        expect(up.outputs.fabricTransport.value).toEqual(Object.fromEntries(cluster.nodes.map((node) => [`spark${node.index + 1}`, "IB"])));
    });

    it("reports no changes on a second up", async () => {
        const again = await stack.up({ expectNoChanges: true });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
    });

    /** The stack's API as the conformance probes take it. */
    const api = async (): Promise<Api> => {
        const outputs = await stack.outputs();
        return { root: (outputs.endpoint.value as string).replace(/\/v1$/, ""), key: outputs.apiKey.value as string, model: "tiny-moe", maxModelLen: SIM_VLLM.maxModelLen };
    };

    it("answers the conformance probes as real vLLM does, but where docs/proving-ground.md says why not", async () => {
        expect(conformanceDifferences(await observeServing(await api(), cluster.nodes[0]), "stand-in")).toEqual([]);
    });

    // Per completion the stand-in's rank 0 asks every headless node's ranks over the connection they
    // opened to the master address, and they answer: a JSON line each way, at least 90 bytes with
    // their headers. A hundred completions are 9 kB on every node's fabric, beyond what the keepers'
    // probes move in as long idle; on a management interface, over its chatter.
    it("carries the ranks' traffic on the fabric interfaces, none on the headless nodes' management ones", async () => {
        const { root, key, model } = await api();
        const traffic = await trafficOf(cluster, async () => {
            for (let index = 0; index < 100; index++) {
                await complete(`${root}/v1`, model, key);
            }
        });
        console.log(`100 completions (stand-in, mp): ${JSON.stringify(traffic)}`);
        expect(offFabric(traffic, 100 * 90)).toEqual([]);
    });

    it("dies as real vLLM does when a headless rank's vLLM is killed, and serves again by itself through the ranks' keepers", async () => {
        // The stand-in's ranks of a node are its vLLM process: the child of the rank's keeper.
        const { observation, repairSeconds } = await observeRankDeath(await api(), cluster.nodes, "docker exec vllm-fleet-vllm pkill -9 -P 1 -f 'vllm serve'", 5);
        console.log(`a headless rank's vLLM killed (stand-in): ${JSON.stringify(observation)}; serving again after ${repairSeconds} s`);
        expect(observation["rank death: serving again by itself"]).toBe(true);
        expect(conformanceDifferences(observation, "stand-in")).toEqual([]);
    });

    it("destroys every container it started", async () => {
        await stack.destroy();
        for (const node of cluster.nodes) {
            expect(onNode(node, "docker ps -aq").trim()).toBe("");
        }
    });
});

describe("switching a running stack from the Ray executor to mp", () => {
    const name = "e2e-switch";
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, 2));
    });

    afterAll(async () => {
        await tearDown({ stacks: [stack], cluster: name, workDir });
    });

    it("previews and applies as a replacement of the serving resources only, each node's Ray container removed first", async () => {
        expect((await stack.up()).summary.result).toBe("succeeded");
        expect(servingContainers(cluster)).toEqual(["vllm-fleet-ray", "vllm-fleet-ray"]);

        await stack.setConfig("vllm-fleet:executor", { value: "mp" });
        const events: { op: string; urn: string }[] = [];
        const preview = await stack.preview({
            onEvent: (event) => {
                if (event.resourcePreEvent) {
                    events.push({ op: event.resourcePreEvent.metadata.op, urn: event.resourcePreEvent.metadata.urn });
                }
            },
        });
        const changed = (op: string) => [...new Set(events.filter((event) => event.op === op).map((event) => event.urn.split("::").pop()!))].sort();
        // The nodes stay; the Ray cluster goes; the mp ranks come (each removes its node's Ray
        // container first: it holds the GPU); the watchdog is replaced (it now watches rank 0), and
        // so are the fabric checks (they read the ranks' logs now); rank 0's arguments are checked;
        // the Ray token goes with the Ray cluster.
        expect(changed("delete")).toEqual([
            "ray",
            "ray-ready",
            "ray-spark1-ray-head",
            "ray-spark1-ray-joined",
            "ray-spark2-ray-joined",
            "ray-spark2-ray-worker",
            "ray-token",
            "vllm-serve",
        ]);
        expect(changed("create")).toEqual(["vllm-ready", "vllm-spark1-rank0", "vllm-spark2-rank1"]);
        expect(changed("replace")).toEqual(["vllm-fabric-spark1", "vllm-fabric-spark2", "vllm-watchdog"]);
        // (Pulumi's default provider of the dynamic resources shows as "default" among the updates.)
        expect(changed("update").filter((name) => name !== "default")).toEqual(["vllm-args-check"]);

        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        expect(servingContainers(cluster)).toEqual(["vllm-fleet-vllm", "vllm-fleet-vllm"]);
        const body = await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value);
        expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort()).toEqual(cluster.nodes.map((node) => node.fabricIp).sort());
    });
});
