/**
 * Nobody gets in without the key (issue 35), in the pure layer and the programs vLLM and the gateway
 * run: the settings of `security` (clients, servicePorts, allowedOrigins) and their refusals; the
 * firewall's client ports; the services' key check (vllm_fleet_key.py, run here by Python as vLLM
 * would run it: an ASGI middleware); the serve flags that load it and close CORS; the gateway's
 * proxy configuration.
 */
import { spawnSync } from "child_process";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { ConfigError, parseFleetConfig } from "../../infra/core/config";
import { clientPortsWarning } from "../../infra/core/config/security";
import { managedVllmFlag } from "../../infra/core/config/vllmFlags";
import { ContainerSpec } from "../../infra/core/containerSpec";
import { GATEWAY_OPENAI_ROUTES, gatewayProxyConfig, planFirewalls, planKeyCheck, vllmServeArgs, withKeyCheck } from "../../infra/core/plan";
import { BIG, CODER, GATEWAY, fleet } from "./fleetFixtures";
import { sparkDuo } from "./stacks";

function errorOf(raw: Record<string, unknown>): string {
    try {
        parseFleetConfig(raw);
    } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
    }
    throw new Error("expected a ConfigError");
}

const withGateway = fleet([BIG, CODER], GATEWAY);

describe("security settings: who may reach the client ports, and from which web pages", () => {
    it("defaults to everyone, the services' ports as the clients', and no web origin", () => {
        expect(parseFleetConfig(sparkDuo).security).toMatchObject({ clients: ["0.0.0.0/0"], servicePorts: "clients", allowedOrigins: [] });
    });

    it.each([
        [{ firewall: true, clients: ["10.1.230.5/24"] }, "vllm-fleet:security.clients[0]: got \"10.1.230.5/24\"; expected an IPv4 CIDR block"],
        [{ firewall: true, clients: [] }, "vllm-fleet:security.clients: got []; expected at least one network"],
        [{ clients: ["10.1.230.0/24"] }, "vllm-fleet:security.clients: got [\"10.1.230.0/24\"]; expected 0.0.0.0/0 (the default) unless vllm-fleet:security.firewall is true"],
        [{ allowedOrigins: ["*"] }, "vllm-fleet:security.allowedOrigins[0]: got \"*\"; expected an origin such as https://chat.example.com"],
        [{ allowedOrigins: ["https://chat.example.com/app"] }, "vllm-fleet:security.allowedOrigins[0]"],
        [{ servicePorts: "nobody" }, "vllm-fleet:security.servicePorts: got \"nobody\""],
        [{ firewall: true, servicePorts: "gateway" }, "vllm-fleet:security.servicePorts: got \"gateway\"; expected clients (the default) unless the stack has a vllm-fleet:gateway"],
    ])("refuses %j, naming the key and what it takes", (security, message) => {
        expect(errorOf({ ...sparkDuo, security })).toContain(message);
    });

    it("refuses servicePorts gateway without the firewall that enforces it", () => {
        expect(errorOf({ ...withGateway, security: { servicePorts: "gateway" } })).toContain(
            "vllm-fleet:security.servicePorts: got \"gateway\"; expected clients (the default) unless vllm-fleet:security.firewall is true",
        );
        expect(parseFleetConfig({ ...withGateway, security: { firewall: true, servicePorts: "gateway" } }).security.servicePorts).toBe("gateway");
    });

    it("warns at preview when everyone may reach the client ports (no firewall, or clients left at everyone), and only then", () => {
        const security = (value: object) => parseFleetConfig({ ...sparkDuo, security: value }).security;
        expect(clientPortsWarning(security({ firewall: true }), ["4000", "8000"])).toBe(
            "vllm-fleet:security.clients is 0.0.0.0/0: ports 4000 and 8000 accept connections from everyone (the API key is still required); set it to your clients' networks (CIDR blocks) to keep the others off",
        );
        expect(clientPortsWarning(security({ firewall: true }), ["8000"])).toContain("port 8000 accepts connections from everyone");
        expect(clientPortsWarning(security({ firewall: true, clients: ["10.1.230.0/24"] }), ["8000"])).toBeUndefined();
        expect(clientPortsWarning(security({}), ["8000"])).toBe(
            "vllm-fleet:security.firewall is off: port 8000 accepts connections from everyone (the API key is still required); set vllm-fleet:security.firewall true and vllm-fleet:security.clients to your clients' networks (CIDR blocks) to keep the others off",
        );
        expect(clientPortsWarning(security({}), [])).toBeUndefined();
    });
});

describe("the firewall's client ports", () => {
    const rules = (security: object) => {
        const config = parseFleetConfig({ ...withGateway, security });
        return planFirewalls(config, config.services.map((service) => ({ ...config, nodes: service.nodes, executor: service.executor, ray: service.ray, vllm: { ...config.vllm, ...service.vllm } as typeof config.vllm })), "unit", {});
    };

    it("admits the gateway's port and each service's API from security.clients, SSH from all", () => {
        const byNode = Object.fromEntries(rules({ firewall: true, clients: ["10.1.230.0/24"] }).map((plan) => [plan.node, plan]));
        expect(byNode.spark1).toMatchObject({ openPorts: ["22"], clientPorts: ["8000"], clients: ["10.1.230.0/24"] });
        expect(byNode.spark3).toMatchObject({ clientPorts: ["4000", "8001"] });
        expect(byNode.spark1.closedPorts).toContain("6379");
        expect(byNode.spark3.closedPorts).toContain("29501");
    });

    it("keeps the services' APIs to the fabric with servicePorts gateway: clients reach them through the gateway only", () => {
        const byNode = Object.fromEntries(rules({ firewall: true, clients: ["10.1.230.0/24"], servicePorts: "gateway" }).map((plan) => [plan.node, plan]));
        expect(byNode.spark1.clientPorts).toEqual([]);
        expect(byNode.spark1.closedPorts).toContain("8000");
        expect(byNode.spark3.clientPorts).toEqual(["4000"]);
        expect(byNode.spark3.closedPorts).toContain("8001");
    });

    it("has no rules without the firewall", () => {
        expect(rules({})).toEqual([]);
    });
});

describe("the services' key check: the flags that load it, the file the container carries", () => {
    it("has vLLM load the key check and allow no web origin, on every version's flags", () => {
        const args = vllmServeArgs(parseFleetConfig(sparkDuo), "0.0.0.0");
        expect(args.slice(args.indexOf("--allowed-origins"), args.indexOf("--allowed-origins") + 2)).toEqual(["--allowed-origins", "[]"]);
        expect(args.slice(args.indexOf("--middleware"), args.indexOf("--middleware") + 2)).toEqual(["--middleware", "vllm_fleet_key.RequireKey"]);
        const origins = vllmServeArgs(parseFleetConfig({ ...sparkDuo, security: { allowedOrigins: ["https://chat.example.com", "http://10.1.230.5:3000"] } }), "0.0.0.0");
        expect(origins[origins.indexOf("--allowed-origins") + 1]).toBe('["https://chat.example.com","http://10.1.230.5:3000"]');
    });

    it("loads no key check when the stack serves without a key", () => {
        expect(vllmServeArgs(parseFleetConfig({ ...sparkDuo, vllm: { apiKey: "none" } }), "0.0.0.0")).not.toContain("--middleware");
    });

    it("refuses vllm.extraArgs that set either flag itself", () => {
        expect(managedVllmFlag("--middleware=my.Middleware")).toEqual({ flags: ["--middleware"], spelling: "exact" });
        expect(managedVllmFlag("--allowed-origins")).toEqual({ flags: ["--allowed-origins"], spelling: "exact" });
        expect(errorOf({ ...sparkDuo, vllm: { extraArgs: ["--allowed-origins", '["*"]'] } })).toContain("vllm-fleet:vllm.extraArgs[0]");
    });

    it("puts the file in the container and its directory first on PYTHONPATH, before the image's own", () => {
        const spec: ContainerSpec = { name: "c", image: "i", command: [], env: { A: "1" }, mounts: [], networkHost: true, ipcHost: true, ulimits: [], restart: "no", labels: {} };
        const plan = planKeyCheck("MODULE TEXT");
        expect(withKeyCheck(spec, plan, "")).toMatchObject({
            env: { A: "1", PYTHONPATH: "/opt/vllm-fleet/python" },
            files: [{ path: "/opt/vllm-fleet/python/vllm_fleet_key.py", content: "MODULE TEXT" }],
        });
        expect(withKeyCheck(spec, plan, "/opt/extra:/opt/more").env.PYTHONPATH).toBe("/opt/vllm-fleet/python:/opt/extra:/opt/more");
        expect(withKeyCheck(spec, undefined, "/x")).toBe(spec);
    });
});

/** Runs vllm_fleet_key.RequireKey on requests, as vLLM's ASGI server would hand them to it. */
function keyCheck(key: string, requests: readonly { method?: string; path: string; auth?: string; type?: string; root?: string }[]): { status: number | "passed" | "closed"; body?: string }[] {
    const harness = `
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from vllm_fleet_key import RequireKey

async def inner(scope, receive, send):
    scope["passed"] = True

async def one(request):
    scope = {"type": request.get("type", "http"), "method": request.get("method", "GET"), "path": request["path"],
             "root_path": request.get("root", ""), "headers": []}
    if "auth" in request:
        scope["headers"].append((b"authorization", request["auth"].encode()))
    sent = []
    async def send(message):
        sent.append(message)
    async def receive():
        return {"type": "http.request", "body": b""}
    await RequireKey(inner)(scope, receive, send)
    if scope.get("passed"):
        return {"status": "passed"}
    if sent and sent[0]["type"] == "websocket.close":
        return {"status": "closed"}
    return {"status": sent[0]["status"], "body": sent[1]["body"].decode()}

print(json.dumps([asyncio.run(one(request)) for request in json.loads(sys.argv[2])]))
`;
    const result = spawnSync("python3", ["-c", harness, path.join(__dirname, "..", "..", "components", "scripts"), JSON.stringify(requests)], {
        // No __pycache__ left in components/scripts (the node-side programs' folder).
        env: { ...process.env, VLLM_API_KEY: key, PYTHONDONTWRITEBYTECODE: "1" },
        encoding: "utf8",
    });
    if (result.status !== 0) {
        throw new Error(result.stderr);
    }
    return JSON.parse(result.stdout);
}

describe("vllm_fleet_key.RequireKey (the services' key check of every route)", () => {
    const KEY = "k3y-with-$pecial\"chars";

    it("refuses every route without the key, /v1 or not: what vLLM's own check leaves open", () => {
        const paths = ["/invocations", "/tokenize", "/detokenize", "/pooling", "/score", "/classify", "/rerank", "/metrics", "/load", "/version", "/docs", "/openapi.json", "/v1/completions", "/v2/rerank", "/nothing-here"];
        for (const [index, answer] of keyCheck(KEY, paths.map((p) => ({ method: "POST", path: p }))).entries()) {
            expect(answer, paths[index]).toEqual({ status: 401, body: '{"error": "Unauthorized"}' });
        }
    });

    it("passes a request with the key, Bearer in any case; refuses a wrong key, another scheme, the key without its scheme", () => {
        expect(keyCheck(KEY, [
            { path: "/invocations", auth: `Bearer ${KEY}` },
            { path: "/invocations", auth: `bearer ${KEY}` },
            { path: "/invocations", auth: `Bearer ${KEY}x` },
            { path: "/invocations", auth: `Basic ${KEY}` },
            { path: "/invocations", auth: KEY },
        ]).map((answer) => answer.status)).toEqual(["passed", "passed", 401, 401, 401]);
    });

    it("leaves the probes open (/health, /ping) and OPTIONS (a CORS preflight carries no key), nothing that merely starts like them", () => {
        expect(keyCheck(KEY, [
            { path: "/health" },
            { path: "/ping", method: "POST" },
            { path: "/v1/completions", method: "OPTIONS" },
            { path: "/health/" },
            { path: "/healthz" },
            { path: "/health/../invocations" },
        ]).map((answer) => answer.status)).toEqual(["passed", "passed", "passed", 401, 401, 401]);
    });

    it("reads the path below the root path, and closes a websocket without the key", () => {
        expect(keyCheck(KEY, [
            { path: "/api/health", root: "/api" },
            { path: "/api/invocations", root: "/api" },
            { path: "/v1/realtime", type: "websocket" },
            { path: "/v1/realtime", type: "websocket", auth: `Bearer ${KEY}` },
        ]).map((answer) => answer.status)).toEqual(["passed", 401, "closed", "passed"]);
    });

    it("passes everything when no key is set (vllm-fleet then does not load it)", () => {
        expect(keyCheck("", [{ path: "/invocations" }]).map((answer) => answer.status)).toEqual(["passed"]);
    });
});

describe("the gateway's proxy (HAProxy in front of vllm-router on the loopback)", () => {
    const lines = (config: string) => config.split("\n").map((line) => line.trim());

    it("binds the gateway's port, sends everything it passes to the router on the loopback", () => {
        const config = gatewayProxyConfig({ port: 4000, routerPort: 29001, allowedOrigins: [], keyed: true });
        expect(lines(config)).toContain("bind 0.0.0.0:4000");
        expect(lines(config)).toContain("server router 127.0.0.1:29001");
        expect(lines(config)).toContain(`acl openai path ${GATEWAY_OPENAI_ROUTES.join(" ")}`);
        expect(GATEWAY_OPENAI_ROUTES).not.toContain("/workers");
    });

    it("asks for the key (as its SHA-256) before anything but /health, then passes only the OpenAI routes", () => {
        const rules = lines(gatewayProxyConfig({ port: 4000, routerPort: 29001, allowedOrigins: [], keyed: true })).filter((line) => line.startsWith("http-request return"));
        expect(rules.map((rule) => /status (\d+)/.exec(rule)![1])).toEqual(["403", "401", "404"]);
        expect(rules[1]).toMatch(/if !health !bearer \|\| !health !key_ok$/);
        expect(rules[2]).toMatch(/if !health !openai$/);
        const config = gatewayProxyConfig({ port: 4000, routerPort: 29001, allowedOrigins: [], keyed: true });
        expect(config).toContain('sha2(256),hex,lower -m str "${GATEWAY_KEY_SHA256}"');
        expect(gatewayProxyConfig({ port: 4000, routerPort: 29001, allowedOrigins: [], keyed: false })).not.toContain("key_ok");
    });

    it("answers no preflight and no request with an allow-origin unless the stack names the origin; drops the router's own", () => {
        const closed = gatewayProxyConfig({ port: 4000, routerPort: 29001, allowedOrigins: [], keyed: true });
        expect(closed).not.toMatch(/(set|add)-header access-control-allow-origin|hdr access-control-allow-origin/);
        expect(lines(closed)).toContain("http-response del-header access-control-allow-origin");
        const open = gatewayProxyConfig({ port: 4000, routerPort: 29001, allowedOrigins: ["https://chat.example.com"], keyed: true });
        expect(lines(open)).toContain("acl origin_allowed req.hdr(origin) -m str https://chat.example.com");
        expect(open).toMatch(/http-request return status 204 hdr access-control-allow-origin %\[req.hdr\(origin\)\].* if preflight preflight_asks origin_allowed/);
        expect(lines(open)).toContain("http-response set-header access-control-allow-origin %[var(txn.origin)] if { var(txn.origin) -m found }");
    });
});
