import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/core/config";
import { Reconciliation } from "../infra/core/observe";
import {
    NODE_LOCAL_ENV,
    PlannedNode,
    RAY_CONTAINER,
    RAY_HEAD_VLLM_CONFIG_ROOT,
    RAY_SERVE_ARGS_FILE,
    RAY_SERVE_LOG,
    SERVING_CONTAINERS,
    VLLM_CONTAINER,
    apiBindAddress,
    apiProbeAddress,
    mpRankSpec,
    transportHint,
    transportPolicy,
    vllmServeArgs,
    watchdogSpec,
} from "../infra/core/plan";
import { realizeContainer, servingContainerName } from "./container";
import { hostCommand } from "./hostCommand";
import { RayCluster } from "./rayCluster";
import { SparkNode } from "./sparkNode";
import { readScript, scriptProgram } from "./shell";

/** The programs that start and stop `vllm serve` in the Ray head (vllm-start.sh, vllm-stop.sh), with what they use. */
export const VLLM_START = ["docker-state", "vllm-stop", "vllm-start"];
export const VLLM_STOP = ["docker-state", "vllm-stop"];
/** The fabric check (nccl-transport.sh), with what it uses. */
export const NCCL_TRANSPORT = ["docker-state", "nccl-transport"];

export interface VllmServiceArgs {
    readonly config: FleetConfig;
    /** The stack name, put on the containers as a label. */
    readonly stack: string;
    /** Every node; the first one serves the API. */
    readonly nodes: readonly SparkNode[];
    /** The nodes as planned (after preflight), see planFleet. */
    readonly planned: pulumi.Output<PlannedNode[]>;
    /** The Ray cluster to serve on (`ray` executor); absent with `mp`. */
    readonly ray?: RayCluster;
    /** vLLM's API key (a secret); none: the endpoint is open. */
    readonly apiKey?: pulumi.Input<string>;
    /** What this run's read of the hosts decided (infra/core/observe.ts). */
    readonly reconciliation: Pick<Reconciliation, "revisions" | "serveToken" | "watchdogRevision">;
    /** What must be done before vLLM starts (the check of the serve arguments). */
    readonly after?: readonly pulumi.Resource[];
}

/**
 * `vllm serve` across the nodes, ready when /v1/models lists the model and a completion answers.
 *
 * - `ray` executor: one `vllm serve` in the Ray head container; changing only vLLM settings restarts
 *   only it, the Ray containers stay as they are.
 * - `mp` executor (vLLM's native multi-node): a container per node, rank 0 on the first node serving
 *   the API, headless ranks on the others, rendezvousing over the fabric.
 */
export class VllmService extends pulumi.ComponentResource {
    /** The OpenAI-compatible endpoint, e.g. http://10.1.230.180:30000/v1. */
    public readonly endpoint: pulumi.Output<string>;
    /** The id clients send as `model`. */
    public readonly modelId: pulumi.Output<string>;
    /** The answer of the smoke completion the readiness gate ran (JSON). */
    public readonly completion: pulumi.Output<string>;
    /** Per node, the transport its NCCL chose over the fabric: `IB` (RoCE), `Socket` (TCP) or `unknown`. */
    public readonly fabricTransport: pulumi.Output<Record<string, string>>;

    constructor(name: string, args: VllmServiceArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:vllm:VllmService", name, {}, opts);
        const { config } = args;
        const head = args.nodes[0];
        const apiKey = pulumi.output(args.apiKey ?? "");
        const ready = (container: string, logFile: string) =>
            pulumi.all([apiKey, args.planned]).apply(([key, planned]) =>
                scriptProgram("vllm-ready", {
                    CONTAINER: container,
                    HOST: apiProbeAddress(config, planned[0]),
                    PORT: config.vllm.port,
                    SERVED_NAME: config.model.servedName,
                    TIMEOUT: config.timeouts.vllmReadySeconds,
                    API_KEY: key,
                    LOG_FILE: logFile,
                }),
            );

        let gateStdout: pulumi.Output<string>;
        let served: pulumi.Resource;
        if (config.executor === "ray") {
            if (!args.ray) {
                throw new Error("the ray executor needs a Ray cluster");
            }
            const start = pulumi.all([apiKey, args.planned, ready(RAY_CONTAINER, RAY_SERVE_LOG)]).apply(([key, planned, waitProgram]) => {
                const serveArgs = vllmServeArgs(config, apiBindAddress(config, planned[0]));
                return [
                    scriptProgram(VLLM_START, {
                        CONTAINER: RAY_CONTAINER,
                        SERVE_ARGS: serveArgs,
                        SERVE_ARGS_JSON: JSON.stringify(serveArgs),
                        ARGS_FILE: RAY_SERVE_ARGS_FILE,
                        API_KEY: key,
                        LOG_FILE: RAY_SERVE_LOG,
                        // A new token (vllm serve found dead, or the endpoint not answering) changes
                        // this program, so the next up starts vllm serve again (infra/core/observe.ts).
                        TOKEN: args.reconciliation.serveToken,
                        CONFIG_ROOT: RAY_HEAD_VLLM_CONFIG_ROOT,
                        NON_CARRY_OVER: JSON.stringify(NODE_LOCAL_ENV),
                    }),
                    waitProgram,
                ].join("\n");
            });
            const serve = hostCommand(
                config.commandRunner,
                `${name}-serve`,
                {
                    connection: head.connection,
                    create: start,
                    update: start,
                    delete: `${scriptProgram(VLLM_STOP, { CONTAINER: RAY_CONTAINER })}\nstop_vllm_serve "$CONTAINER"`,
                    // A rebuilt Ray cluster needs a new server; a changed vLLM setting only a restart.
                    triggers: [args.ray.revision],
                },
                { parent: this, dependsOn: [args.ray] },
            );
            gateStdout = serve.stdout;
            served = serve.resource;
        } else {
            const revisions: pulumi.Output<string>[] = [];
            const containers: pulumi.Resource[] = [];
            args.nodes.forEach((node, index) => {
                const spec = pulumi.all([args.planned, apiKey]).apply(([planned, key]) => {
                    const rank = mpRankSpec(config, args.stack, planned, index, args.reconciliation.revisions[node.nodeName]);
                    return key ? { ...rank, env: { ...rank.env, VLLM_API_KEY: key } } : rank;
                });
                const container = realizeContainer(
                    config.containerDriver,
                    config.commandRunner,
                    servingContainerName("mp", node.nodeName, index),
                    node,
                    spec,
                    { parent: this, dependsOn: [...(args.after ?? [])] },
                    // Nothing else watches a headless rank on its node: it must stay up a moment.
                    { removeFirst: SERVING_CONTAINERS, watchSeconds: 2 },
                );
                revisions.push(container.revision);
                containers.push(container.resource);
            });
            const gate = hostCommand(
                config.commandRunner,
                `${name}-ready`,
                {
                    connection: head.connection,
                    create: ready(VLLM_CONTAINER, ""),
                    triggers: revisions,
                },
                { parent: this, dependsOn: containers },
            );
            gateStdout = gate.stdout;
            served = gate.resource;
        }

        // The fabric check: which transport each node's rank chose, once vLLM serves; it runs again
        // whenever the gate does (its output, a fresh completion, changes then).
        const transports = args.nodes.map((node, index) => {
            const check = hostCommand(
                config.commandRunner,
                `${name}-fabric-${node.nodeName}`,
                {
                    connection: node.connection,
                    create: args.planned.apply((planned) =>
                        scriptProgram(NCCL_TRANSPORT, {
                            NODE: node.nodeName,
                            CONTAINER: config.executor === "ray" ? RAY_CONTAINER : VLLM_CONTAINER,
                            EXECUTOR: config.executor,
                            POLICY: transportPolicy(config, planned[index]),
                            HINT: transportHint(config, planned[index]),
                        }),
                    ),
                    triggers: [gateStdout],
                },
                { parent: this, dependsOn: [served] },
            );
            return check.stdout.apply((stdout) => {
                const transport = /^transport (\S+)/m.exec(stdout)?.[1] ?? "unknown";
                if (transport === "Socket") {
                    pulumi.log.warn(`node ${node.nodeName}: NCCL uses TCP sockets (NET/Socket) over the fabric, not RoCE; tensor-parallel traffic is much slower`, this);
                } else if (transport === "unknown") {
                    // The check says why it could not read the lines (`unread <why>`), else there were none.
                    const unread = /^unread (.+)$/m.exec(stdout)?.[1];
                    pulumi.log.warn(
                        unread
                            ? `node ${node.nodeName}: NCCL's start-up lines could not be read, the fabric transport is unknown: ${unread}`
                            : `node ${node.nodeName}: no NCCL start-up line found, the fabric transport is unknown (is NCCL_DEBUG overridden?)`,
                        this,
                    );
                }
                return [node.nodeName, transport] as const;
            });
        });
        this.fabricTransport = pulumi.all(transports).apply((pairs) => Object.fromEntries(pairs));

        if (config.supervision.watchdog) {
            // Started once vLLM serves (it must not race the first start). A restart of vLLM pauses
            // it (vllm-start.sh: it would start a server of its own in the gap); it takes the serve
            // arguments from the Ray head at each start of its own, so a change of them alone
            // leaves it running.
            const spec = pulumi.all([apiKey, args.planned]).apply(([key, planned]) => {
                const watchdog = watchdogSpec(config, args.stack, readScript("watchdog.py"), args.reconciliation.watchdogRevision, planned[0]);
                return key ? { ...watchdog, env: { ...watchdog.env, VLLM_API_KEY: key } } : watchdog;
            });
            realizeContainer(config.containerDriver, config.commandRunner, `${name}-watchdog`, head, spec, { parent: this, dependsOn: [served] }, { watchSeconds: 0 });
        }

        // With vllm.host fabric the API answers on the first node's fabric address only.
        const hostOf = (address: string) => (address.includes(":") ? `[${address}]` : address);
        this.endpoint =
            config.vllm.host === "fabric"
                ? args.planned.apply((planned) => `http://${planned[0].fabric.ip}:${config.vllm.port}/v1`)
                : pulumi.output(`http://${hostOf(head.connection.host)}:${config.vllm.port}/v1`);
        this.modelId = pulumi.output(config.model.servedName);
        this.completion = gateStdout.apply((stdout) => {
            const line = stdout.split("\n").find((text) => text.startsWith("completion "));
            return line ? line.slice("completion ".length) : "";
        });
        this.registerOutputs({ endpoint: this.endpoint, modelId: this.modelId, completion: this.completion, fabricTransport: this.fabricTransport });
    }
}
