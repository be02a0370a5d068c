/**
 * The gateway (issue 23): its config (`vllm-fleet:gateway`: the node, the port, the image) refused
 * with the key named; its routes from the services' served names (one pure function); its container
 * and readiness gate through the whole program on mocks: its inputs kept when a service changes but
 * not the routes, changed when the routes change, the API key never on a command line.
 */
import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../infra/core/config";
import { ROLE_LABEL, STACK_LABEL, gatewayContainer } from "../../infra/core/names";
import { gatewayRoutes } from "../../infra/core/plan";
import { configProblems } from "./configErrors";
import { BIG, CODER, GATEWAY, SMALL, fleet as fleetOf, image, model, nodes, probe } from "./fleetFixtures";
import { MockRun, liveAfter, runProgram, unsecret } from "./mocks";

const fleet = (services: readonly object[], gateway: object | null = GATEWAY) => fleetOf(services, gateway);
/** The single-model form on every node, with a gateway. */
const oneModel = (gateway: object) => ({
    nodes,
    ssh: { user: "aurora" },
    fabric: { subnet: "192.168.200.0/24" },
    image,
    model: model("m"),
    gateway,
});

describe("the gateway's config", () => {
    it("takes a node of the stack, a port (default 4000) and an image", () => {
        const config = parseFleetConfig(fleet([BIG, CODER], { node: "spark4", image: GATEWAY.image }));
        expect(config.gateway).toEqual({ node: "spark4", port: 4000, image: { name: "vllm/vllm-router:0.1.17", source: "present" } });
        expect(parseFleetConfig(fleet([BIG, CODER], null)).gateway).toBeUndefined();
    });

    describe.each([
        ["a node not in nodes", fleet([BIG, CODER], { ...GATEWAY, node: "spark9" }), "vllm-fleet:gateway.node", "the name of a node in vllm-fleet:nodes (spark1, spark2, spark3, spark4)"],
        ["the port of a service on that node", fleet([BIG, CODER], { ...GATEWAY, port: 8001 }), "vllm-fleet:gateway.port", "a port other than vllm-fleet:services[1].vllm.port on spark3"],
        ["the mp rendezvous port of a service there", fleet([BIG, CODER], { ...GATEWAY, port: 29501 }), "vllm-fleet:gateway.port", "vllm-fleet:services[1].vllm.masterPort"],
        ["Ray's GCS port of a service there", fleet([BIG, CODER], { ...GATEWAY, node: "spark1", port: 6379 }), "vllm-fleet:gateway.port", "vllm-fleet:services[0].ray.port"],
        ["a port Ray's workers take where Ray runs", fleet([BIG, CODER], { ...GATEWAY, node: "spark2", port: 12000 }), "vllm-fleet:gateway.port", "Ray's worker ports (10002-19999) of the Ray cluster there"],
        ["the single-model form's vLLM port", oneModel({ ...GATEWAY, port: 8000 }), "vllm-fleet:gateway.port", "a port other than vllm-fleet:vllm.port on spark3"],
        ["sshd's port", fleet([BIG, CODER], { ...GATEWAY, port: 22 }), "vllm-fleet:gateway.port", "the SSH port of spark3"],
        ["the router's metrics port", fleet([BIG, CODER], { ...GATEWAY, port: 29000 }), "vllm-fleet:gateway.port", "the router's metrics port (29000)"],
        ["a copy of an image no service has", fleet([BIG, CODER], { ...GATEWAY, image: { name: "vllm/vllm-router:0.1.17", source: "copy" } }), "vllm-fleet:gateway.image.source", "no service uses vllm/vllm-router:0.1.17"],
        ["one model name served by two services behind it", fleet([BIG, { ...CODER, model: model("big") }]), "vllm-fleet:services[1].model.servedName", "a name other than that of vllm-fleet:services[0] (big)"],
        ["a key it does not have", fleet([BIG, CODER], { ...GATEWAY, prot: 4000 }), "vllm-fleet:gateway.prot", "port"],
    ])("refuses %s, naming the key", (_what, raw, key, expected) => {
        it("in one line", () => {
            const lines = configProblems(raw);
            const line = lines.find((text) => text.includes(key));
            expect(line, lines.join("\n")).toBeDefined();
            expect(line).toContain(expected);
        });
    });

    it("is free of the other services' ports on its node (spark3 runs coder only)", () => {
        // big's port on spark1 is no concern of a gateway on spark3.
        expect(parseFleetConfig(fleet([BIG, CODER], { ...GATEWAY, port: 8000 })).gateway?.port).toBe(8000);
    });
});

describe("the gateway's routes", () => {
    it("send each served name to its service's API on its first node's fabric address, in the services' order", () => {
        expect(
            gatewayRoutes([
                { name: "big", servedNames: ["big-moe"], apiAddress: "192.168.200.12", port: 8000 },
                { name: "coder", servedNames: ["coder-moe", "coder"], apiAddress: "fd00::14", port: 8001 },
            ]),
        ).toEqual([
            { model: "big-moe", service: "big", url: "http://192.168.200.12:8000" },
            { model: "coder-moe", service: "coder", url: "http://[fd00::14]:8001" },
            { model: "coder", service: "coder", url: "http://[fd00::14]:8001" },
        ]);
    });

    it("refuse one name served by two services", () => {
        expect(() =>
            gatewayRoutes([
                { name: "blue", servedNames: ["chat"], apiAddress: "192.168.200.12", port: 8000 },
                { name: "green", servedNames: ["chat"], apiAddress: "192.168.200.14", port: 8001 },
            ]),
        ).toThrow("the model chat is served by both service blue and service green");
    });
});

/** The inputs of a resource as plain JSON. */
const inputsOf = (run: MockRun, name: string) => JSON.stringify(unsecret(run.byName(name).inputs));

describe("the gateway in the program (mocks)", async () => {
    const two = await runProgram(fleet([BIG, CODER]), probe);
    const watchdogNode = (resource: string) => (resource.startsWith("coder-") ? "spark3" : "spark1");
    const three = await runProgram(fleet([BIG, CODER, SMALL]), probe, undefined, liveAfter(two, watchdogNode));
    const longer = await runProgram(fleet([BIG, { ...CODER, vllm: { ...CODER.vllm, maxModelLen: 16384 } }, SMALL]), probe, undefined, liveAfter(three, watchdogNode));

    it("runs vllm-router's launcher in its own container on spark3, named after the stack and labelled", () => {
        expect(two.resources.filter((resource) => resource.type === "vllm-fleet:gateway:Gateway").map((resource) => resource.name)).toEqual(["gateway"]);
        const program = String(unsecret(two.byName("gateway-container").inputs.create));
        expect(gatewayContainer("unit")).toBe("vllm-fleet-gateway-unit");
        expect(program).toContain("NAME='vllm-fleet-gateway-unit'");
        expect(program).toContain(`'--label' '${STACK_LABEL}=unit'`);
        expect(program).toContain(`'--label' '${ROLE_LABEL}=gateway'`);
        expect(program).toContain("'vllm/vllm-router:0.1.17'");
        expect(program).toContain("vllm-router");
        // Its routes are not in its spec: a step gives them to the running container.
        expect(program).not.toContain("192.168.200.12:8000");
        const routes = String(unsecret(two.byName("gateway-routes").inputs.create));
        expect(routes).toContain(`ROUTES_JSON='[{"model":"big","url":"http://192.168.200.12:8000"},{"model":"coder","url":"http://192.168.200.14:8001"}]'`);
        expect(routes).toContain("CONTAINER='vllm-fleet-gateway-unit'");
        expect(two.byName("gateway-routes").dependencies).toContain(two.byName("gateway-container").urn);
        expect(two.byName("gateway-ready").dependencies).toContain(two.byName("gateway-routes").urn);
    });

    it("keeps the API key out of the gateway's container (its proxy holds the key's SHA-256) and off every command line", () => {
        const program = String(unsecret(two.byName("gateway-container").inputs.create));
        expect(program).not.toContain("VLLM_API_KEY");
        expect(program).toMatch(/'--env' 'GATEWAY_KEY_SHA256=[0-9a-f]{64}'/);
        expect(program).toContain("sha2(256),hex,lower -m str");
        // The readiness gate asks through the proxy with the key, given to docker by name.
        expect(String(unsecret(two.byName("gateway-ready").inputs.create))).toContain("--env VLLM_API_KEY");
    });

    it("waits for every service's readiness before it starts, and checks each model through itself", () => {
        const dependencies = two.byName("gateway-container").dependencies;
        // The readiness gates: big's `vllm serve` (ray) and coder's ready step (mp).
        expect(dependencies).toContain(two.byName("big-vllm-serve").urn);
        expect(dependencies).toContain(two.byName("coder-vllm-ready").urn);
        expect(String(unsecret(two.byName("gateway-ready").inputs.create))).toContain("MODELS=('big' 'coder')");
    });

    it("has a watchdog beside it that checks its routes in the router, started once it serves", () => {
        const program = String(unsecret(two.byName("gateway-watchdog").inputs.create));
        expect(program).toContain("NAME='vllm-fleet-gateway-unit-watchdog'");
        expect(program).toContain("WATCHDOG_EXECUTOR=gateway");
        expect(program).toContain("WATCHDOG_CONTAINER=vllm-fleet-gateway-unit");
        expect(program).toContain('WATCHDOG_ROUTES=[{"model":"big","url":"http://192.168.200.12:8000"},{"model":"coder","url":"http://192.168.200.14:8001"}]');
        expect(two.byName("gateway-watchdog").dependencies).toContain(two.byName("gateway-ready").urn);
    });

    it("keeps everything of its own when a service changes but its routes do not", () => {
        expect(inputsOf(longer, "gateway-container")).toBe(inputsOf(three, "gateway-container"));
        expect(inputsOf(longer, "gateway-routes")).toBe(inputsOf(three, "gateway-routes"));
        expect(inputsOf(longer, "gateway-watchdog")).toBe(inputsOf(three, "gateway-watchdog"));
        expect(inputsOf(longer, "gateway-ready")).toBe(inputsOf(three, "gateway-ready"));
    });

    it("keeps its container when the routes change (a service added): the new route set is given to it in place", () => {
        expect(inputsOf(three, "gateway-container")).toBe(inputsOf(two, "gateway-container"));
        expect(String(unsecret(three.byName("gateway-routes").inputs.create))).toContain('{"model":"small","url":"http://192.168.200.12:8002"}');
        // The watchdog carries the routes it checks: it is the one container a new route set replaces.
        expect(inputsOf(three, "gateway-watchdog")).not.toBe(inputsOf(two, "gateway-watchdog"));
    });

    it("puts out the gateway's endpoint and routes beside each service's own endpoint", () => {
        expect(two.outputs.gatewayEndpoint).toBe("http://10.1.230.182:4000/v1");
        expect(two.outputs.gateway).toEqual({
            node: "spark3",
            endpoint: "http://10.1.230.182:4000/v1",
            routes: { big: { service: "big", url: "http://192.168.200.12:8000" }, coder: { service: "coder", url: "http://192.168.200.14:8001" } },
        });
    });

    it("has no gateway without the key", async () => {
        const none = await runProgram(fleet([BIG, CODER], null), probe);
        expect(none.resources.some((resource) => resource.name.startsWith("gateway"))).toBe(false);
        expect(none.outputs.gatewayEndpoint).toBe("");
    });
});

describe("the gateway's image on its node (mocks)", async () => {
    it("is pulled there with source pull, and nothing is delivered with present", async () => {
        const pulled = await runProgram(fleet([BIG, CODER], { ...GATEWAY, image: { name: "vllm/vllm-router:0.1.17", source: "pull" } }), probe);
        expect(pulled.resources.filter((resource) => resource.name.endsWith("gateway-image")).map((resource) => resource.name)).toEqual(["spark3-gateway-image"]);
        // A failed pull names the key of the image it pulled: the gateway's, or the service's.
        expect(pulled.byName("spark3-gateway-image").inputs.create).toContain("IMAGE_KEY='vllm-fleet:gateway.image.name'");
        const services = await runProgram(fleet([BIG, { ...CODER, image: { ...image, source: "pull" } }]), probe);
        expect(services.byName("spark3-coder-image").inputs.create).toContain("IMAGE_KEY='vllm-fleet:services[1].image.name'");
        const present = await runProgram(fleet([BIG, CODER]), probe);
        expect(present.resources.some((resource) => resource.name.endsWith("gateway-image"))).toBe(false);
    });

    it("comes with a service's own image where that service runs on the gateway's node (copy)", async () => {
        const copied = await runProgram(fleet([BIG, { ...CODER, image: { ...image, source: "copy" } }], { ...GATEWAY, image: { ...image, source: "copy" } }), probe);
        expect(copied.resources.some((resource) => resource.name.endsWith("gateway-image"))).toBe(false);
        expect(copied.resources.some((resource) => resource.name === "spark4-coder-image")).toBe(true);
    });

    it("is copied from the first node of the first service of that image to a node no such service runs on", async () => {
        const copy = { ...image, source: "copy" };
        const alone = await runProgram(
            fleet([{ ...BIG, image: copy }, { ...CODER, nodes: ["spark3"], parallelism: { tensor: 1 }, image: copy }], { ...GATEWAY, node: "spark4", image: copy }),
            probe,
        );
        const step = alone.resources.filter((resource) => resource.name.startsWith("spark4-gateway-image"));
        expect(step.length).toBeGreaterThan(0);
        expect(JSON.stringify(unsecret(step.map((resource) => resource.inputs)))).toContain("192.168.200.12");
    });
});
