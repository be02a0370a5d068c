/**
 * `vllm-fleet:gateway`: one endpoint for every service of the stack, on a node the stack names
 * (vllm-router in its inference-gateway mode: components/gateway.ts). The schema, and the checks
 * across keys: the node is one of `nodes`, the port is free on it. Pure.
 */
import { z } from "zod";
import { FleetNode, imageSchema } from "./fields";
import { CrossKeyIssue, rayTakes } from "./ports";
import { ServiceInput } from "./services";

/** vllm-router's Prometheus port (its default, bound to 127.0.0.1 on the gateway's node). */
export const GATEWAY_METRICS_PORT = 29000;
/** Where vllm-router itself listens, on 127.0.0.1 of the gateway's node, behind the gateway's proxy on gateway.port. */
export const GATEWAY_ROUTER_PORT = 29001;

export const gatewaySchema = z.strictObject({
    /** The node (from `nodes`) the gateway runs on. */
    node: z.string(),
    /** The port clients reach the gateway on (all the node's addresses). */
    port: z.number().int().min(1).max(65535).default(4000),
    /**
     * The image that carries vllm-router (`pip install vllm-router==0.1.17`) and HAProxy (Debian's or
     * Ubuntu's `haproxy` package), delivered like a service's.
     */
    image: imageSchema,
});

export type GatewayConfig = z.output<typeof gatewaySchema>;

/** The services' ports on `node`, by key (`ray`: a Ray cluster runs there), for the checks of the gateway's and monitoring's ports. */
export function servicePortsOn(node: string, services: readonly ServiceInput[], nodes: readonly FleetNode[], oneModel: boolean): { key: string; port: number; ray: boolean }[] {
    const ports: { key: string; port: number; ray: boolean }[] = [];
    services.forEach((service, index) => {
        const own = service.nodes ?? nodes.map((entry) => entry.name);
        if (!own.includes(node)) {
            return;
        }
        const at = (key: string) => (oneModel ? `vllm-fleet:${key}` : `vllm-fleet:services[${index}].${key}`);
        ports.push({ key: at("vllm.port"), port: service.vllm.port, ray: service.executor === "ray" });
        if (service.executor === "mp") {
            ports.push({ key: at("vllm.masterPort"), port: service.vllm.masterPort, ray: false });
        } else {
            ports.push({ key: at("ray.port"), port: service.ray.port, ray: true });
        }
    });
    return ports;
}

/**
 * The checks of `gateway` across keys: its node is one of `nodes`; its port is not the port of a
 * service on that node (vLLM's, the mp rendezvous, Ray's GCS, or one Ray takes by default there),
 * the node's SSH port, nor the router's metrics port.
 */
export function gatewayIssues(gateway: GatewayConfig, services: readonly ServiceInput[], nodes: readonly FleetNode[], oneModel: boolean): CrossKeyIssue[] {
    const node = nodes.find((entry) => entry.name === gateway.node);
    if (!node) {
        return [{ path: ["gateway", "node"], value: gateway.node, expected: `the name of a node in vllm-fleet:nodes (${nodes.map((entry) => entry.name).join(", ")})` }];
    }
    const taken: string[] = [];
    const ports = servicePortsOn(node.name, services, nodes, oneModel);
    taken.push(...ports.filter((entry) => entry.port === gateway.port).map((entry) => entry.key));
    const byRay = ports.some((entry) => entry.ray) ? rayTakes(gateway.port, true) : undefined;
    if (byRay) {
        taken.push(`${byRay} of the Ray cluster there`);
    }
    if (node.port === gateway.port || gateway.port === 22) {
        taken.push(`the SSH port of ${node.name}`);
    }
    if (gateway.port === GATEWAY_METRICS_PORT) {
        taken.push(`the router's metrics port (${GATEWAY_METRICS_PORT})`);
    }
    if (gateway.port === GATEWAY_ROUTER_PORT) {
        taken.push(`the router's own port (${GATEWAY_ROUTER_PORT}, on the loopback behind the gateway's proxy)`);
    }
    const issues: CrossKeyIssue[] =
        taken.length === 0
            ? []
            : [{ path: ["gateway", "port"], value: gateway.port, expected: `a port other than ${taken.join(" and ")} on ${node.name} (the gateway uses the host's network)` }];
    // The router and its metrics listen on the loopback of the gateway's node: a service there may not take their ports.
    for (const entry of ports.filter((candidate) => candidate.port === GATEWAY_ROUTER_PORT || candidate.port === GATEWAY_METRICS_PORT)) {
        issues.push({
            path: entry.key.replace(/^vllm-fleet:/, "").split(/[.[\]]+/).filter((part) => part !== "").map((part) => (/^[0-9]+$/.test(part) ? Number(part) : part)),
            value: entry.port,
            expected: `a port other than ${entry.port} on ${node.name}: the gateway's router takes it there (${GATEWAY_ROUTER_PORT}: the router, ${GATEWAY_METRICS_PORT}: its metrics)`,
        });
    }
    // The router sends each model id to one service: two services may not serve one name behind it.
    services.forEach((service, index) => {
        const first = services.findIndex((other) => other.model.servedName === service.model.servedName);
        if (first < index) {
            issues.push({
                path: ["services", index, "model", "servedName"],
                value: service.model.servedName,
                expected: `a name other than that of vllm-fleet:services[${first}] (${services[first].name}): the gateway routes each model name to one service`,
            });
        }
    });
    if (gateway.image.source === "copy" && !services.some((service) => service.image.name === gateway.image.name)) {
        issues.push({
            path: ["gateway", "image", "source"],
            value: gateway.image.source,
            expected: `present or pull: copy takes the image from the first node of a service of the same image, and no service uses ${gateway.image.name}`,
        });
    }
    return issues;
}
