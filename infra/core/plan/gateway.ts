/**
 * The gateway's plan: its routes (each served model to the endpoint of the service that serves it)
 * and its container. {@link gatewayRoutes} is the one place routes come from, so that moving a
 * served name from one service to another (a swap) is a change of its input only. Pure.
 */
import * as crypto from "crypto";
import { FleetConfig, GATEWAY_ROUTER_PORT } from "../config";
import { ContainerSpec } from "../containerSpec";
import { fleetLabels, gatewayContainer } from "../names";
import { urlHost } from "../net";
import { runs } from "./containers";
import { PlannedNode } from "./nodes";

/** One route of the gateway: requests whose `model` is `model` go to `url`, the API of `service`. */
export interface GatewayRoute {
    readonly model: string;
    readonly service: string;
    /** The service's API root as the gateway reaches it (`http://<fabric ip>:<port>`, no /v1). */
    readonly url: string;
}

/** What a service offers the gateway: the names it serves, and where its API answers. */
export interface RoutedService {
    readonly name: string;
    /** The ids it answers to as `model` (vLLM's --served-model-name). */
    readonly servedNames: readonly string[];
    /** Its first node's fabric address (the API answers there with vllm.host all and fabric). */
    readonly apiAddress: string;
    readonly port: number;
}

/**
 * The routes of the gateway, in the services' order: each served name to its service. Throws when
 * two services serve one name (the router maps one model id to one set of workers); the config's
 * checks should have refused that before.
 */
export function gatewayRoutes(services: readonly RoutedService[]): GatewayRoute[] {
    const routes: GatewayRoute[] = [];
    for (const service of services) {
        const host = urlHost(service.apiAddress);
        for (const model of service.servedNames) {
            const other = routes.find((route) => route.model === model);
            if (other) {
                throw new Error(`the model ${model} is served by both service ${other.service} and service ${service.name}; the gateway routes each model to one service`);
            }
            routes.push({ model, service: service.name, url: `http://${host}:${service.port}` });
        }
    }
    return routes;
}

/** The gateway as planned: where it runs and answers, its routes, its container and its readiness gate. */
export interface GatewayPlan {
    readonly node: string;
    /** The node's fabric address (where a copy of its image arrives). */
    readonly fabricIp: string;
    readonly port: number;
    /** The endpoint clients use, e.g. http://10.1.230.183:4000/v1. */
    readonly endpoint: string;
    readonly routes: readonly GatewayRoute[];
    readonly image: FleetConfig["image"];
    /**
     * The container: the launcher, the router and its proxy (without the API key's SHA-256: added
     * where the key is known, as GATEWAY_KEY_SHA256, with {@link withKeyDigest}).
     */
    readonly spec: ContainerSpec;
    /** Whether the proxy asks for the stack's API key. */
    readonly keyed: boolean;
    /**
     * The routes as the container gets them (gateway-routes.sh writes them to `file` inside it, and
     * the launcher applies them in place): not part of the container's spec, so a changed route set
     * keeps the router and its container.
     */
    readonly routesStep: { readonly container: string; readonly port: number; readonly file: string; readonly json: string; readonly timeoutSeconds: number };
    readonly ready: { readonly container: string; readonly port: number; readonly models: readonly string[]; readonly timeoutSeconds: number };
    /** The watchdog of the gateway (watchdog.py, executor gateway) beside it, when supervision.watchdog. */
    readonly watchdog?: ContainerSpec;
}

/**
 * The OpenAI routes the gateway's proxy passes to the router (vllm-router 0.1.17 serves these for
 * the models of its workers), with the key; everything else the router serves (its admin API:
 * /workers, /add_worker, /remove_worker, /list_workers, /flush_cache, /get_loads, ...) answers 404
 * from the proxy, key or not. `/health` passes without the key (a probe's).
 */
export const GATEWAY_OPENAI_ROUTES = ["/v1/completions", "/v1/chat/completions", "/v1/models", "/v1/embeddings", "/v1/rerank", "/v1/responses"] as const;

/** What the gateway's proxy is configured from. */
export interface GatewayProxySettings {
    /** Where clients connect (all the node's IPv4 addresses). */
    readonly port: number;
    /** Where the router listens, on the loopback only. */
    readonly routerPort: number;
    /** The web origins that may use it from a browser (CORS); none: no cross-site use. */
    readonly allowedOrigins: readonly string[];
    /** Whether requests need the stack's API key (its SHA-256 comes in the variable GATEWAY_KEY_SHA256). */
    readonly keyed: boolean;
}

/**
 * The configuration of the gateway's proxy: HAProxy (the maintained reverse proxy, Debian's and the
 * official image's package) on `port` in front of the router on the loopback. It answers a CORS
 * preflight itself (the allow headers for an allowed origin, 403 for any other), refuses a request
 * without `Authorization: Bearer <key>` (401, before anything else: a stranger learns nothing, not
 * even which routes exist), passes only {@link GATEWAY_OPENAI_ROUTES} and /health to the router
 * (404 for the rest), removes the router's own `Access-Control-Allow-*` answers (it allows every
 * origin) and names an allowed origin instead. The key is compared as its SHA-256 (HAProxy's sha2
 * converter), so the container holds only the digest, never the key. Streams pass as they come
 * (http-no-delay: each server-sent event goes out at once). Pure.
 */
export function gatewayProxyConfig(settings: GatewayProxySettings): string {
    const origins = settings.allowedOrigins;
    const lines = [
        "# vllm-fleet's gateway: HAProxy in front of vllm-router (components/scripts/gateway.py starts both).",
        "global",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    option http-no-delay",
        "    timeout connect 5s",
        "    timeout http-request 30s",
        "    timeout http-keep-alive 60s",
        // A long generation streams for as long as the router lets it (its request timeout: 1800 s).
        "    timeout client 1h",
        "    timeout server 1h",
        "frontend gateway",
        `    bind 0.0.0.0:${settings.port}`,
        "    acl preflight method OPTIONS",
        "    acl preflight_asks req.hdr(access-control-request-method) -m found",
        "    acl health path /health",
        `    acl openai path ${GATEWAY_OPENAI_ROUTES.join(" ")}`,
    ];
    if (origins.length > 0) {
        lines.push(
            `    acl origin_allowed req.hdr(origin) -m str ${origins.join(" ")}`,
            // Kept for the response, where the request's headers are no longer there to read.
            "    http-request set-var(txn.origin) req.hdr(origin) if origin_allowed",
            '    http-request return status 204 hdr access-control-allow-origin %[req.hdr(origin)] hdr access-control-allow-methods "GET, POST, OPTIONS" hdr access-control-allow-headers "authorization, content-type" hdr access-control-max-age 600 hdr vary origin if preflight preflight_asks origin_allowed',
        );
    }
    lines.push('    http-request return status 403 content-type text/plain string "Disallowed CORS origin" if preflight preflight_asks');
    if (settings.keyed) {
        lines.push(
            "    acl bearer req.fhdr(authorization),word(1,' '),lower -m str bearer",
            // HAProxy's own variable syntax, expanded by HAProxy from the container's environment.
            '    acl key_ok req.fhdr(authorization),word(2,\' \'),sha2(256),hex,lower -m str "${GATEWAY_KEY_SHA256}"',
            `    http-request return status 401 content-type application/json string '{"error": "Unauthorized"}' hdr www-authenticate Bearer if !health !bearer || !health !key_ok`,
        );
    }
    lines.push(
        `    http-request return status 404 content-type application/json string '{"error": "Not Found: the gateway serves the OpenAI routes only"}' if !health !openai`,
        "    http-response del-header access-control-allow-origin",
        "    http-response del-header access-control-allow-credentials",
        "    http-response del-header access-control-allow-methods",
        "    http-response del-header access-control-allow-headers",
        "    http-response del-header access-control-expose-headers",
    );
    if (origins.length > 0) {
        lines.push(
            "    http-response set-header access-control-allow-origin %[var(txn.origin)] if { var(txn.origin) -m found }",
            "    http-response add-header vary origin if { var(txn.origin) -m found }",
        );
    }
    lines.push("    default_backend router", "backend router", `    server router 127.0.0.1:${settings.routerPort}`, "");
    return lines.join("\n");
}

/** The gateway's container with the SHA-256 (hex) of the stack's API key, which its proxy compares requests' keys with. */
export function withKeyDigest(spec: ContainerSpec, key: string): ContainerSpec {
    return { ...spec, env: { ...spec.env, GATEWAY_KEY_SHA256: crypto.createHash("sha256").update(key, "utf8").digest("hex") } };
}

/** What the gateway's container runs: the launcher (components/scripts/gateway.py). */
export interface GatewayScripts {
    readonly launcher: string;
    /** components/scripts/watchdog.py, which watches the gateway too (its executor `gateway`). */
    readonly watchdog: string;
}

/** How long a (re)started router may go without its routes before the watchdog counts it failing. */
const GATEWAY_STARTUP_GRACE_SECONDS = 60;
/** Where the routes live inside the gateway's container (its own filesystem: a restart keeps them). */
export const GATEWAY_ROUTES_FILE = "/etc/vllm-fleet-gateway-routes.json";
/** How long the launcher may take to apply a route set. */
const GATEWAY_ROUTES_SECONDS = 60;

/**
 * The gateway's plan, when the stack has one. The routes are not in the container's spec: they are
 * given to the running container (a file the launcher applies in place, new routes in before old
 * ones out), so neither a service's change nor a changed route set replaces the router. The
 * watchdog beside it carries them (it checks them), so it is replaced with a new route set.
 */
export function planGateway(
    config: FleetConfig,
    stack: string,
    nodes: readonly PlannedNode[],
    services: readonly RoutedService[],
    scripts: GatewayScripts,
): GatewayPlan | undefined {
    const gateway = config.gateway;
    if (!gateway) {
        return undefined;
    }
    const routes = gatewayRoutes(services);
    const node = config.nodes.find((entry) => entry.name === gateway.node)!;
    const host = urlHost(node.host);
    const container = gatewayContainer(stack);
    const fabricIp = nodes.find((planned) => planned.name === gateway.node)!.fabric.ip;
    const routeList = JSON.stringify(routes.map((route) => ({ model: route.model, url: route.url })));
    const { supervision } = config;
    const keyed = config.vllm.apiKey !== "none";
    const spec: ContainerSpec = {
        name: container,
        image: gateway.image.name,
        ...runs(["python3", "-c", scripts.launcher]),
        env: {
            GATEWAY_PORT: String(gateway.port),
            GATEWAY_ROUTER_PORT: String(GATEWAY_ROUTER_PORT),
            GATEWAY_ROUTES_FILE: GATEWAY_ROUTES_FILE,
            GATEWAY_PROXY_CONFIG: gatewayProxyConfig({ port: gateway.port, routerPort: GATEWAY_ROUTER_PORT, allowedOrigins: config.security.allowedOrigins, keyed }),
            // With monitoring, the router's metrics where the stack's Prometheus reaches them: the fabric.
            ...(config.monitoring ? { GATEWAY_METRICS_HOST: fabricIp } : {}),
        },
        mounts: [],
        networkHost: true,
        ipcHost: false,
        ulimits: [],
        // The launcher exits when the router does; Docker brings both back, and the launcher
        // registers the routes again.
        restart: "unless-stopped",
        labels: fleetLabels(stack, "gateway"),
    };
    return {
        node: gateway.node,
        fabricIp,
        port: gateway.port,
        endpoint: `http://${host}:${gateway.port}/v1`,
        routes,
        image: gateway.image,
        spec,
        keyed,
        routesStep: { container, port: GATEWAY_ROUTER_PORT, file: GATEWAY_ROUTES_FILE, json: routeList, timeoutSeconds: GATEWAY_ROUTES_SECONDS },
        ready: { container, port: gateway.port, models: routes.map((route) => route.model), timeoutSeconds: config.timeouts.vllmReadySeconds },
        watchdog: supervision.watchdog
            ? {
                  name: `${container}-watchdog`,
                  image: gateway.image.name,
                  ...runs(["python3", "-c", scripts.watchdog]),
                  // It asks the router's admin API, on the loopback, for the routes (no completion: a
                  // service that is down is its own watchdog's), and the proxy for /health, and
                  // restarts the gateway's container when either stays wrong.
                  env: {
                      WATCHDOG_EXECUTOR: "gateway",
                      WATCHDOG_CONTAINER: container,
                      WATCHDOG_HOST: "127.0.0.1",
                      WATCHDOG_PORT: String(GATEWAY_ROUTER_PORT),
                      WATCHDOG_PROXY_PORT: String(gateway.port),
                      WATCHDOG_ROUTES: routeList,
                      WATCHDOG_INTERVAL: String(supervision.probeIntervalSeconds),
                      WATCHDOG_FAILURES: String(supervision.failuresBeforeRestart),
                      WATCHDOG_STARTUP_GRACE: String(GATEWAY_STARTUP_GRACE_SECONDS),
                      WATCHDOG_MAX_RESTARTS: String(supervision.maxRestarts),
                      WATCHDOG_WINDOW: String(supervision.restartWindowSeconds),
                  },
                  mounts: [{ source: "/var/run/docker.sock", target: "/var/run/docker.sock", readOnly: false }],
                  networkHost: true,
                  ipcHost: false,
                  ulimits: [],
                  restart: "unless-stopped",
                  labels: fleetLabels(stack, "gateway-watchdog"),
              }
            : undefined,
    };
}
