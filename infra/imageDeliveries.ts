/**
 * What each node gets delivered before anything runs there (image.source pull or copy): the images of
 * the services placed on it and the gateway's. Part of the composition root (it takes the built nodes).
 */
import { ImageDelivery, SparkNode } from "../components/sparkNode";
import { unpinnedImageWarning } from "./core/image";
import { serviceResourceName } from "./core/names";
import { NodeObservation } from "./core/observe";
import { GatewayPlan, ServicePlan } from "./core/plan";

/**
 * The images each node gets delivered (image.source pull or copy), one step per image and node,
 * named after the first service that uses it there; a copy comes from that service's first node.
 */
export function imageDeliveries(
    services: readonly ServicePlan[],
    observedIdentity: (service: ServicePlan) => string | undefined,
    node: string,
    built: readonly SparkNode[],
    gateway: GatewayPlan | undefined,
): { step: string; delivery: ImageDelivery }[] {
    const steps = new Map<string, { step: string; delivery: ImageDelivery }>();
    for (const service of services) {
        const { image } = service.config;
        const index = service.nodes.findIndex((planned) => planned.name === node);
        if (index < 0 || steps.has(image.name) || image.source === "present") {
            continue;
        }
        const step = `${node}-${serviceResourceName(service.name, "image")}`;
        if (image.source === "pull") {
            steps.set(image.name, { step, delivery: { image: image.name, pull: true, key: `vllm-fleet:${service.service.keyPrefix}image.name` } });
        } else if (index > 0) {
            const copy = service.copies[index - 1];
            const source = built.find((spark) => spark.nodeName === copy.source)!;
            steps.set(image.name, { step, delivery: { image: image.name, copyFrom: source, wantIdentity: observedIdentity(service), sourceIp: copy.sourceIp, targetIp: copy.targetIp } });
        }
    }
    // The gateway's image on its node, unless a service there brings it: pulled, or copied from the
    // first node of a service of the same image (config/gateway.ts requires one for copy).
    const image = gateway?.image;
    if (gateway && image && gateway.node === node && image.source !== "present" && !steps.has(image.name)) {
        const servedHere = services.some((service) => service.config.image.name === image.name && service.nodes.some((planned) => planned.name === node));
        const step = `${node}-gateway-image`;
        if (image.source === "pull") {
            steps.set(image.name, { step, delivery: { image: image.name, pull: true, key: "vllm-fleet:gateway.image.name" } });
        } else if (!servedHere) {
            const service = services.find((candidate) => candidate.config.image.name === image.name)!;
            const head = service.nodes[0];
            const target = gateway.fabricIp;
            const source = built.find((spark) => spark.nodeName === head.name)!;
            steps.set(image.name, { step, delivery: { image: image.name, copyFrom: source, wantIdentity: observedIdentity(service), sourceIp: head.fabric.ip, targetIp: target } });
        }
    }
    return [...steps.values()];
}

/**
 * The warnings for images named by a tag alone, once an image: what the first node of its first
 * service has (its registry digest, else its content identity), so that the stack can pin it.
 */
export function unpinnedImageWarnings(services: readonly ServicePlan[], firstObservation: (index: number) => NodeObservation): string[] {
    const warned = new Set<string>();
    const warnings: string[] = [];
    for (const [index, service] of services.entries()) {
        const first = firstObservation(index);
        const image = { name: service.config.image.name, key: `vllm-fleet:${service.service.keyPrefix}image.name` };
        const warning = warned.has(image.name) ? undefined : unpinnedImageWarning(image, { name: first.node, facts: first.facts });
        warned.add(image.name);
        if (warning) {
            warnings.push(warning);
        }
    }
    return warnings;
}
