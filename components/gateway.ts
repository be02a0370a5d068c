/**
 * The gateway: one endpoint for every service of the stack, on the node gateway.node names.
 * vllm-router (the vLLM project's router) in its inference-gateway mode routes each request by its
 * `model` to the service that serves it, on the node's loopback only; HAProxy in front of it on
 * gateway.port is the door clients use: the stack's key on every request, the OpenAI routes only,
 * no foreign web origin (infra/core/plan/gateway.ts gatewayProxyConfig). The launcher
 * (scripts/gateway.py) starts both and keeps the routes registered, as a step of the stack gives them
 * to it (scripts/gateway-routes.sh). Ready when every model answers a completion through it.
 */
import * as pulumi from "@pulumi/pulumi";
import { GatewayPlan, withKeyDigest } from "../infra/core/plan";
import { realizeContainer } from "./container";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

export interface GatewayArgs {
    /** The node the gateway runs on. */
    readonly node: NodeAccess;
    /** The gateway as planned: its container, routes and readiness gate. */
    readonly plan: GatewayPlan;
    /**
     * The stack's API key (a secret), checked by the gateway's proxy (as its SHA-256: the container
     * holds no key) and again by every service; none: both are open.
     */
    readonly apiKey?: pulumi.Input<string>;
    /**
     * What must serve before the gateway starts: every service (their readiness gates), and the
     * delivery of its image. Only ordering: a service replaced for another reason leaves the
     * gateway's container as it is (its routes did not change).
     */
    readonly after: readonly pulumi.Resource[];
    readonly runner: CommandRunner;
    readonly containerDriver: "docker" | "ssh";
}

/** What the gateway puts out (the stack output `gateway`). */
export interface GatewayOutputs {
    readonly node: string;
    readonly endpoint: string;
    /** Each model to the service that serves it and that service's API as the gateway reaches it. */
    readonly routes: Record<string, { service: string; url: string }>;
}

export class Gateway extends pulumi.ComponentResource {
    /** The OpenAI-compatible endpoint clients use, e.g. http://10.1.230.183:4000/v1. */
    public readonly endpoint: pulumi.Output<string>;
    /** Each model to the API of the service that serves it (`http://<fabric ip>:<port>`). */
    public readonly routes: pulumi.Output<Record<string, string>>;
    /** Each model's completion through the gateway, as the readiness gate got it (JSON). */
    public readonly completions: pulumi.Output<Record<string, string>>;
    /** Its node, endpoint and routes, known once it answered each model. */
    public readonly outputs: pulumi.Output<GatewayOutputs>;

    constructor(name: string, args: GatewayArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:gateway:Gateway", name, {}, opts);
        const { plan, node } = args;
        const apiKey = pulumi.output(args.apiKey ?? "");
        // The proxy compares each request's key with the key's SHA-256: the container holds no key.
        const spec = apiKey.apply((key) => (plan.keyed && key ? withKeyDigest(plan.spec, key) : plan.spec));
        const container = realizeContainer(args.containerDriver, args.runner, `${name}-container`, node, spec, { parent: this, dependsOn: [...args.after] });
        // The routes, given to the running router: a new route set is applied in place (the
        // container stays); a new container gets them again.
        const routes = hostCommand(
            args.runner,
            `${name}-routes`,
            {
                connection: node.connection,
                create: scriptProgram(["step-answer", "gateway-routes"], {
                    CONTAINER: plan.routesStep.container,
                    PORT: plan.routesStep.port,
                    ROUTES_FILE: plan.routesStep.file,
                    ROUTES_JSON: plan.routesStep.json,
                    TIMEOUT: plan.routesStep.timeoutSeconds,
                }),
                triggers: [container.revision],
            },
            { parent: this, dependsOn: [container.resource] },
        );
        const ready = hostCommand(
            args.runner,
            `${name}-ready`,
            {
                connection: node.connection,
                create: apiKey.apply((key) =>
                    scriptProgram(["step-answer", "gateway-ready"], {
                        CONTAINER: plan.ready.container,
                        PORT: plan.ready.port,
                        MODELS: [...plan.ready.models],
                        TIMEOUT: plan.ready.timeoutSeconds,
                        API_KEY: key,
                    }),
                ),
                // A new container is a new router: its routes are checked again, as are new routes.
                triggers: [container.revision, routes.stdout],
            },
            { parent: this, dependsOn: [routes.resource] },
        );
        if (plan.watchdog) {
            // Started once the gateway serves (it must not race the first registration).
            realizeContainer(args.containerDriver, args.runner, `${name}-watchdog`, node, pulumi.output(plan.watchdog), { parent: this, dependsOn: [ready.resource] }, { watchSeconds: 0 });
        }
        this.endpoint = pulumi.output(plan.endpoint);
        this.routes = pulumi.output(Object.fromEntries(plan.routes.map((route) => [route.model, route.url])));
        this.completions = ready.stdout.apply((stdout) =>
            Object.fromEntries(
                stdout
                    .split("\n")
                    .filter((line) => line.startsWith("route "))
                    .map((line) => {
                        const [, model, ...rest] = line.split(" ");
                        return [model, rest.join(" ")];
                    }),
            ),
        );
        this.outputs = pulumi.all([this.endpoint, this.completions]).apply(([endpoint]) => ({
            node: plan.node,
            endpoint,
            routes: Object.fromEntries(plan.routes.map((route) => [route.model, { service: route.service, url: route.url }])),
        }));
        this.registerOutputs({ endpoint: this.endpoint, routes: this.routes, completions: this.completions });
    }
}
