/**
 * What each node gets delivered before anything runs there (image.source pull or copy): the images of
 * the services placed on it, the gateway's, and the monitoring's. Part of the composition root (it takes the built nodes).
 */
import { ImageDelivery, ImageSource, SparkNode } from "../components/sparkNode";
import { FleetConfig } from "./core/config";
import { parseImageName, unpinnedImageWarning } from "./core/image";
import { deliveryMark, serviceResourceName } from "./core/names";
import { DeliveryWant, NodeObservation, deliveryRevision } from "./core/observe";
import { GatewayPlan, MonitoringPlan, ServicePlan } from "./core/plan";

/** How a delivery step's revision is found: the stack (its marks), the node's read, a new revision. */
export interface DeliveryRead {
    readonly stack: string;
    /** The node as the read at the start of this run found it (its delivery marks). */
    readonly observation: Pick<NodeObservation, "node" | "delivered">;
    readonly fresh: () => string;
}

/** One delivery step: its name, what it delivers, and why it runs again when it does (for preview). */
export interface DeliveryStep {
    readonly step: string;
    readonly delivery: ImageDelivery;
    readonly finding?: string;
}

/**
 * The images each node gets delivered (image.source pull or copy), one step per image and node,
 * named after the first service that uses it there; a copy comes from that service's first node.
 * Each step's revision keeps it while the node has the image, and delivers it again once it is gone
 * (infra/core/observe.ts deliveryRevision).
 */
export function imageDeliveries(
    services: readonly ServicePlan[],
    observedIdentity: (service: ServicePlan) => string | undefined,
    node: string,
    built: readonly SparkNode[],
    gateway: GatewayPlan | undefined,
    read: DeliveryRead,
    monitoring?: MonitoringPlan,
): DeliveryStep[] {
    const steps = new Map<string, DeliveryStep>();
    // A step with its mark and revision, and the finding that says why it runs again.
    const add = (step: string, want: DeliveryWant, source: ImageSource) => {
        const { revision, finding } = deliveryRevision(read.observation, want, read.fresh);
        steps.set(want.image, { step, delivery: { ...source, mark: deliveryMark(read.stack, want.image), revision }, ...(finding ? { finding } : {}) });
    };
    for (const service of services) {
        const { image } = service.config;
        const index = service.nodes.findIndex((planned) => planned.name === node);
        if (index < 0 || steps.has(image.name) || image.source === "present") {
            continue;
        }
        const step = `${node}-${serviceResourceName(service.name, "image")}`;
        if (image.source === "pull") {
            add(step, { image: image.name, pull: true }, { image: image.name, pull: true, key: `vllm-fleet:${service.service.keyPrefix}image.name` });
        } else if (index > 0) {
            const copy = service.copies[index - 1];
            const source = built.find((spark) => spark.nodeName === copy.source)!;
            const wantIdentity = observedIdentity(service);
            add(
                step,
                { image: image.name, copyFrom: copy.source, identity: wantIdentity },
                { image: image.name, copyFrom: source, wantIdentity, sourceIp: copy.sourceIp, targetIp: copy.targetIp },
            );
        }
    }
    // The gateway's image on its node, unless a service there brings it: pulled, or copied from the
    // first node of a service of the same image (config/gateway.ts requires one for copy).
    const image = gateway?.image;
    if (gateway && image && gateway.node === node && image.source !== "present" && !steps.has(image.name)) {
        const servedHere = services.some((service) => service.config.image.name === image.name && service.nodes.some((planned) => planned.name === node));
        const step = `${node}-gateway-image`;
        if (image.source === "pull") {
            add(step, { image: image.name, pull: true }, { image: image.name, pull: true, key: "vllm-fleet:gateway.image.name" });
        } else if (!servedHere) {
            const service = services.find((candidate) => candidate.config.image.name === image.name)!;
            const head = service.nodes[0];
            const source = built.find((spark) => spark.nodeName === head.name)!;
            const wantIdentity = observedIdentity(service);
            add(
                step,
                { image: image.name, copyFrom: head.name, identity: wantIdentity },
                { image: image.name, copyFrom: source, wantIdentity, sourceIp: head.fabric.ip, targetIp: gateway.fabricIp },
            );
        }
    }
    // The monitoring's images, pulled where they run: Prometheus's and Grafana's on its node, the exporters' on every node.
    if (monitoring) {
        const pulls = [
            ...(monitoring.node === node ? [{ image: monitoring.image, step: `${node}-prometheus-image`, key: "vllm-fleet:monitoring.image.name" }] : []),
            ...(monitoring.node === node && monitoring.grafana ? [{ image: monitoring.grafana.image, step: `${node}-grafana-image`, key: "vllm-fleet:monitoring.grafana.image.name" }] : []),
            { image: monitoring.exporterImage, step: `${node}-node-exporter-image`, key: "vllm-fleet:monitoring.nodeExporter.image.name" },
            ...(monitoring.gpuExporterImage ? [{ image: monitoring.gpuExporterImage, step: `${node}-gpu-exporter-image`, key: "vllm-fleet:monitoring.gpuExporter.image.name" }] : []),
        ];
        for (const pull of pulls) {
            if (pull.image.source === "pull" && !steps.has(pull.image.name)) {
                add(pull.step, { image: pull.image.name, pull: true }, { image: pull.image.name, pull: true, key: pull.key });
            }
        }
    }
    return [...steps.values()];
}

/**
 * The warnings for the monitoring's images named by a tag alone (the defaults are pinned, but for the
 * GPU exporter's): each names its key and how to find the digest on a node that pulled it.
 */
export function unpinnedMonitoringImageWarnings(monitoring: FleetConfig["monitoring"]): string[] {
    if (!monitoring) {
        return [];
    }
    const images = [
        { key: "monitoring.image.name", image: monitoring.image },
        { key: "monitoring.nodeExporter.image.name", image: monitoring.nodeExporter.image },
        ...(monitoring.grafana ? [{ key: "monitoring.grafana.image.name", image: monitoring.grafana.image }] : []),
        ...(monitoring.gpuExporter ? [{ key: "monitoring.gpuExporter.image.name", image: monitoring.gpuExporter.image }] : []),
    ];
    return images
        .filter(({ image }) => parseImageName(image.name).digest === undefined)
        .map(
            ({ key, image }) =>
                `vllm-fleet:${key} ${image.name} is a tag, which can move to another build: pin it by digest (${parseImageName(image.name).repository}@sha256:...; ` +
                `\`docker image inspect --format '{{index .RepoDigests 0}}' ${image.name}\` on a node that has it prints it)`,
        );
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
