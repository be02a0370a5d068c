/**
 * End to end on four simulated Sparks: a fleet of services in one stack (issue 23).
 * - big (ray, TP 2) on spark1-2 and coder (mp, TP 2) on spark3-4 serve side by side, each from
 *   every rank of its own nodes.
 * - small (mp, TP 1) added on spark1 beside big: the preview shows small's creates only, and big's
 *   and coder's containers keep their ids.
 * - coder's maxModelLen changed: only coder's containers are replaced.
 * - small removed: only small's containers go.
 * - a swap of the model name coder-moe from coder to coder2 (another port, both fit: blue/green),
 *   sampled during the up: the name answers at every sample, and coder's containers die only after
 *   coder2 answered (Docker's events on the node).
 * - a swap from coder2 to coder3 on the same port (no room): preview announces that coder2 stops
 *   first, naming the port and the downtime bound (refused with swap refuseDowntime); the up stops
 *   coder2's containers before coder3's start.
 * - big's served name changed in place: preview calls it a replacement with downtime.
 * The gateway (one endpoint routing by model) is not part of this: each service is asked on its own
 * endpoint, and the samples ask both for the name.
 * Real SSH, Docker and Ray; the GPU, the fabric link and vLLM are stand-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { SimCluster, complete, onNode, simDeployment, tearDown } from "./simCluster";
import { TINY_MODEL_DIR } from "./simCluster";

const model = (servedName: string) => ({ path: TINY_MODEL_DIR, servedName });
const BIG = { name: "big", nodes: ["spark1", "spark2"], executor: "ray", parallelism: { tensor: 2 }, model: model("big-moe"), vllm: { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.6 } };
const CODER = { name: "coder", nodes: ["spark3", "spark4"], executor: "mp", parallelism: { tensor: 2 }, model: model("coder-moe"), vllm: { port: 8001, maxModelLen: 4096, gpuMemoryUtilization: 0.4 } };
/** coder's model name on another service beside it: another port, 0.4 + 0.4 of the nodes: blue/green. */
const CODER2 = { ...CODER, name: "coder2", vllm: { port: 8003, masterPort: 29503, maxModelLen: 2048, gpuMemoryUtilization: 0.4 } };
/** The same name again, on coder2's very ports: no room beside it, so coder2 stops first. */
const CODER3 = { ...CODER2, name: "coder3" };
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

/** What Pulumi said at `level` (info, warning) during an operation, from its events. */
function diagnostics(into: string[], level: string) {
    return (event: { diagnosticEvent?: { severity: string; message: string } }) => {
        if (event.diagnosticEvent?.severity === level) {
            into.push(event.diagnosticEvent.message);
        }
    };
}

/** Docker's container events on a node since `sinceMs` (epoch ms): time (ms), action, container name. */
function containerEvents(node: SimCluster["nodes"][number], stack: string, sinceMs: number): { at: number; action: string; name: string }[] {
    const until = Math.ceil(Date.now() / 1000) + 1;
    return onNode(
        node,
        `docker events --since ${Math.floor(sinceMs / 1000)} --until ${until} --filter type=container --filter label=vllm-fleet.stack=${stack} --format '{{.TimeNano}} {{.Action}} {{.Actor.Attributes.name}}'`,
    )
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map((line) => line.split(" "))
        .map(([nanos, action, name]) => ({ at: Number(BigInt(nanos) / 1_000_000n), action, name }));
}

/** One look at whether each endpoint answers `model`. */
interface Sample {
    readonly at: number;
    readonly answered: readonly boolean[];
}

/** Asks every endpoint for `model` every 200 ms until stopped (each answer within 5 s), recording each round. */
function sampleServing(endpoints: readonly string[], model: string, apiKey: string): { stop: () => Promise<Sample[]> } {
    const samples: Sample[] = [];
    let running = true;
    const ask = async (endpoint: string) => {
        try {
            const response = await fetch(`${endpoint}/completions`, {
                method: "POST",
                headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
                body: JSON.stringify({ model, prompt: "swap", max_tokens: 4 }),
                signal: AbortSignal.timeout(5000),
            });
            await response.text();
            return response.status === 200;
        } catch {
            return false;
        }
    };
    const loop = (async () => {
        while (running) {
            const at = Date.now();
            samples.push({ at, answered: await Promise.all(endpoints.map(ask)) });
            await new Promise((resolve) => setTimeout(resolve, 200));
        }
    })();
    return {
        stop: async () => {
            running = false;
            await loop;
            return samples;
        },
    };
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

    it("swaps coder-moe from coder to coder2 blue/green: the name answers throughout, coder goes only after coder2 serves", async () => {
        const before = containerIds(cluster, name);
        const outputs = (await stack.outputs()).services.value as ServiceOutputs;
        const apiKey = (await stack.outputs()).apiKey.value as string;
        const oldEndpoint = outputs.coder.endpoint;
        const newEndpoint = oldEndpoint.replace(":8001/", ":8003/");
        await setServices([BIG, CODER2]);
        const infos: string[] = [];
        const warnings: string[] = [];
        await stack.preview({ onEvent: (event) => (diagnostics(infos, "info")(event), diagnostics(warnings, "warning")(event)) });
        expect(infos.join("\n")).toContain('swap of model "coder-moe" from service coder to service coder2: blue/green: coder2 starts beside coder on spark3, spark4');
        expect(warnings.join("\n")).not.toContain("swap of model");
        // big's own head and coder's ranks read as serving what the config says: nothing changes in place.
        expect(warnings.join("\n")).not.toContain("in place");

        const started = Date.now();
        const sampler = sampleServing([oldEndpoint, newEndpoint], "coder-moe", apiKey);
        const up = await stack.up();
        const samples = await sampler.stop();
        expect(up.summary.result).toBe("succeeded");

        // Served at every sample, by one or the other; and coder2 answered before coder's rank 0 died.
        const gaps = samples.filter((sample) => !sample.answered.some(Boolean));
        expect(samples.length).toBeGreaterThan(10);
        expect(gaps.map((sample) => new Date(sample.at).toISOString())).toEqual([]);
        const firstNew = samples.find((sample) => sample.answered[1]);
        expect(firstNew).toBeDefined();
        const events = containerEvents(cluster.nodes[2], name, started);
        const died = events.find((event) => event.name === "vllm-fleet-coder-vllm" && event.action === "die");
        const newStart = events.find((event) => event.name === "vllm-fleet-coder2-vllm" && event.action === "start");
        expect(died, JSON.stringify(events)).toBeDefined();
        expect(newStart!.at).toBeLessThan(died!.at);
        expect(firstNew!.at).toBeLessThan(died!.at);
        console.info(
            `blue/green: ${samples.length} samples during up, none unanswered; coder2 answered ${((died!.at - firstNew!.at) / 1000).toFixed(1)} s before coder's rank 0 died, its container started ${((died!.at - newStart!.at) / 1000).toFixed(1)} s before`,
        );

        const after = containerIds(cluster, name);
        expect(idsOf(after, "coder")).toEqual({});
        expect(Object.keys(idsOf(after, "coder2")).sort()).toEqual(["spark3/vllm-fleet-coder2-vllm", "spark3/vllm-fleet-coder2-watchdog", "spark4/vllm-fleet-coder2-vllm"]);
        expect(idsOf(after, "big")).toEqual(idsOf(before, "big"));
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder2"]);
        expect(up.outputs.services.value.coder2.model).toBe("coder-moe");
    });

    it("swaps coder-moe from coder2 to coder3 on the same port: preview says coder2 stops first and why; up stops it before coder3 starts", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, CODER3]);
        // Refused with swap refuseDowntime, before anything is registered.
        await stack.setConfig("vllm-fleet:swap", { value: "refuseDowntime" });
        await expect(stack.preview()).rejects.toThrow(/swap of model "coder-moe" from service coder2 to service coder3 refused \(vllm-fleet:swap is refuseDowntime\)/);
        await stack.removeConfig("vllm-fleet:swap");

        const warnings: string[] = [];
        const changes: Record<string, string[]> = {};
        await stack.preview({
            onEvent: (event) => {
                diagnostics(warnings, "warning")(event);
                const meta = event.resourcePreEvent?.metadata;
                if (meta && meta.op !== "same" && !meta.type.startsWith("pulumi:providers:")) {
                    (changes[meta.op] ??= []).push(meta.urn.split("::").pop()!);
                }
            },
        });
        const announced = warnings.find((warning) => warning.includes("swap of model"));
        expect(announced).toContain('swap of model "coder-moe" from service coder2 to service coder3 stops coder2 first (not blue/green)');
        expect(announced).toContain("spark3: port 8003, vllm-fleet:services[1].vllm.port of coder3, is the API port of coder2");
        expect(announced).toContain('"coder-moe" is not served until coder3 is ready: at most');
        expect(changes.create).toEqual(expect.arrayContaining(["spark3-coder2-swap-stop", "spark4-coder2-swap-stop"]));

        const started = Date.now();
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        for (const node of [cluster.nodes[2], cluster.nodes[3]]) {
            const events = containerEvents(node, name, started);
            const died = events.find((event) => event.name === "vllm-fleet-coder2-vllm" && event.action === "die");
            const created = events.find((event) => event.name === "vllm-fleet-coder3-vllm" && event.action === "create");
            expect(died, JSON.stringify(events)).toBeDefined();
            expect(died!.at).toBeLessThan(created!.at);
            console.info(`stop first on ${node.name}: coder2's container died ${((created!.at - died!.at) / 1000).toFixed(1)} s before coder3's was created`);
        }
        const after = containerIds(cluster, name);
        expect(idsOf(after, "coder2")).toEqual({});
        expect(idsOf(after, "big")).toEqual(idsOf(before, "big"));
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder3"]);

        // The finished stop steps leave the state with the next up, which touches no host.
        const touched: string[] = [];
        const next = await stack.up({
            onEvent: (event) => {
                const meta = event.resourcePreEvent?.metadata;
                if (meta && meta.op !== "same" && !meta.type.startsWith("pulumi:providers:")) {
                    touched.push(`${meta.op} ${meta.urn.split("::").pop()}`);
                }
            },
        });
        expect(next.summary.result).toBe("succeeded");
        expect([...new Set(touched)].sort()).toEqual(["delete spark3-coder2-swap-stop", "delete spark4-coder2-swap-stop"]);
        expect(containerIds(cluster, name)).toEqual(after);
    });

    it("previews a served name changed in place (big, ray) as a replacement with downtime, suggesting a new service", async () => {
        await setServices([{ ...BIG, model: model("big-moe-2") }, CODER3]);
        const warnings: string[] = [];
        await stack.preview({ onEvent: diagnostics(warnings, "warning") });
        expect(warnings.join("\n")).toContain('service big changes what it serves in place (served name "big-moe" -> "big-moe-2"): a replacement with downtime');
        expect(warnings.join("\n")).toContain("declare the new model as a new service (e.g. big-2");
        await setServices([BIG, CODER3]);
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
