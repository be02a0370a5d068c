/**
 * What a stack puts out (`pulumi stack output`): each service's endpoint, model and how its ranks
 * talk, the gateway's and the monitoring's. Part of the composition root.
 */
import * as pulumi from "@pulumi/pulumi";
import { GatewayOutputs } from "../components/gateway";
import { MonitoringOutputs } from "../components/monitoring";

/** What a service puts out: where it serves, what, and how its ranks talk. */
export interface ServiceOutputs {
    readonly endpoint: string;
    readonly model: string;
    readonly nodes: string[];
    readonly executor: "ray" | "mp";
    /** The image and the vLLM and Ray versions its argument check found in it (`ray`: "none" without Ray). */
    readonly image: { name: string; vllm: string; ray: string };
    /** Per node, the transport NCCL chose over the fabric (`IB`: RoCE, `Socket`: TCP). */
    readonly fabricTransport: Record<string, string>;
    readonly completion: string;
    readonly rayHead: string;
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
}

/**
 * The outputs of a stack: every service under `services`, and, at the top, the first service's (the
 * single-model form's outputs as they always were).
 */
export interface FleetOutputs {
    readonly endpoint: pulumi.Output<string>;
    readonly model: pulumi.Output<string>;
    readonly nodes: string[];
    readonly fabricIps: pulumi.Output<Record<string, string>>;
    readonly rayHead: pulumi.Output<string>;
    readonly rayStatus: pulumi.Output<string>;
    readonly completion: pulumi.Output<string>;
    readonly image: pulumi.Output<{ name: string; vllm: string; ray: string }>;
    readonly fabricTransport: pulumi.Output<Record<string, string>>;
    /** The API key clients send (`Authorization: Bearer`), a secret; "" with vllm.apiKey none. */
    readonly apiKey: pulumi.Output<string>;
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
    /** Each service by name. */
    readonly services: pulumi.Output<Record<string, ServiceOutputs>>;
    /** The gateway's endpoint (config `gateway`): every service's models at one address; "" without one. */
    readonly gatewayEndpoint: pulumi.Output<string>;
    /** The gateway: its node, endpoint and routes (model -> the service's API); absent without one. */
    readonly gateway?: pulumi.Output<GatewayOutputs>;
    /** Prometheus: its node, endpoint and the targets it scrapes; absent without monitoring. */
    readonly monitoring?: pulumi.Output<MonitoringOutputs>;
}
