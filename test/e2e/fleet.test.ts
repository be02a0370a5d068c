/**
 * End to end on four simulated Sparks: a fleet of services in one stack (issue 23).
 * - big (ray, TP 2) on spark1-2 and coder (mp, TP 2) on spark3-4 serve side by side, each from
 *   every rank of its own nodes.
 * - small (mp, TP 1) added on spark1 beside big: the preview shows small's creates only, and big's
 *   and coder's containers keep their ids.
 * - coder's maxModelLen changed: only coder's containers are replaced.
 * - small removed: only small's containers go.
 * - the gateway on spark3 (vllm-router, from its published wheel in the workload image): each
 *   model through it from every rank of its service, /v1/models listing all, a request without the
 *   key refused, streaming passed through; its container kept when a service changes and when its
 *   routes change (they are given to the running router); a stopped service answers 503 for its
 *   model only.
 * - a swap of the model name coder-moe from coder to coder2 (another port, both fit: blue/green),
 *   under the load test through the gateway and sampled during the up: no request fails, the name
 *   answers at every sample, and coder's containers die only after coder2 answered (Docker's events
 *   on the node).
 * - a swap from coder2 to coder3 on the same port (no room): preview announces that coder2 stops
 *   first, naming the port and the downtime bound (refused with swap refuseDowntime); the up stops
 *   coder2's containers before coder3's start.
 * - big's served name changed in place: preview calls it a replacement with downtime.
 * Real SSH, Docker, Ray and vllm-router; the GPU, the fabric link and vLLM are stand-ins.
 */
import * as crypto from "crypto";
import * as http from "http";
import { AddressInfo } from "net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { runLoadtest } from "../../tools/loadtest/run";
import { stackStatus } from "../../tools/status";
import { answeredWithoutKey, statusOf } from "./keyProbes";
import { shQuote } from "../../components/shell";
import { SimCluster, complete, onNode, simDeployment, tearDown } from "./simCluster";
import { TINY_MODEL_DIR } from "./simCluster";

const model = (servedName: string) => ({ path: TINY_MODEL_DIR, servedName });
const BIG = { name: "big", nodes: ["spark1", "spark2"], executor: "ray", parallelism: { tensor: 2 }, model: model("big-moe"), vllm: { port: 8000, maxModelLen: 4096, gpuMemoryUtilization: 0.3 } };
const CODER = { name: "coder", nodes: ["spark3", "spark4"], executor: "mp", parallelism: { tensor: 2 }, model: model("coder-moe"), vllm: { port: 8001, maxModelLen: 4096, gpuMemoryUtilization: 0.4 } };
/** coder's model name on another service beside it: another port, 0.4 + 0.4 of the nodes: blue/green. */
const CODER2 = { ...CODER, name: "coder2", vllm: { port: 8003, masterPort: 29503, maxModelLen: 2048, gpuMemoryUtilization: 0.4 } };
/** The same name again, on coder2's very ports: no room beside it, so coder2 stops first. */
const CODER3 = { ...CODER2, name: "coder3" };
const SMALL = { name: "small", nodes: ["spark1"], executor: "mp", parallelism: { tensor: 1 }, model: model("small-moe"), vllm: { port: 8002, maxModelLen: 2048, masterPort: 29502, gpuMemoryUtilization: 0.2 } };

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

const GATEWAY = { node: "spark3", port: 4000 };
/** The gateway's container, named after the stack. */
const GATEWAY_CONTAINER = "spark3/vllm-fleet-gateway-e2e-fleet";

/** `ids` without the gateway's containers (the router and its watchdog). */
function withoutGateway(ids: Record<string, string>): Record<string, string> {
    return Object.fromEntries(Object.entries(ids).filter(([name]) => !name.startsWith(GATEWAY_CONTAINER)));
}

/** The resources of the gateway in a preview (its component's children). */
const isGatewayResource = (resource: string) => resource.startsWith("gateway");

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
        await stack.setConfig("vllm-fleet:gateway", { value: JSON.stringify({ ...GATEWAY, image: { name: cluster.workloadImage } }) });
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

    /** Each service's model through the gateway, answered by every rank of that service; /v1/models lists them all. */
    async function expectGatewayServing(outputs: ServiceOutputs, gatewayEndpoint: string, apiKey: string, names: readonly string[]): Promise<void> {
        for (const service of names) {
            const { model: served, nodes } = outputs[service];
            const body = await complete(gatewayEndpoint, served, apiKey);
            const ips = nodes.map((node) => cluster.nodes[Number(node.replace("spark", "")) - 1].fabricIp);
            expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort(), `${service} through the gateway`).toEqual(ips.sort());
        }
        const listed = (await (await fetch(`${gatewayEndpoint}/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).json()) as { models: string[] };
        expect([...listed.models].sort()).toEqual(names.map((service) => outputs[service].model).sort());
    }

    /** The HTTP status of a completion of `model` through the gateway. */
    async function gatewayStatus(endpoint: string, model: string, apiKey: string): Promise<number> {
        const response = await fetch(`${endpoint}/completions`, {
            method: "POST",
            headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
            body: JSON.stringify({ model, prompt: "Hello", max_tokens: 4 }),
        });
        await response.text();
        return response.status;
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
            GATEWAY_CONTAINER,
            `${GATEWAY_CONTAINER}-watchdog`,
            "spark4/vllm-fleet-coder-vllm",
        ]);
    });

    it("serves both models through the gateway on spark3: by model, with the key only, 404 for an unknown model, streaming passed through", async () => {
        const outputs = await stack.outputs();
        const gatewayEndpoint = outputs.gatewayEndpoint.value as string;
        const apiKey = outputs.apiKey.value as string;
        expect(gatewayEndpoint).toBe(`http://${cluster.nodes[2].sshHost}:${GATEWAY.port}/v1`);
        expect(outputs.gateway.value.routes).toEqual({
            "big-moe": { service: "big", url: `http://${cluster.nodes[0].fabricIp}:8000` },
            "coder-moe": { service: "coder", url: `http://${cluster.nodes[2].fabricIp}:8001` },
        });
        await expectGatewayServing(outputs.services.value, gatewayEndpoint, apiKey, ["big", "coder"]);
        // Without the key: the service behind the gateway refuses it.
        const keyless = await fetch(`${gatewayEndpoint}/completions`, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ model: "big-moe", prompt: "Hello", max_tokens: 4 }),
        });
        expect(keyless.status).toBe(401);
        // A model no service serves: the router hands it to a service, whose vLLM answers 404.
        expect(await gatewayStatus(gatewayEndpoint, "no-such-model", apiKey)).toBe(404);
        // Streaming: server-sent events arrive through the gateway, ending with [DONE].
        const streamed = await fetch(`${gatewayEndpoint}/completions`, {
            method: "POST",
            headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
            body: JSON.stringify({ model: "coder-moe", prompt: "Hello", max_tokens: 8, stream: true }),
        });
        expect(streamed.status).toBe(200);
        expect(streamed.headers.get("content-type")).toContain("text/event-stream");
        const events = (await streamed.text()).split("\n\n").filter((event) => event.startsWith("data: "));
        expect(events.length).toBeGreaterThan(2);
        expect(events[events.length - 1]).toBe("data: [DONE]");
        expect(JSON.parse(events[0].slice("data: ".length)).model).toBe("coder-moe");
        // One request to the service per completion: the router's policy (round_robin) does not ask
        // vLLM to render each request first, as its default (cache_aware) would.
        const access = onNode(cluster.nodes[2], "docker logs vllm-fleet-coder-vllm 2>&1");
        expect(access, "coder's access log").toMatch(/"POST \/v1\/completions HTTP\/1\.1" 200/);
        // (The access log's lines, not the route list the server prints at its start.)
        expect(access, "coder's access log").not.toMatch(/"POST \S*\/render HTTP/);
    });

    it("lets nobody in without the key: the router's admin routes 401 (404 with the key), a stranger's worker gets no request, deleted routes fail no completion, a foreign page no allow-origin", async () => {
        const outputs = await stack.outputs();
        const endpoint = outputs.gatewayEndpoint.value as string;
        const root = endpoint.replace(/\/v1$/, "");
        const apiKey = outputs.apiKey.value as string;
        const routes = outputs.gateway.value.routes as Record<string, { url: string }>;
        const keyed = { Authorization: `Bearer ${apiKey}` };
        const json = { "Content-Type": "application/json" };
        // vllm-router 0.1.17's admin and info routes, as a stranger and as a key holder asks them.
        const admin: [string, string][] = [
            ["GET", "/workers"],
            ["POST", "/workers"],
            ["DELETE", `/workers/${encodeURIComponent(routes["big-moe"].url)}`],
            ["POST", "/add_worker?url=http://192.0.2.1:1"],
            ["POST", `/remove_worker?url=${encodeURIComponent(routes["big-moe"].url)}`],
            ["GET", "/list_workers"],
            ["POST", "/flush_cache"],
            ["GET", "/get_loads"],
            ["GET", "/get_server_info"],
            ["GET", "/get_model_info"],
            ["GET", "/health_generate"],
            ["GET", "/metrics"],
        ];
        for (const [method, route] of admin) {
            const body = method === "POST" ? JSON.stringify({ url: "http://192.0.2.1:1", model_id: "big-moe" }) : undefined;
            expect(await statusOf(`${root}${route}`, { method, headers: json, body }), `${method} ${route} without the key`).toBe(401);
            expect(await statusOf(`${root}${route}`, { method, headers: { ...json, ...keyed }, body }), `${method} ${route} with the key`).toBe(404);
        }
        // Every route vLLM serves, asked through the gateway without the key: 401, what it is or not.
        expect(await answeredWithoutKey(root)).toEqual([]);
        expect(await statusOf(`${root}/health`)).toBe(200);

        // A stranger registers its own worker for big-moe over and over (with the key too: a client is
        // no administrator) while 20 keyed completions run: every one answered by big, none by it.
        const hostIp = cluster.mgmtSubnet.replace(/\.0\/24$/, ".1");
        let stolen = 0;
        const sink = http.createServer((request, response) => {
            stolen += 1;
            request.resume();
            response.end("{}");
        });
        await new Promise<void>((resolve) => sink.listen(0, hostIp, resolve));
        const sinkUrl = `http://${hostIp}:${(sink.address() as AddressInfo).port}`;
        let attacking = true;
        const attacks = { sent: 0, answered: new Set<number>() };
        const attack = (async () => {
            while (attacking) {
                for (const headers of [json, { ...json, ...keyed }]) {
                    attacks.answered.add(await statusOf(`${root}/workers`, { method: "POST", headers, body: JSON.stringify({ url: sinkUrl, model_id: "big-moe" }) }));
                    attacks.answered.add(await statusOf(`${root}/add_worker?url=${encodeURIComponent(sinkUrl)}`, { method: "POST", headers }));
                    attacks.sent += 2;
                }
            }
        })();
        const bigIps = ["spark1", "spark2"].map((node) => cluster.nodes[Number(node.slice(5)) - 1].fabricIp).sort();
        try {
            for (let i = 0; i < 20; i++) {
                const body = await complete(endpoint, "big-moe", apiKey);
                expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort(), `completion ${i}`).toEqual(bigIps);
            }
        } finally {
            attacking = false;
            await attack;
            sink.closeAllConnections();
            await new Promise((resolve) => sink.close(resolve));
        }
        expect(attacks.sent).toBeGreaterThan(20);
        expect([...attacks.answered].sort()).toEqual([401, 404]);
        expect(stolen).toBe(0);

        // Routes deleted in a loop, keyed or not, while 20 keyed completions of coder-moe run: none fails.
        let deleting = true;
        const deleter = (async () => {
            while (deleting) {
                for (const headers of [{}, keyed]) {
                    await statusOf(`${root}/workers/${encodeURIComponent(routes["coder-moe"].url)}`, { method: "DELETE", headers });
                    await statusOf(`${root}/remove_worker?url=${encodeURIComponent(routes["coder-moe"].url)}`, { method: "POST", headers });
                }
            }
        })();
        try {
            for (let i = 0; i < 20; i++) {
                expect(await gatewayStatus(endpoint, "coder-moe", apiKey), `completion ${i} during the deletions`).toBe(200);
            }
        } finally {
            deleting = false;
            await deleter;
        }

        // A web page of another origin: its preflight gets no allow-origin, nor does its request.
        const preflight = await fetch(`${endpoint}/completions`, {
            method: "OPTIONS",
            headers: { Origin: "https://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type" },
        });
        await preflight.text();
        expect(preflight.status).toBe(403);
        expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
        const fromPage = await fetch(`${endpoint}/models`, { headers: { ...keyed, Origin: "https://evil.example" } });
        await fromPage.text();
        expect(fromPage.status).toBe(200);
        expect(fromPage.headers.get("access-control-allow-origin")).toBeNull();

        // The gateway's container holds no key: its proxy compares the key's SHA-256.
        const env = onNode(cluster.nodes[2], `docker inspect --format '{{range .Config.Env}}{{println .}}{{end}}' vllm-fleet-gateway-${name}`);
        expect(env).not.toContain(apiKey);
        expect(env).not.toContain("VLLM_API_KEY");
        expect(env).toContain(`GATEWAY_KEY_SHA256=${crypto.createHash("sha256").update(apiKey).digest("hex")}`);
    });

    it("puts its routes back when they are changed on its node, where alone the router's admin API answers", async () => {
        const outputs = await stack.outputs();
        const routes = outputs.gateway.value.routes as Record<string, { url: string }>;
        // Requests to the router on the gateway node's loopback, in one go (the launcher looks every
        // second); answers the workers after them.
        const PROGRAM = [
            "import json, sys, urllib.request",
            "def call(method, route, body=None):",
            "    request = urllib.request.Request('http://127.0.0.1:29001' + route, data=body and body.encode(), method=method, headers={'Content-Type': 'application/json'})",
            "    return urllib.request.urlopen(request, timeout=10).read().decode()",
            "for method, route, body in json.loads(sys.argv[1]):",
            "    call(method, route, body)",
            "print(call('GET', '/workers'))",
        ].join("\n");
        const admin = (calls: [string, string, string | null][]) =>
            (JSON.parse(onNode(cluster.nodes[2], `docker exec vllm-fleet-gateway-${name} python3 -c ${shQuote(PROGRAM)} ${shQuote(JSON.stringify(calls))}`)) as { workers: { url: string; model_id: string }[] }).workers
                .map((worker) => `${worker.model_id} ${worker.url}`)
                .sort();
        const declared = Object.entries(routes).map(([model, route]) => `${model} ${route.url}`).sort();
        expect(admin([])).toEqual(declared);
        const changed = admin([
            ["POST", "/workers", JSON.stringify({ url: "http://127.0.0.1:9", model_id: "big-moe" })],
            ["DELETE", `/workers/${encodeURIComponent(routes["coder-moe"].url)}`, null],
        ]);
        expect(changed).not.toEqual(declared);
        const deadline = Date.now() + 30_000;
        while (JSON.stringify(admin([])) !== JSON.stringify(declared) && Date.now() < deadline) {
            await new Promise((resolve) => setTimeout(resolve, 500));
        }
        expect(admin([])).toEqual(declared);
    });

    it("adds small beside big on spark1: the preview creates small's only, and no other container changes, the gateway's neither", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, CODER, SMALL]);
        const changes = await previewChanges(stack);
        // Besides small's creates, only the gateway changes: its route set gained small's model.
        const others = (list: string[] | undefined) => (list ?? []).filter((resource) => !isGatewayResource(resource) && resource !== "default");
        expect(Object.keys(changes).filter((op) => others(changes[op]).length > 0)).toEqual(["create"]);
        expect(changes.create.every((resource) => resource.startsWith("small-") || resource === "spark1-small-image"), changes.create.join(" ")).toBe(true);
        // The gateway's new route is given to the running router: its container is not in the preview.
        expect(Object.values(changes).flat()).not.toContain("gateway-container");
        expect(changes.update ?? [], "the gateway's routes, in place").toContain("gateway-routes");
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder", "small"]);
        await expectGatewayServing(up.outputs.services.value, up.outputs.gatewayEndpoint.value, up.outputs.apiKey.value, ["big", "coder", "small"]);
        const after = containerIds(cluster, name);
        expect(Object.keys(idsOf(after, "small")).sort()).toEqual(["spark1/vllm-fleet-small-vllm", "spark1/vllm-fleet-small-watchdog"]);
        expect({ ...idsOf(after, "big"), ...idsOf(after, "coder") }).toEqual({ ...idsOf(before, "big"), ...idsOf(before, "coder") });
        expect(after[GATEWAY_CONTAINER], "the gateway's container, kept with a new route").toBe(before[GATEWAY_CONTAINER]);
    });

    it("changes coder's maxModelLen: coder's containers are replaced, big's, small's and the gateway's keep their ids", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, { ...CODER, vllm: { ...CODER.vllm, maxModelLen: 2048 } }, SMALL]);
        // spark1 carries big and small: the read of a preview takes one SSH session there, not one
        // per service (sshd logs each session: test/sim/node/sshd_config.conf).
        const sessions = () => Number(onNode(cluster.nodes[0], "grep -c 'Starting session: ' /var/log/sshd.log || true").trim());
        const sessionsBefore = sessions();
        await stack.preview();
        expect(sessions() - sessionsBefore, "SSH sessions on spark1 during a preview").toBe(1);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const after = containerIds(cluster, name);
        expect({ ...idsOf(after, "big"), ...idsOf(after, "small") }).toEqual({ ...idsOf(before, "big"), ...idsOf(before, "small") });
        // The routes did not change (same models, same endpoints): the gateway stays.
        expect(after[GATEWAY_CONTAINER]).toBe(before[GATEWAY_CONTAINER]);
        expect(after[`${GATEWAY_CONTAINER}-watchdog`]).toBe(before[`${GATEWAY_CONTAINER}-watchdog`]);
        await expectGatewayServing(up.outputs.services.value, up.outputs.gatewayEndpoint.value, up.outputs.apiKey.value, ["big", "coder", "small"]);
        expect(idsOf(after, "coder")["spark3/vllm-fleet-coder-vllm"]).not.toBe(idsOf(before, "coder")["spark3/vllm-fleet-coder-vllm"]);
        await expectServing(up.outputs.services.value, up.outputs.apiKey.value, ["big", "coder", "small"]);
    });

    it("removes small: only small's containers go", async () => {
        const before = containerIds(cluster, name);
        await setServices([BIG, { ...CODER, vllm: { ...CODER.vllm, maxModelLen: 2048 } }]);
        const changes = await previewChanges(stack);
        expect(changes.delete.filter((resource) => !isGatewayResource(resource)).every((resource) => resource.startsWith("small-") || resource === "spark1-small-image"), changes.delete.join(" ")).toBe(true);
        expect((changes.create ?? []).filter((resource) => !isGatewayResource(resource))).toEqual([]);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const after = containerIds(cluster, name);
        expect(idsOf(after, "small")).toEqual({});
        expect(withoutGateway(after)).toEqual({ ...idsOf(before, "big"), ...idsOf(before, "coder") });
        expect(after[GATEWAY_CONTAINER], "the gateway's container, kept with a route less").toBe(before[GATEWAY_CONTAINER]);
        await expectGatewayServing(up.outputs.services.value, up.outputs.gatewayEndpoint.value, up.outputs.apiKey.value, ["big", "coder"]);
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

        const gatewayEndpoint = (await stack.outputs()).gatewayEndpoint.value as string;
        const started = Date.now();
        const sampler = sampleServing([oldEndpoint, newEndpoint, gatewayEndpoint], "coder-moe", apiKey);
        // And the load test (npm run loadtest's own code) through the gateway, round after round at
        // concurrency 4, for as long as the up runs.
        let upDone = false;
        const load = (async () => {
            const counts = { requests: 0, ok: 0, errors: [] as string[] };
            while (!upDone) {
                const report = await runLoadtest({ endpoint: gatewayEndpoint, model: "coder-moe", apiKey, concurrency: 4, requests: 8, maxTokens: 8, timeoutMs: 30_000 });
                for (const level of report.levels) {
                    counts.requests += level.summary.requests;
                    counts.ok += level.summary.ok;
                    counts.errors.push(...level.requests.filter((request) => request.error).map((request) => JSON.stringify(request.error)));
                }
            }
            return counts;
        })();
        const up = await stack.up().finally(() => (upDone = true));
        const samples = await sampler.stop();
        const loaded = await load;
        expect(up.summary.result).toBe("succeeded");
        expect(loaded.errors.slice(0, 5), "the load test's failed requests through the gateway").toEqual([]);
        expect(loaded.ok).toBe(loaded.requests);
        expect(loaded.requests).toBeGreaterThan(20);
        console.info(`blue/green under the load test through the gateway: ${loaded.requests} requests, ${loaded.requests - loaded.ok} failed`);

        // Through the gateway at every sample; and coder2 answered before coder's rank 0 died.
        const gaps = samples.filter((sample) => !sample.answered[2]);
        expect(samples.length).toBeGreaterThan(10);
        expect(gaps.map((sample) => new Date(sample.at).toISOString()), "the gateway's unanswered samples").toEqual([]);
        const firstNew = samples.find((sample) => sample.answered[1]);
        expect(firstNew).toBeDefined();
        const events = containerEvents(cluster.nodes[2], name, started);
        const died = events.find((event) => event.name === "vllm-fleet-coder-vllm" && event.action === "die");
        const newStart = events.find((event) => event.name === "vllm-fleet-coder2-vllm" && event.action === "start");
        expect(died, JSON.stringify(events)).toBeDefined();
        expect(newStart!.at).toBeLessThan(died!.at);
        expect(firstNew!.at).toBeLessThan(died!.at);
        console.info(
            `blue/green: ${samples.length} samples through the gateway during up, none unanswered; coder2 answered ${((died!.at - firstNew!.at) / 1000).toFixed(1)} s before coder's rank 0 died, its container started ${((died!.at - newStart!.at) / 1000).toFixed(1)} s before`,
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

    it("with the firewall, admits only security.clients to the gateway's port, and with servicePorts gateway only the fabric to the services' ports", async () => {
        const hostIp = cluster.mgmtSubnet.replace(/\.0\/24$/, ".1");
        const [spark1, , spark3] = cluster.nodes;
        // From another host of the management network (spark1's address there), to spark3's management address.
        const fromSpark1 = (port: number) => onNode(spark1, `timeout 5 bash -c 'echo > /dev/tcp/${spark3.mgmtIp}/${port}' 2>/dev/null && echo connected || echo refused`).trim();
        expect(fromSpark1(GATEWAY.port)).toBe("connected");
        await stack.setConfig("vllm-fleet:security", { value: JSON.stringify({ firewall: true, clients: [`${hostIp}/32`], servicePorts: "gateway" }) });
        const warnings: string[] = [];
        const up = await stack.up({ onEvent: diagnostics(warnings, "warning") });
        expect(up.summary.result).toBe("succeeded");
        expect(warnings.join("\n")).not.toContain("security.clients");
        const endpoint = up.outputs.gatewayEndpoint.value as string;
        const apiKey = up.outputs.apiKey.value as string;
        // This machine is a client: it reaches the gateway, and through it both models.
        expect(await gatewayStatus(endpoint, "big-moe", apiKey)).toBe(200);
        expect(await gatewayStatus(endpoint, "coder-moe", apiKey)).toBe(200);
        // Another host is not: reset at the gateway's port, as at a service's.
        expect(fromSpark1(GATEWAY.port)).toBe("refused");
        // The services' own ports: not from this machine either (servicePorts gateway), only over the fabric.
        const services = up.outputs.services.value as ServiceOutputs;
        expect(await statusOf(`${services.big.endpoint}/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).toBe(0);
        expect(onNode(spark3, `timeout 5 bash -c 'echo > /dev/tcp/${spark1.fabricIp}/8000' && echo connected`).trim()).toBe("connected");
        // Back to the defaults: the rules go, the ports answer everyone again.
        await stack.setConfig("vllm-fleet:security", { value: JSON.stringify({}) });
        expect((await stack.up()).summary.result).toBe("succeeded");
        expect(fromSpark1(GATEWAY.port)).toBe("connected");
        expect(await statusOf(`${services.big.endpoint}/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).toBe(200);
    });

    it("reports no changes on a second up; a stopped service answers 503 through the gateway for its model only; destroy removes every container", async () => {
        const again = await stack.up({ expectNoChanges: true });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        // coder's rank 0 stopped by hand (Docker's restart policy leaves it stopped; its watchdog only logs).
        const endpoint = again.outputs.gatewayEndpoint.value as string;
        const apiKey = again.outputs.apiKey.value as string;
        onNode(cluster.nodes[2], "docker stop vllm-fleet-coder3-vllm >/dev/null");
        const coder: number[] = [];
        for (let attempt = 0; attempt < 4; attempt++) {
            coder.push(await gatewayStatus(endpoint, "coder-moe", apiKey));
            expect(await gatewayStatus(endpoint, "big-moe", apiKey), "big through the gateway while coder is down").toBe(200);
        }
        // The router's first try fails (500), then its circuit for coder's worker is open (503).
        expect(coder.every((status) => status >= 500), coder.join(" ")).toBe(true);
        expect(coder.slice(1).every((status) => status === 503), coder.join(" ")).toBe(true);
        // npm run status: the gateway's row, each route up or down.
        const status = await stackStatus(stack.workspace, name);
        expect(status.text).toContain(`gateway on spark3: ${endpoint}`);
        expect(status.text).toMatch(/big-moe -> service big \S+: registered, up/);
        expect(status.text).toMatch(/coder-moe -> service coder3 \S+: registered, DOWN \(HTTP 503/);
        expect(status.serving).toBe(false);
        await stack.destroy();
        for (const node of cluster.nodes) {
            expect(onNode(node, "docker ps -aq").trim()).toBe("");
        }
    });
});
