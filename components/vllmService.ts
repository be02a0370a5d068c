/**
 * `vllm serve` across a service's nodes, ready when /v1/models lists the model and a completion
 * answers; then each node's NCCL transport read, and the watchdog started.
 *
 * - `ray` executor: one `vllm serve` in the Ray head container; changing only vLLM settings restarts
 *   only it, the Ray containers stay as they are.
 * - `mp` executor (vLLM's native multi-node): a container per node, rank 0 on the first node serving
 *   the API, headless ranks on the others, rendezvousing over the fabric.
 */
import * as pulumi from "@pulumi/pulumi";
import { VllmPlan, joinedToRank0, withEnv } from "../infra/core/plan";
import { PHASE_POLL_SECONDS, PHASE_REPEAT_SECONDS, VLLM_PHASES } from "../infra/core/vllmPhases";
import { ServingCache, withServingCache } from "./compileCache";
import { ServingKeyCheck, realizeContainer, withServingKeyCheck } from "./container";
import { ComponentError } from "./errors";
import { CommandRunner, hostCommand } from "./hostCommand";
import { RayCluster } from "./rayCluster";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

/**
 * The start and the stop of `vllm serve` in the Ray head (vllm-start.sh, vllm-stop.sh), with what they
 * use; both run the lifecycle (vllm-lifecycle.sh, given as LIFECYCLE: the plan's `serve.lifecycle`)
 * inside the head, as the watchdog does.
 */
export const VLLM_START = ["docker-state", "vllm-start"];
export const VLLM_STOP = ["docker-state", "vllm-stop"];
/** The lifecycle of `vllm serve` inside the Ray head: its stop, start and restart (vllm-lifecycle.sh). */
export const VLLM_LIFECYCLE = "vllm-lifecycle";
/** The readiness gate (vllm-ready.sh), with the phases of vLLM's start it reports while it waits (vllm-phases.sh). */
export const VLLM_READY = ["vllm-phases", "vllm-ready"];
/** The check of a node's NCCL transport (nccl-transport.sh), with what it uses. */
export const NCCL_TRANSPORT = ["docker-state", "nccl-transport"];

export interface VllmServiceArgs {
    /** The service's nodes, in the plan's order; the first one serves the API. */
    readonly nodes: readonly NodeAccess[];
    /** vLLM as planned: how it starts, where it answers, what the checks look for. */
    readonly plan: VllmPlan;
    /** Resolves once the nodes passed preflight: nothing starts before. */
    readonly gate: pulumi.Input<unknown>;
    /** The Ray cluster to serve on (`ray` executor); absent with `mp`. */
    readonly ray?: RayCluster;
    /** vLLM's API key (a secret); none: the endpoint is open. */
    readonly apiKey?: pulumi.Input<string>;
    readonly runner: CommandRunner;
    readonly containerDriver: "docker" | "ssh";
    /** What must be done before vLLM starts (the check of the serve arguments, the firewall). */
    readonly after?: readonly pulumi.Resource[];
    /** The compile caches the mp ranks mount (config `cache`; the Ray containers get theirs from RayCluster). */
    readonly cache?: ServingCache;
    /** The key check of every route, carried by rank 0, which runs the API server (mp, with an API key). */
    readonly keyCheck?: ServingKeyCheck;
}

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
        const { plan, nodes } = args;
        const head = nodes[0];
        // The API key once the nodes passed preflight: every program and spec below waits for it.
        const apiKey = pulumi.all([args.gate, args.apiKey ?? ""]).apply(([, key]) => key);
        const ready = apiKey.apply((key) =>
            scriptProgram(VLLM_READY, {
                CONTAINER: plan.ready.container,
                HOST: plan.ready.host,
                PORT: plan.ready.port,
                SERVED_NAME: plan.ready.servedName,
                TIMEOUT: plan.ready.timeoutSeconds,
                API_KEY: key,
                LOG_FILE: plan.ready.logFile,
                PROGRESS_SECONDS: PHASE_POLL_SECONDS,
                STILL_SECONDS: PHASE_REPEAT_SECONDS,
                PHASE_PATTERNS: VLLM_PHASES.map((phase) => phase.pattern),
                PHASE_TEXTS: VLLM_PHASES.map((phase) => phase.text),
            }),
        );

        let gateStdout: pulumi.Output<string>;
        let served: pulumi.Resource;
        if (plan.serve) {
            const serve = plan.serve;
            if (!args.ray) {
                throw new ComponentError("the ray executor needs a Ray cluster", this);
            }
            const start = pulumi.all([apiKey, ready]).apply(([key, waitProgram]) =>
                [
                    scriptProgram(VLLM_START, {
                        CONTAINER: serve.container,
                        SERVE_ARGS: [...serve.args],
                        SERVE_ARGS_JSON: JSON.stringify(serve.args),
                        ARGS_FILE: serve.argsFile,
                        API_KEY: key,
                        LOG_FILE: serve.logFile,
                        // A new token (vllm serve found dead, or the endpoint not answering) changes
                        // this program, so the next up starts vllm serve again (infra/core/reconcile.ts).
                        TOKEN: serve.token,
                        CONFIG_ROOT: serve.configRoot,
                        NON_CARRY_OVER: JSON.stringify(serve.nonCarryOver),
                        LIFECYCLE: serve.lifecycle,
                    }),
                    waitProgram,
                ].join("\n"),
            );
            const command = hostCommand(
                args.runner,
                `${name}-serve`,
                {
                    connection: head.connection,
                    create: start,
                    update: start,
                    delete: `${scriptProgram(VLLM_STOP, { CONTAINER: serve.container, LIFECYCLE: serve.lifecycle })}\nstop_vllm_serve "$CONTAINER"`,
                    // A rebuilt Ray cluster needs a new server; a changed vLLM setting only a restart.
                    triggers: [args.ray.revision],
                },
                { parent: this, dependsOn: [args.ray] },
            );
            gateStdout = command.stdout;
            served = command.resource;
        } else {
            const ranks = plan.ranks ?? [];
            const revisions: pulumi.Output<string>[] = [];
            const containers: pulumi.Resource[] = [];
            nodes.forEach((node, index) => {
                const rank = ranks[index];
                const withKey = apiKey.apply((key) => (key ? withEnv(rank.spec, { VLLM_API_KEY: key }) : rank.spec));
                const keyed = withServingCache(index === 0 ? withServingKeyCheck(withKey, args.keyCheck) : withKey, args.cache);
                const spec = index === 0 ? keyed : pulumi.all([keyed, revisions[0]]).apply(([planned, rank0]) => joinedToRank0(planned, node.nodeName, rank0));
                const container = realizeContainer(
                    args.containerDriver,
                    args.runner,
                    `${name}-${node.nodeName}-rank${index}`,
                    node,
                    spec,
                    { parent: this, dependsOn: [...(args.after ?? [])] },
                    // Nothing else watches a headless rank on its node: it must stay up a moment.
                    { removeFirst: plan.removeFirst, watchSeconds: 2 },
                );
                revisions.push(container.revision);
                containers.push(container.resource);
            });
            const gate = hostCommand(args.runner, `${name}-ready`, { connection: head.connection, create: ready, triggers: revisions }, { parent: this, dependsOn: containers });
            gateStdout = gate.stdout;
            served = gate.resource;
        }

        // The fabric check: which transport each node's rank chose, once vLLM serves; it runs again
        // whenever the gate does (its output, a fresh completion, changes then).
        const transports = nodes.map((node, index) => {
            const fabric = plan.fabricChecks[index];
            const check = hostCommand(
                args.runner,
                `${name}-fabric-${node.nodeName}`,
                {
                    connection: node.connection,
                    create: scriptProgram(NCCL_TRANSPORT, { NODE: node.nodeName, CONTAINER: fabric.container, EXECUTOR: fabric.executor, POLICY: fabric.policy, HINT: fabric.hint }),
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

        if (plan.watchdog) {
            // Started once vLLM serves (it must not race the first start). A restart of vLLM pauses
            // it (vllm-start.sh: it would start a server of its own in the gap); it restarts vLLM
            // with the lifecycle the start and the stop run (its spec carries the text), from the
            // serve arguments the last start left in the Ray head, so a change of them alone leaves
            // it running.
            const watchdog = plan.watchdog;
            const spec = apiKey.apply((key) => (key ? withEnv(watchdog, { VLLM_API_KEY: key }) : watchdog));
            realizeContainer(args.containerDriver, args.runner, `${name}-watchdog`, head, spec, { parent: this, dependsOn: [served] }, { watchSeconds: 0 });
        }

        this.endpoint = pulumi.output(plan.endpoint);
        this.modelId = pulumi.output(plan.modelId);
        this.completion = gateStdout.apply((stdout) => {
            const line = stdout.split("\n").find((text) => text.startsWith("completion "));
            return line ? line.slice("completion ".length) : "";
        });
        this.registerOutputs({ endpoint: this.endpoint, modelId: this.modelId, completion: this.completion, fabricTransport: this.fabricTransport });
    }
}
