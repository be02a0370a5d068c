import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/config";
import { RAY_CONTAINER, vllmServeArgs } from "../infra/plan";
import { hostCommand } from "./hostCommand";
import { RayCluster } from "./rayCluster";
import { SparkNode } from "./sparkNode";
import { bashCommand, scriptProgram } from "./shell";

export interface VllmServiceArgs {
    readonly config: FleetConfig;
    /** The node that runs the Ray head (and so `vllm serve`). */
    readonly head: SparkNode;
    readonly ray: RayCluster;
    /** vLLM's API key (a secret); none: the endpoint is open. */
    readonly apiKey?: pulumi.Input<string>;
}

/**
 * `vllm serve` with the Ray backend in the head container. Ready when /v1/models lists the model
 * and a completion answers. Changing only vLLM settings restarts only this service: the Ray
 * containers stay as they are.
 */
export class VllmService extends pulumi.ComponentResource {
    /** The OpenAI-compatible endpoint, e.g. http://10.1.230.180:30000/v1. */
    public readonly endpoint: pulumi.Output<string>;
    /** The id clients send as `model`. */
    public readonly modelId: pulumi.Output<string>;
    /** The answer of the smoke completion the readiness gate ran (JSON). */
    public readonly completion: pulumi.Output<string>;

    constructor(name: string, args: VllmServiceArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:vllm:VllmService", name, {}, opts);
        const { config } = args;
        const start = pulumi.output(args.apiKey ?? "").apply((apiKey) =>
            bashCommand(
                scriptProgram("vllm-start", {
                    CONTAINER: RAY_CONTAINER,
                    SERVE_ARGS: vllmServeArgs(config),
                    PORT: config.vllm.port,
                    SERVED_NAME: config.model.servedName,
                    TIMEOUT: config.timeouts.vllmReadySeconds,
                    API_KEY: apiKey,
                }),
            ),
        );
        const serve = hostCommand(
            config.commandRunner,
            `${name}-serve`,
            {
                connection: args.head.connection,
                create: start,
                update: start,
                delete: bashCommand(scriptProgram("vllm-stop", { CONTAINER: RAY_CONTAINER })),
                // A rebuilt Ray cluster needs a new server; a changed vLLM setting only a restart.
                triggers: [args.ray.revision],
            },
            { parent: this, dependsOn: [args.ray] },
        );
        const host = args.head.connection.host.includes(":") ? `[${args.head.connection.host}]` : args.head.connection.host;
        this.endpoint = pulumi.output(`http://${host}:${config.vllm.port}/v1`);
        this.modelId = pulumi.output(config.model.servedName);
        this.completion = serve.stdout.apply((stdout) => {
            const line = stdout.split("\n").find((text) => text.startsWith("completion "));
            return line ? line.slice("completion ".length) : "";
        });
        this.registerOutputs({ endpoint: this.endpoint, modelId: this.modelId, completion: this.completion });
    }
}
