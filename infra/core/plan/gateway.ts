/**
 * The gateway's plan: its routes (each served model to the endpoint of the service that serves it)
 * and its container. {@link gatewayRoutes} is the one place routes come from, so that moving a
 * served name from one service to another (a swap) is a change of its input only. Pure.
 */
import { FleetConfig } from "../config";
import { ContainerSpec } from "../containerSpec";
import { fleetLabels, gatewayContainer } from "../names";
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
        const host = service.apiAddress.includes(":") ? `[${service.apiAddress}]` : service.apiAddress;
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
    /** The container (without the API key: added where it is known, as VLLM_API_KEY). */
    readonly spec: ContainerSpec;
    readonly ready: { readonly container: string; readonly port: number; readonly models: readonly string[]; readonly timeoutSeconds: number };
    /** The watchdog of the gateway (watchdog.py, executor gateway) beside it, when supervision.watchdog. */
    readonly watchdog?: ContainerSpec;
}

/** What the gateway's container runs: the launcher (components/scripts/gateway.py). */
export interface GatewayScripts {
    readonly launcher: string;
    /** components/scripts/watchdog.py, which watches the gateway too (its executor `gateway`). */
    readonly watchdog: string;
}

/** How long a (re)started router may go without its routes before the watchdog counts it failing. */
const GATEWAY_STARTUP_GRACE_SECONDS = 60;

/**
 * The gateway's plan, when the stack has one. The routes are in the container's environment, so a
 * changed route set makes a new container (the router keeps its registry in memory only: a
 * container restarted by Docker registers them again from the same place); anything else of a
 * service (its settings, its containers) leaves the gateway as it is.
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
    const host = node.host.includes(":") ? `[${node.host}]` : node.host;
    const container = gatewayContainer(stack);
    const routeList = JSON.stringify(routes.map((route) => ({ model: route.model, url: route.url })));
    const { supervision } = config;
    const spec: ContainerSpec = {
        name: container,
        image: gateway.image.name,
        ...runs(["python3", "-c", scripts.launcher]),
        env: {
            GATEWAY_PORT: String(gateway.port),
            GATEWAY_ROUTES: routeList,
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
        fabricIp: nodes.find((planned) => planned.name === gateway.node)!.fabric.ip,
        port: gateway.port,
        endpoint: `http://${host}:${gateway.port}/v1`,
        routes,
        image: gateway.image,
        spec,
        ready: { container, port: gateway.port, models: routes.map((route) => route.model), timeoutSeconds: config.timeouts.vllmReadySeconds },
        watchdog: supervision.watchdog
            ? {
                  name: `${container}-watchdog`,
                  image: gateway.image.name,
                  ...runs(["python3", "-c", scripts.watchdog]),
                  // It asks the router's admin API for the routes (no completion: a service that is
                  // down is its own watchdog's) and restarts the gateway's container when they stay missing.
                  env: {
                      WATCHDOG_EXECUTOR: "gateway",
                      WATCHDOG_CONTAINER: container,
                      WATCHDOG_HOST: "127.0.0.1",
                      WATCHDOG_PORT: String(gateway.port),
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
