/**
 * What things are called on the nodes and where they listen: the containers of a service, the
 * labels that say which stack made a container, the files vllm-fleet keeps inside the Ray head, and
 * the ports of the copies between nodes, the marks image deliveries leave. Pure.
 */
import * as crypto from "crypto";

/** The service of a stack written in the single-model form (today's keys: one model on every node). */
export const DEFAULT_SERVICE = "vllm";

/** The containers one service runs on its nodes. */
export interface ServiceContainers {
    /** Ray (and, on the head, `vllm serve`) on every node, with the `ray` executor. */
    readonly ray: string;
    /** One node's vLLM ranks, with the `mp` executor. */
    readonly vllm: string;
    /** The watchdog on the service's first node. */
    readonly watchdog: string;
}

/**
 * The containers of `service` on a node. The single-model form keeps the names it always had
 * (`vllm-fleet-ray`, `vllm-fleet-vllm`, `vllm-fleet-watchdog`), so that upgrading replaces nothing.
 */
export function serviceContainers(service: string): ServiceContainers {
    const prefix = service === DEFAULT_SERVICE ? "vllm-fleet" : `vllm-fleet-${service}`;
    return { ray: `${prefix}-ray`, vllm: `${prefix}-vllm`, watchdog: `${prefix}-watchdog` };
}

/** The single-model form's containers (what the tests and tools of that form look for). */
export const DEFAULT_CONTAINERS = serviceContainers(DEFAULT_SERVICE);
export const RAY_CONTAINER = DEFAULT_CONTAINERS.ray;
export const VLLM_CONTAINER = DEFAULT_CONTAINERS.vllm;
export const WATCHDOG_CONTAINER = DEFAULT_CONTAINERS.watchdog;

/** The serving container of each executor. */
export function servingContainer(containers: ServiceContainers, executor: "ray" | "mp"): string {
    return executor === "ray" ? containers.ray : containers.vllm;
}

/**
 * The gateway's container (one per stack, on the node gateway.node names): named after the stack,
 * so that two stacks' gateways never share a name.
 */
export function gatewayContainer(stack: string): string {
    return `vllm-fleet-gateway-${stack.replace(/[^A-Za-z0-9_.-]/g, "-")}`;
}

/** The monitoring's containers (Prometheus and Grafana on one node, the exporters on each), named after the stack like the gateway's. */
export function monitoringContainers(stack: string): { prometheus: string; exporter: string; gpuExporter: string; grafana: string } {
    const safe = stack.replace(/[^A-Za-z0-9_.-]/g, "-");
    return { prometheus: `vllm-fleet-prometheus-${safe}`, exporter: `vllm-fleet-node-exporter-${safe}`, gpuExporter: `vllm-fleet-gpu-exporter-${safe}`, grafana: `vllm-fleet-grafana-${safe}` };
}

/** Label on every container vllm-fleet starts: the stack that made it (nothing else touches it). */
export const STACK_LABEL = "vllm-fleet.stack";
/**
 * Label on every container of a named service (the `services` form): the service it belongs to.
 * The single-model form's containers carry none, so that upgrading replaces nothing.
 */
export const SERVICE_LABEL = "vllm-fleet.service";
/** Label on every container vllm-fleet starts: what it is for (`ray-head`, `vllm-rank0`, `watchdog`, ...). */
export const ROLE_LABEL = "vllm-fleet.role";
/** Label on every serving container: its revision (see observe.ts). */
export const REVISION_LABEL = "vllm-fleet.revision";
/** Label on each Ray worker: the id of the head container it joined. */
export const RAY_HEAD_LABEL = "vllm-fleet.ray-head";
/** Label on each headless vLLM rank (mp executor): the id of the rank 0 container it joined. */
export const RANK0_LABEL = "vllm-fleet.rank0";

/** Labels on everything vllm-fleet starts, so it can be found (and proven gone) later. */
export function fleetLabels(stack: string, role: string, service: string = DEFAULT_SERVICE): Record<string, string> {
    return { [STACK_LABEL]: stack, [ROLE_LABEL]: role, ...(service === DEFAULT_SERVICE ? {} : { [SERVICE_LABEL]: service }) };
}

/**
 * The name of a component (or a step) of `service`: `base` itself for the single-model form, so
 * that its resources keep the names they always had, else prefixed by the service.
 */
export function serviceResourceName(service: string, base: string): string {
    return service === DEFAULT_SERVICE ? base : `${service}-${base}`;
}

/** VLLM_CONFIG_ROOT in the Ray head container: where the start (vllm-lifecycle.sh) writes the non-carry-over list. */
export const RAY_HEAD_VLLM_CONFIG_ROOT = "/etc/vllm-fleet/vllm";
/** Where `vllm serve` writes its log inside the Ray head container (ray executor). */
export const RAY_SERVE_LOG = "/tmp/vllm-fleet-serve.log";
/** Where the start (vllm-lifecycle.sh) keeps the arguments of `vllm` in the Ray head container, for the watchdog's restart. */
export const RAY_SERVE_ARGS_FILE = "/tmp/vllm-fleet-serve.args";

/** The port of the short-lived rsync daemon on a node receiving the weights (fabric address only). */
export const RSYNC_PORT = 28730;
/** The port of the short-lived image receiver on a node that gets the image (fabric address only). */
export const IMAGE_COPY_PORT = 28731;
/** The port of the short-lived bulk receiver on a node receiving the weights (fabric address only). */
export const WEIGHT_FILES_PORT = 28732;

/**
 * Where a stack's image deliveries leave their marks on a node (components/scripts/image-mark.sh),
 * relative to the SSH user's home: one file an image, named by the image, holding the revision of
 * the step that delivered it. Under the home, not a tmpfs: a reboot keeps images, and their marks.
 */
export function deliveryMarkDir(stack: string): string {
    return `.cache/vllm-fleet/images-delivered/${crypto.createHash("sha256").update(stack).digest("hex").slice(0, 12)}`;
}

/** The mark of one image's delivery by `stack` on a node (relative to the SSH user's home). */
export function deliveryMark(stack: string, image: string): string {
    return `${deliveryMarkDir(stack)}/${crypto.createHash("sha256").update(image).digest("hex").slice(0, 16)}`;
}
