/**
 * The plan of the fleet, computed once per run: {@link planFleet} turns the config, the facts the
 * read of the nodes found and what reconciliation decided into everything the components put on the
 * hosts (each node's fabric, the containers and their names, the serve arguments, the checks, the
 * firewall, the copies between nodes); each component takes its slice. {@link checkPrepared} judges
 * the nodes once they are prepared (image delivered, model downloaded and synced): preflight, then
 * the fit of the model. Pure: tested without hosts or Pulumi.
 */
import { FleetConfig, ServiceConfig, clientPortsWarning } from "../config";
import { ContainerSpec } from "../containerSpec";
import { NodeFacts } from "../facts";
import { enforceHostChecks } from "../hostChecks";
import { imageStoreWarning } from "../image";
import { FitPlan, fitNodeFromFacts, kvCacheDtypeFromArgs, parseModelConfig, planFit, safetensorsWeightBytes } from "../fit";
import { RAY_HEAD_VLLM_CONFIG_ROOT, RAY_SERVE_ARGS_FILE, RAY_SERVE_LOG, ServiceContainers, servingContainer } from "../names";
import { Reconciliation } from "../reconcile";
import { urlHost } from "../net";
import { preflight } from "../preflight";
import { CachePlan, planCache } from "./cache";
import { KeyCheckPlan, ServiceContext, mpRankSpec, mpServeProgram, planKeyCheck, rayContainerSpec, watchdogSpec } from "./containers";
import { FirewallPlan, clientPorts, planFirewalls } from "./firewall";
import { GatewayPlan, planGateway } from "./gateway";
import { HostPrepPlan, planHostPrep } from "./hostPrep";
import { MonitoringPlan, MonitoringRevisions, planMonitoring } from "./monitoring";
import { NODE_LOCAL_ENV, transportHint, transportPolicy } from "./network";
import { ObservedNode, PlannedNode, fabricWarnings, gpusNeeded, planNodes } from "./nodes";
import { apiBindAddress, apiProbeAddress, argsCheckKeys, vllmServeArgs } from "./serveArgs";

/** A copy from the first node to another over the fabric (the image with image.source copy, the weights with model.sync rsync). */
export interface CopyPlan {
    readonly source: string;
    readonly sourceIp: string;
    readonly target: string;
    readonly targetIp: string;
}

/** The check of the serve arguments by the image's own vLLM, on the first node, before anything starts. */
export interface ArgsCheckPlan {
    readonly node: string;
    readonly image: string;
    /** The serving container, used for the check when it runs this very image. */
    readonly container: string;
    /** The arguments of `vllm` on the first node, `serve` first. */
    readonly argv: readonly string[];
    /** `<text>|<config key>`: what vLLM's refusal may say, and the key behind it. */
    readonly flagKeys: readonly string[];
    readonly timeoutSeconds: number;
}

/** The Ray cluster of a service (ray executor): a head on its first node, a worker on each other. */
export interface RayPlan {
    /** The Ray container on every node. */
    readonly container: string;
    /** `fabric-ip:port` of the head. */
    readonly headAddress: string;
    /** Each node's container (without the token and a worker's head: containers.ts). */
    readonly nodes: readonly { readonly node: string; readonly fabricIp: string; readonly spec: ContainerSpec }[];
    /** Containers removed before a Ray container starts: the other executor's, which hold the GPU. */
    readonly removeFirst: readonly string[];
    /** Ready when Ray reports these nodes (by fabric address) and this many GPUs. */
    readonly expectedIps: readonly string[];
    readonly expectedGpus: number;
    readonly timeoutSeconds: number;
}

/** Where each node's NCCL start-up line is read once vLLM serves, and what a TCP fallback means there. */
export interface FabricCheckPlan {
    readonly node: string;
    readonly container: string;
    readonly executor: "ray" | "mp";
    readonly policy: "refuse" | "warn";
    readonly hint: string;
}

/** vLLM of a service: `vllm serve` in the Ray head (ray) or a container per node (mp), its readiness, its watchdog. */
export interface VllmPlan {
    readonly executor: "ray" | "mp";
    /** The id clients send as `model`. */
    readonly modelId: string;
    /** The OpenAI-compatible endpoint. */
    readonly endpoint: string;
    /** The readiness gate (vllm-ready.sh), without the API key: where the API answers, how long to wait. */
    readonly ready: { readonly container: string; readonly host: string; readonly port: number; readonly servedName: string; readonly timeoutSeconds: number; readonly logFile: string };
    /** ray: `vllm serve` started in the head container (vllm-start.sh), without the API key. */
    readonly serve?: {
        readonly container: string;
        /** The lifecycle's text (vllm-lifecycle.sh), which the start, the stop and the watchdog run in the head. */
        readonly lifecycle: string;
        readonly args: readonly string[];
        readonly argsFile: string;
        readonly logFile: string;
        readonly token: string;
        readonly configRoot: string;
        readonly nonCarryOver: readonly string[];
    };
    /** mp: each node's rank (without the API key). */
    readonly ranks?: readonly { readonly node: string; readonly spec: ContainerSpec }[];
    /** Containers removed before a rank starts: the other executor's, which hold the GPU. */
    readonly removeFirst: readonly string[];
    readonly fabricChecks: readonly FabricCheckPlan[];
    /** The watchdog on the first node (without the API key), when supervision.watchdog. */
    readonly watchdog?: ContainerSpec;
}

/** One service's part of the plan: its containers, copies, checks, Ray cluster and vLLM. */
export interface ServicePlan {
    readonly name: string;
    /** The service as the config declares it. */
    readonly service: ServiceConfig;
    /** The stack's config as this service sees it (config/services.ts serviceConfig). */
    readonly config: FleetConfig;
    readonly containers: ServiceContainers;
    /** The service's nodes, planned, in the stack's order (the first holds the head, rank 0, the API). */
    readonly nodes: readonly PlannedNode[];
    /** From the service's first node to each other one, over the fabric. */
    readonly copies: readonly CopyPlan[];
    readonly argsCheck: ArgsCheckPlan;
    readonly ray?: RayPlan;
    readonly vllm: VllmPlan;
    /**
     * The key check of every route of its API (with an API key): carried by the container that runs
     * the API server (the Ray head, or rank 0), added by the components once the argument check read
     * the image's own PYTHONPATH (containers.ts withKeyCheck).
     */
    readonly keyCheck?: KeyCheckPlan;
    /** Its serving containers as planned, on each of its nodes (hostPrep's trigger). */
    readonly servingSpecs: readonly ContainerSpec[];
}

/** Everything the components put on the hosts, for one run. */
export interface FleetPlan {
    /** Every node of the stack. */
    readonly nodes: readonly PlannedNode[];
    /**
     * What the nodes' fabric attachments, the host checks (hostChecks.ts) and their image stores
     * (image.ts: classic and containerd side by side) warn about, one line each.
     */
    readonly warnings: readonly string[];
    readonly firewalls: readonly FirewallPlan[];
    /** Each node's preparation before its serving containers start (hostPrep); none when off. */
    readonly hostPrep: readonly HostPrepPlan[];
    /**
     * The compile caches on every node (config `cache`): the serving containers' specs lack them;
     * the components add them once the image id is known (cache.ts withCompileCache).
     */
    readonly cache?: CachePlan;
    /** Each service, in the config's order. */
    readonly services: readonly ServicePlan[];
    /** The gateway in front of the services (config `gateway`); none when unset. */
    readonly gateway?: GatewayPlan;
    /** Prometheus and the node exporters (config `monitoring`); none when unset. */
    readonly monitoring?: MonitoringPlan;
}

/** What one service is planned from. */
export interface ServiceInput {
    /** The stack's config as this service sees it (config/services.ts serviceConfig). */
    readonly config: FleetConfig;
    readonly name: string;
    readonly containers: ServiceContainers;
    readonly reconciliation: Pick<Reconciliation, "revisions" | "serveToken" | "watchdogRevision" | "servingAlive">;
}

/** What {@link planFleet} plans from. */
export interface PlanInput {
    /** The stack's config. */
    readonly config: FleetConfig;
    readonly stack: string;
    /** Each node of the stack and its facts as the read at the start of the run found them, in config order. */
    readonly nodes: readonly ObservedNode[];
    readonly services: readonly ServiceInput[];
    /**
     * Nodes where a service that left the config still runs (swaps.ts judges the memory it holds
     * beside the new services): the host check of memory held before a load leaves them be.
     */
    readonly leavingAlive?: readonly string[];
    /** Revisions of each node's firewall rules (observe.ts firewallRevisions). */
    readonly firewallRevisions: Readonly<Record<string, string>>;
    /** The watchdog's program (components/scripts/watchdog.py). */
    readonly watchdogScript: string;
    /**
     * The lifecycle of `vllm serve` in the Ray head (components/scripts/vllm-lifecycle.sh): the one
     * text the start, the stop and the watchdog run there.
     */
    readonly lifecycleScript: string;
    /** The gateway's launcher (components/scripts/gateway.py); needed with config `gateway`. */
    readonly gatewayScript?: string;
    /** The key check vLLM loads (components/scripts/vllm_fleet_key.py). */
    readonly keyCheckScript: string;
    /** The keeper of each vLLM rank of the mp executor (components/scripts/vllm-rank.py). */
    readonly rankKeeperScript: string;
    /** The monitoring containers' revisions as the read decided (reconcile.ts containerRevision); needed with config `monitoring`. */
    readonly monitoringRevisions?: MonitoringRevisions;
}

/**
 * The plan of the fleet. Throws, naming the node, when a node has no usable fabric attachment
 * (fabric.ts), or when a host check set to refuse fires (hostChecks.ts): before anything is registered.
 */
export function planFleet(input: PlanInput): FleetPlan {
    const { config, stack } = input;
    const nodes = planNodes(config, input.nodes);
    const byName = new Map(nodes.map((node) => [node.name, node]));
    const servicesOn = (node: string) => input.services.filter((service) => service.config.nodes.some((own) => own.name === node));
    const hostWarnings = enforceHostChecks(
        config,
        input.nodes.map((node, index) => ({
            name: node.name,
            facts: node.facts,
            fabricInterface: nodes[index].fabric.interface,
            servingAlive:
                servicesOn(node.name).some((service) => service.reconciliation.servingAlive.includes(node.name)) || (input.leavingAlive ?? []).includes(node.name),
            // The single-model form's check names its key; with services, what they take together.
            gpuMemoryUtilization:
                input.services.length === 1 ? undefined : servicesOn(node.name).reduce((sum, service) => sum + service.config.vllm.gpuMemoryUtilization, 0),
        })),
    );
    const services = input.services.map((service) =>
        planService(
            service,
            service.config.nodes.map((node) => byName.get(node.name)!),
            stack,
            { watchdog: input.watchdogScript, lifecycle: input.lifecycleScript, keyCheck: input.keyCheckScript, rankKeeper: input.rankKeeperScript },
        ),
    );
    const firewalls = planFirewalls(
        config,
        input.services.map((service) => service.config),
        stack,
        input.firewallRevisions,
    );
    const openToAll = clientPortsWarning(config.security, clientPorts(config, input.services.map((service) => service.config)));
    const gateway = planGateway(
        config,
        stack,
        nodes,
        services.map((service) => ({ name: service.name, servedNames: [service.vllm.modelId], apiAddress: service.nodes[0].fabric.ip, port: service.config.vllm.port })),
        { launcher: input.gatewayScript ?? "", watchdog: input.watchdogScript },
    );
    const monitoring = planMonitoring(config, stack, nodes, services, gateway, input.monitoringRevisions ?? { prometheus: "", exporters: {} });
    return {
        nodes,
        warnings: [...fabricWarnings(config, nodes), ...hostWarnings, ...[imageStoreWarning(input.nodes), openToAll].filter((warning): warning is string => warning !== undefined)],
        firewalls,
        hostPrep: planHostPrep(
            config,
            nodes.map((node) => node.name),
            services.flatMap((service) => service.servingSpecs),
        ),
        cache: planCache(config, stack),
        services,
        gateway,
        monitoring,
    };
}

/** One service's plan, on its nodes. */
function planService(
    input: ServiceInput,
    nodes: readonly PlannedNode[],
    stack: string,
    scripts: { readonly watchdog: string; readonly lifecycle: string; readonly keyCheck: string; readonly rankKeeper: string },
): ServicePlan {
    const { config, containers, reconciliation } = input;
    const context: ServiceContext = { config, stack, service: input.name, containers };
    const head = nodes[0];
    const serving = servingContainer(containers, config.executor);
    const removeFirst = [containers.ray, containers.vllm];
    const headArgs = vllmServeArgs(config, apiBindAddress(config, head));
    const ranks =
        config.executor === "mp" ? nodes.map((node, index) => ({ node: node.name, spec: mpRankSpec(context, nodes, index, reconciliation.revisions[node.name], scripts.rankKeeper) })) : undefined;
    const headAddress = `${head.fabric.ip}:${config.ray.port}`;
    const rayNodes =
        config.executor === "ray"
            ? nodes.map((node, index) => ({ node: node.name, fabricIp: node.fabric.ip, spec: rayContainerSpec(context, nodes, index, reconciliation.revisions[node.name]) }))
            : undefined;
    // With vllm.host fabric the API answers on the first node's fabric address only.
    const endpointHost = config.vllm.host === "fabric" ? head.fabric.ip : urlHost(config.nodes[0].host);
    return {
        name: input.name,
        service: config.services[0],
        config,
        containers,
        nodes,
        copies: nodes.slice(1).map((node) => ({ source: head.name, sourceIp: head.fabric.ip, target: node.name, targetIp: node.fabric.ip })),
        argsCheck: {
            node: head.name,
            image: config.image.name,
            container: serving,
            argv: ranks ? mpServeProgram(config, nodes, 0).slice(1) : headArgs,
            flagKeys: argsCheckKeys(config),
            timeoutSeconds: 600,
        },
        ray:
            config.executor === "ray"
                ? {
                      container: containers.ray,
                      headAddress,
                      nodes: rayNodes!,
                      removeFirst,
                      expectedIps: nodes.map((node) => node.fabric.ip),
                      expectedGpus: gpusNeeded(config),
                      timeoutSeconds: config.timeouts.rayReadySeconds,
                  }
                : undefined,
        vllm: {
            executor: config.executor,
            modelId: config.model.servedName,
            endpoint: `http://${endpointHost}:${config.vllm.port}/v1`,
            ready: {
                container: serving,
                host: apiProbeAddress(config, head),
                port: config.vllm.port,
                servedName: config.model.servedName,
                timeoutSeconds: config.timeouts.vllmReadySeconds,
                logFile: config.executor === "ray" ? RAY_SERVE_LOG : "",
            },
            serve:
                config.executor === "ray"
                    ? {
                          container: containers.ray,
                          lifecycle: scripts.lifecycle,
                          args: headArgs,
                          argsFile: RAY_SERVE_ARGS_FILE,
                          logFile: RAY_SERVE_LOG,
                          // A new token (vllm serve found dead, or the endpoint not answering) changes
                          // the start's program, so the next up starts vllm serve again (observe.ts).
                          token: reconciliation.serveToken,
                          configRoot: RAY_HEAD_VLLM_CONFIG_ROOT,
                          nonCarryOver: NODE_LOCAL_ENV,
                      }
                    : undefined,
            ranks,
            removeFirst,
            fabricChecks: nodes.map((node) => ({ node: node.name, container: serving, executor: config.executor, policy: transportPolicy(config, node), hint: transportHint(config, node) })),
            watchdog: config.supervision.watchdog ? watchdogSpec(context, scripts, reconciliation.watchdogRevision, head) : undefined,
        },
        keyCheck: config.vllm.apiKey === "none" ? undefined : planKeyCheck(scripts.keyCheck),
        servingSpecs: (rayNodes ?? ranks ?? []).map((planned) => planned.spec),
    };
}

/** A node once prepared: its facts with the image delivered and the model directory as it arrived. */
export interface PreparedNode {
    readonly name: string;
    readonly facts: NodeFacts;
}

/**
 * The nodes judged once they are prepared, before any container starts: preflight across them (one
 * image id, the model directory the same as the first node's, GPUs for TP×PP, driver and CUDA),
 * then the fit of the model in each node's memory (fit/), when the first node has its config.json.
 * Throws, naming node and fact or the numbers; returns the fit plan to show.
 */
export function checkPrepared(config: FleetConfig, nodes: readonly PreparedNode[]): FitPlan | undefined {
    preflight(nodes, {
        image: config.image.name,
        imageSource: config.image.source,
        modelPath: config.model.path,
        modelSync: config.model.sync,
        gpusNeeded: gpusNeeded(config),
    });
    const head = nodes[0];
    if (!head.facts.model.configJson) {
        return undefined;
    }
    return planFit({
        model: parseModelConfig(head.facts.model.configJson, `${config.model.path}/config.json on ${head.name}`),
        modelName: config.model.servedName,
        weightBytes: safetensorsWeightBytes(head.facts.model),
        tensorParallel: config.parallelism.tensor,
        pipelineParallel: config.parallelism.pipeline,
        nodes: nodes.map((node) => fitNodeFromFacts(node.name, node.facts)),
        gpuMemoryUtilization: config.vllm.gpuMemoryUtilization,
        maxModelLen: config.vllm.maxModelLen,
        kvCacheDtype: kvCacheDtypeFromArgs(config.vllm.extraArgs),
    });
}

/**
 * A node's facts as preparation left them: the image's content identity the delivery step reports
 * (it ran after the read), and the model directory a download or a sync left (the first node's
 * config.json is kept: a sync lists the directory, it does not read the file).
 */
export function preparedFacts(observed: NodeFacts, delivered: { readonly imageIdentity?: string; readonly model?: NodeFacts["model"] }): NodeFacts {
    return {
        ...observed,
        imageIdentity: delivered.imageIdentity ?? observed.imageIdentity,
        model: delivered.model ? { ...delivered.model, configJson: delivered.model.configJson ?? observed.model.configJson } : observed.model,
    };
}
