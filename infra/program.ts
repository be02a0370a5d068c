/**
 * The vllm-fleet program, the composition root: read the stack's config, read every node, plan the
 * fleet once (infra/core/plan), then compose the components, each with its slice of the plan.
 *
 * config -> observed (the read of the nodes) -> plan -> nodes prepared (image, model) -> checked
 * (preflight, fit) -> the serving components -> outputs. Used both by the Pulumi CLI
 * (`main: infra/index.ts`) and by the Automation API driver (test/automation.ts) as an inline
 * program, so both paths run exactly the same code.
 */
import * as pulumi from "@pulumi/pulumi";
import { CompileCache } from "../components/compileCache";
import { FleetSecret } from "../components/fleetSecret";
import { Gateway, GatewayOutputs } from "../components/gateway";
import { NodeFirewall } from "../components/firewall";
import { HostPrep } from "../components/hostPrep";
import { HubDownload } from "../components/hubDownload";
import { Monitoring } from "../components/monitoring";
import { Observer, observeOverSsh } from "../components/observer";
import { RayCluster } from "../components/rayCluster";
import { ServeArgsCheck } from "../components/serveArgsCheck";
import { readScript } from "../components/shell";
import { SparkNode } from "../components/sparkNode";
import { swapStops } from "../components/swapStop";
import { imageDeliveries, unpinnedImageWarnings, unpinnedMonitoringImageWarnings } from "./imageDeliveries";
import { VLLM_LIFECYCLE, VllmService } from "../components/vllmService";
import { WeightSync } from "../components/weightSync";
import { FleetConfig, ServiceConfig, inServiceKeys, serviceConfig } from "./core/config";
import { ModelDirFacts } from "./core/facts";
import { describeFitPlan, fitNodeFromFacts } from "./core/fit";
import { DEFAULT_SERVICE, serviceContainers, serviceResourceName } from "./core/names";
import { NodeObservation, checkOwnership, firewallRevisions, newRevision, ofService } from "./core/observe";
import { CachePlan, PreparedNode, ServicePlan, checkPrepared, planFleet, planServiceBudgets, planSwaps, preparedFacts, runningServices } from "./core/plan";
import { monitoringRevisions, reconcile } from "./core/reconcile";
import { FleetOutputs, ServiceOutputs } from "./outputs";
import { readStackConfig } from "./stackConfig";

export { FleetOutputs, ServiceOutputs } from "./outputs";

/**
 * The stack's API key, one for every service: the secret vllmApiKey, or one the stack makes and
 * keeps (none with vllm.apiKey none, the single-model form only).
 */
function stackApiKey(config: FleetConfig, apiKey: pulumi.Output<string> | undefined): pulumi.Output<string> | undefined {
    if (config.vllm.apiKey === "none") {
        pulumi.log.warn(
            `vllm.apiKey is none: the API on port ${config.vllm.port} answers anyone who can reach it; without vllm.apiKey the stack makes a key (the output apiKey)`,
        );
        return undefined;
    }
    return apiKey ?? new FleetSecret("vllm-api-key", { purpose: "vllm-api-key" }).value;
}

/** The Ray token of a service with the ray executor (each Ray cluster its own), made once and kept. */
function rayToken(config: FleetConfig, service: ServiceConfig): pulumi.Output<string> | undefined {
    return service.executor === "ray"
        ? new FleetSecret(serviceResourceName(service.name, "ray-token"), { purpose: "ray-token", rotation: config.security.rayTokenRotation }).value
        : undefined;
}

/** The value of a known Output (config values always are), for the program-time read. */
function plainValue<T>(output: pulumi.Output<T>): Promise<T> {
    return new Promise((resolve) => {
        output.apply((value) => {
            resolve(value);
            return value;
        });
    });
}


/** `judge()`, its refusal in the service's keys (`vllm-fleet:services[i].vllm.maxModelLen`) and named by the service. */
function inServiceTerms<T>(plan: ServicePlan, judge: () => T): T {
    try {
        return judge();
    } catch (error) {
        if (error instanceof Error && plan.service.keyPrefix !== "") {
            error.message = `service ${plan.name}: ${inServiceKeys(error.message, plan.service)}`;
        }
        throw error;
    }
}

/** A service's nodes once its image and model are there, judged (preflight, fit). */
interface PreparedService {
    readonly plan: ServicePlan;
    readonly nodes: readonly SparkNode[];
    /** The content identity of the service's image on each of its nodes, once delivered (image-identity.sh). */
    readonly imageIdentities: readonly pulumi.Output<string | undefined>[];
    readonly prepared: pulumi.Output<PreparedNode[]>;
    /** True once preflight and the fit passed: what starts nothing before it. */
    readonly gate: pulumi.Output<boolean>;
}

/**
 * A service's model on its nodes (downloaded on its first, synced to the others), and the nodes
 * judged once prepared (preflight, then the fit).
 */
function prepareService(plan: ServicePlan, observed: readonly NodeObservation[], sparks: readonly SparkNode[], hfToken: pulumi.Output<string> | undefined): PreparedService {
    const { config } = plan;
    const name = (base: string) => serviceResourceName(plan.name, base);
    const nodes = plan.nodes.map((planned) => sparks.find((spark) => spark.nodeName === planned.name)!);
    const facts = observed.map((observation) => observation.facts);
    const imageIdentities = nodes.map((node, index) => node.deliveredImageIdentities[config.image.name] ?? pulumi.output(facts[index].imageIdentity));
    const runner = config.commandRunner;
    const hub = config.model.hub;
    const download = hub
        ? new HubDownload(
              `${nodes[0].nodeName}-${name("hub")}`,
              { node: nodes[0], hub, modelPath: config.model.path, image: config.image.name, imageIdentity: imageIdentities[0].apply((identity) => identity ?? ""), hfToken, runner },
              { parent: nodes[0] },
          )
        : undefined;
    const firstModel: pulumi.Output<ModelDirFacts> = download ? download.model : pulumi.output(facts[0].model);
    const synced =
        config.model.sync === "rsync"
            ? plan.copies.map(
                  (copy, index) =>
                      new WeightSync(
                          `${copy.target}-${name("weights")}`,
                          {
                              source: nodes[0],
                              target: nodes[index + 1],
                              copy,
                              modelPath: config.model.path,
                              sourceModel: firstModel.apply((model) => JSON.stringify({ files: model.files, config: model.configSha256 })),
                              runner,
                          },
                          { parent: nodes[index + 1] },
                      ),
              )
            : [];

    // The nodes as preparation left them, judged before anything starts: preflight, then the fit.
    const prepared: pulumi.Output<PreparedNode[]> = pulumi.all(
        nodes.map((node, index) =>
            pulumi
                .all([imageIdentities[index], index === 0 ? download?.model : synced[index - 1]?.model])
                .apply(([imageIdentity, model]) => ({ name: node.nodeName, facts: preparedFacts(facts[index], { imageIdentity, model }) })),
        ),
    );
    const gate = prepared.apply((list) => {
        const fit = inServiceTerms(plan, () => checkPrepared(config, list));
        if (fit) {
            pulumi.log.info(`${plan.name === DEFAULT_SERVICE ? "" : `service ${plan.name}: `}${describeFitPlan(fit)}`);
        }
        return true;
    });
    return { plan, nodes, imageIdentities, prepared, gate };
}

/** The components of one service on its nodes, and what it puts out. */
interface DeployedService {
    readonly vllm: VllmService;
    readonly ray?: RayCluster;
    readonly outputs: pulumi.Output<ServiceOutputs>;
}

/** A prepared service served: its arguments checked by its image's vLLM, its Ray cluster (ray) and vLLM. */
function serveService(
    { plan, nodes, imageIdentities, prepared, gate }: PreparedService,
    context: {
        readonly apiKey?: pulumi.Output<string>;
        readonly rayToken?: pulumi.Output<string>;
        readonly after: readonly pulumi.Resource[];
        readonly cachePlan?: CachePlan;
    },
): DeployedService {
    const { config } = plan;
    const name = (base: string) => serviceResourceName(plan.name, base);
    const runner = config.commandRunner;

    // The arguments checked by the image's own vLLM; Ray and vLLM start behind it and the node steps.
    const argsChecked = new ServeArgsCheck(
        name("vllm-args-check"),
        { node: nodes[0], check: gate.apply(() => plan.argsCheck), imageIdentity: imageIdentities[0].apply((identity) => identity ?? ""), runner },
        { parent: nodes[0] },
    );
    const cache = context.cachePlan ? { plan: context.cachePlan, imageIdentity: prepared.apply((list) => list[0].facts.imageIdentity) } : undefined;
    const after = [argsChecked.check, ...context.after];
    const driving = { runner, containerDriver: config.containerDriver };
    // The key check goes with the API server: into the Ray head (ray), or rank 0 (mp).
    const keyCheck = plan.keyCheck ? { plan: plan.keyCheck, imagePythonPath: argsChecked.imagePythonPath } : undefined;
    const ray = plan.ray ? new RayCluster(name("ray"), { nodes, plan: plan.ray, gate, rayToken: context.rayToken!, after, cache, ...driving, keyCheck }) : undefined;
    const vllmArgs = { nodes, plan: plan.vllm, gate, ray, apiKey: context.apiKey, after, cache, ...driving, keyCheck: ray ? undefined : keyCheck };
    const vllm = new VllmService(plan.name === DEFAULT_SERVICE ? "vllm" : `${plan.name}-vllm`, vllmArgs);
    const outputs = pulumi
        .all([vllm.endpoint, vllm.modelId, vllm.fabricTransport, vllm.completion, argsChecked.versions, ray ? ray.headAddress : pulumi.output("")])
        .apply(([endpoint, model, fabricTransport, completion, versions, rayHead]) => ({
            endpoint,
            model,
            nodes: plan.nodes.map((node) => node.name),
            executor: config.executor,
            image: { name: config.image.name, vllm: versions?.vllm ?? "unknown", ray: versions?.ray ?? "unknown" },
            fabricTransport,
            completion,
            rayHead,
            tensorParallel: config.parallelism.tensor,
            pipelineParallel: config.parallelism.pipeline,
        }));
    return { vllm, ray, outputs };
}

/**
 * The program. Validation happens before any resource is registered: a bad config fails
 * `pulumi preview` with a message naming each bad key, and nothing runs on any host.
 */
export async function fleetProgram(observe: Observer = observeOverSsh): Promise<FleetOutputs> {
    const { config, privateKey, privateKeyPath, apiKey, hfToken } = readStackConfig();
    const stack = pulumi.getStack();
    const reading = config.services.map((service) => ({ service, config: serviceConfig(config, service), containers: serviceContainers(service.name) }));

    // The stack's secrets touch no host. Registered first, they bring up the engine's provider of
    // dynamic resources (a Node.js process, about half a second) while the nodes are read.
    const key = stackApiKey(config, apiKey);
    const rayTokens = new Map(config.services.map((service) => [service.name, rayToken(config, service)]));
    // Every node as it is now, read before anything that reaches a host is registered: read-only,
    // the nodes in parallel, each in one session however many services it has. A node no service
    // runs on (the gateway's, say) is read too, as the first service's view of it.
    const unread = config.nodes.filter((node) => !reading.some((service) => service.config.nodes.some((placed) => placed.name === node.name)));
    const views = [...reading, ...(unread.length > 0 ? [{ config: { ...reading[0].config, nodes: unread }, containers: reading[0].containers }] : [])];
    const observed = await observe(views, { privateKey: await plainValue(privateKey), privateKeyPath, stack });
    const reads = observed.slice(0, reading.length);
    const extraReads = observed.slice(reading.length).flat();
    // Another stack's containers on these nodes: refused before anything is registered.
    checkOwnership(stack, [...reads.flat(), ...extraReads]);
    // Each node of the stack as the first service placed on it read it.
    const stackNodes = config.nodes.map((node) => [...reads.flat(), ...extraReads].find((observation) => observation.node === node.name)!);
    // Each service's share of the memory of the nodes it shares (none shared: its own or the default).
    const budgets = planServiceBudgets(config, (node) => stackNodes.find((observation) => observation.node === node)!.facts);
    if (budgets.description) {
        pulumi.log.info(budgets.description);
    }
    const services = reading.map((service) => ({ ...service, config: serviceConfig(config, service.service, budgets.utilization[service.service.name]) }));
    const observedBy = services.map((service, index) => reads[index].map((observation) => ofService(observation, service.containers)));
    const reconciliations = services.map((service, index) => reconcile({ executor: service.config.executor, containers: service.containers }, observedBy[index], newRevision));
    for (const [index, reconciliation] of reconciliations.entries()) {
        const prefix = services.length > 1 ? `service ${services[index].service.name}: ` : "";
        for (const finding of reconciliation.findings) {
            pulumi.log.warn(`${prefix}${finding}`);
        }
    }
    // Swaps: services of the stack running now that left the config, and the new ones that take
    // their served names or their room; preview says which stop first, and why (plan/swaps.ts).
    const running = runningServices(reads.flat());
    const swaps = planSwaps({
        services: services.map((service) => ({ name: service.service.name, config: service.config, keyPrefix: service.service.keyPrefix })),
        running,
        memoryBytes: (node) => fitNodeFromFacts(node, stackNodes.find((observation) => observation.node === node)!.facts).memoryBytes,
        policy: config.swap,
    });
    swaps.notes.forEach((note) => pulumi.log.info(note));
    swaps.warnings.forEach((warning) => pulumi.log.warn(warning));
    const unpinned = config.nodes.filter((node) => !node.hostKey).map((node) => node.name);
    if (unpinned.length > 0) {
        pulumi.log.warn(
            `no host key pinned for ${unpinned.join(", ")}: their SSH host keys are not checked; set vllm-fleet:nodes[i].hostKey to the line of \`ssh-keyscan -t ed25519 <host>\``,
        );
    }

    // The monitoring's containers: kept while they run, replaced when found dead or missing.
    const monitored = config.monitoring ? monitoringRevisions(config.monitoring.node, stack, stackNodes, newRevision) : undefined;
    monitored?.findings.forEach((finding) => pulumi.log.warn(finding));

    // The plan, once: each node's fabric, the host checks (a refusal stops here), each service's
    // containers, serve arguments and checks.
    const plan = planFleet({
        config,
        stack,
        nodes: stackNodes.map((observation) => ({ name: observation.node, facts: observation.facts })),
        services: services.map((service, index) => ({ config: service.config, name: service.service.name, containers: service.containers, reconciliation: reconciliations[index] })),
        leavingAlive: running.filter((service) => !config.services.some((own) => own.name === service.name)).flatMap((service) => service.nodes),
        firewallRevisions: firewallRevisions(stackNodes, newRevision),
        watchdogScript: readScript("watchdog.py"),
        lifecycleScript: readScript(VLLM_LIFECYCLE),
        gatewayScript: config.gateway ? readScript("gateway.py") : undefined,
        keyCheckScript: readScript("vllm_fleet_key.py"),
        rankKeeperScript: readScript("vllm-rank.py"),
        monitoringRevisions: monitored,
    });
    for (const warning of plan.warnings) {
        pulumi.log.warn(warning);
    }
    // An image named by a tag alone: what its first node has, so that the stack can pin it.
    unpinnedImageWarnings(plan.services, (index) => observedBy[index][0]).forEach((warning) => pulumi.log.warn(warning));
    unpinnedMonitoringImageWarnings(config.monitoring).forEach((warning) => pulumi.log.warn(warning));

    // The nodes, each with the images of its services delivered to it.
    // A step whose node no longer has its image delivers it again (the marks the steps left).
    const observedIdentity = (service: ServicePlan) => observedBy[plan.services.indexOf(service)][0].facts.imageIdentity;
    const sparks: SparkNode[] = [];
    for (const [index, node] of config.nodes.entries()) {
        const images = imageDeliveries(plan.services, observedIdentity, node.name, sparks, plan.gateway, { stack, observation: stackNodes[index], fresh: newRevision }, plan.monitoring);
        for (const image of images) {
            if (image.finding) {
                pulumi.log.warn(image.finding);
            }
        }
        sparks.push(
            new SparkNode(node.name, {
                connection: { node: node.name, host: node.host, port: node.port, user: node.user, privateKey, hostKey: node.hostKey, connectTimeoutSeconds: config.timeouts.sshConnectSeconds },
                sshFiles: { stack, privateKeyPath },
                runner: config.commandRunner,
                containerDriver: config.containerDriver,
                images,
            }),
        );
    }

    // The steps on each node before any serving container starts there: its firewall, its
    // preparation (hostPrep, behind every service's checks), its compile cache. A cache's step goes
    // before the containers, so its removal at destroy (when asked) comes after every container
    // that mounts it is gone.
    const runner = config.commandRunner;
    const sparkOf = (node: string) => sparks.find((spark) => spark.nodeName === node)!;
    const firewalls = plan.firewalls.map((rules) => new NodeFirewall(`${rules.node}-firewall`, { node: sparkOf(rules.node), rules, runner }, { parent: sparkOf(rules.node) }));
    const prepared = plan.services.map((servicePlan, index) => prepareService(servicePlan, observedBy[index], sparks, hfToken));
    const everyGate = pulumi.all(prepared.map((service) => service.gate)).apply(() => true);
    const preps = plan.hostPrep.map((prep) => {
        const node = sparkOf(prep.node);
        return new HostPrep(`${prep.node}-host-prep`, { node, plan: prep, gate: everyGate, runner }, { parent: node });
    });
    const cacheSteps = plan.cache ? sparks.map((node) => new CompileCache(`${node.nodeName}-compile-cache`, { node, plan: plan.cache!, runner }, { parent: node }).step) : [];
    const nodeSteps = [...firewalls.map((firewall) => firewall.rules), ...preps.map((prep) => prep.step), ...cacheSteps];

    // A new service that cannot run beside one leaving the config starts after that one stopped.
    const stopsBefore = swapStops(swaps, sparkOf, runner);
    const deployed = prepared.map((service) =>
        serveService(service, { apiKey: key, rayToken: rayTokens.get(service.plan.name), after: [...nodeSteps, ...stopsBefore(service.plan.name)], cachePlan: plan.cache }),
    );

    // The gateway, once every service serves (their readiness gates) and its image is on its node.
    const gateway = plan.gateway
        ? new Gateway("gateway", {
              node: sparkOf(plan.gateway.node),
              plan: plan.gateway,
              apiKey: key,
              after: [...deployed.map((service) => service.vllm), sparkOf(plan.gateway.node), ...nodeSteps],
              runner,
              containerDriver: config.containerDriver,
          })
        : undefined;

    // Prometheus and the node exporters; given their targets once every service and the gateway serve.
    const monitoring = plan.monitoring
        ? new Monitoring("monitoring", {
              nodes: sparks,
              plan: plan.monitoring,
              apiKey: key,
              nodeSteps,
              serving: [...deployed.map((service) => service.vllm), ...(gateway ? [gateway] : [])],
              runner,
              containerDriver: config.containerDriver,
          })
        : undefined;

    const first = deployed[0];
    const firstConfig = plan.services[0].config;
    return {
        endpoint: first.vllm.endpoint,
        model: first.vllm.modelId,
        nodes: config.nodes.map((node) => node.name),
        fabricIps: pulumi.output(Object.fromEntries(plan.nodes.map((node) => [node.name, node.fabric.ip]))),
        rayHead: first.ray ? first.ray.headAddress : pulumi.output(""),
        rayStatus: first.ray ? first.ray.status : pulumi.output(""),
        completion: first.vllm.completion,
        image: first.outputs.apply((outputs) => outputs.image),
        fabricTransport: first.vllm.fabricTransport,
        apiKey: pulumi.secret(key ?? ""),
        tensorParallel: firstConfig.parallelism.tensor,
        pipelineParallel: firstConfig.parallelism.pipeline,
        services: pulumi.all(deployed.map((service) => service.outputs)).apply((list) => Object.fromEntries(list.map((outputs, index) => [plan.services[index].name, outputs]))),
        gatewayEndpoint: gateway ? gateway.endpoint : pulumi.output(""),
        ...(gateway ? { gateway: gateway.outputs } : {}),
        ...(monitoring ? { monitoring: monitoring.outputs } : {}),
    };
}

