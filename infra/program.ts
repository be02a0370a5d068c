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
import { NodeFirewall } from "../components/firewall";
import { HostPrep } from "../components/hostPrep";
import { HubDownload } from "../components/hubDownload";
import { Observer, observeOverSsh } from "../components/observer";
import { RayCluster } from "../components/rayCluster";
import { ServeArgsCheck } from "../components/serveArgsCheck";
import { readScript } from "../components/shell";
import { ImageDelivery, SparkNode } from "../components/sparkNode";
import { VLLM_LIFECYCLE, VllmService } from "../components/vllmService";
import { WeightSync } from "../components/weightSync";
import { FleetConfig } from "./core/config";
import { ModelDirFacts, NodeFacts } from "./core/facts";
import { describeFitPlan } from "./core/fit";
import { DEFAULT_SERVICE, serviceContainers } from "./core/names";
import { checkOwnership, firewallRevisions, newRevision } from "./core/observe";
import { FleetPlan, PreparedNode, checkPrepared, planFleet, preparedFacts } from "./core/plan";
import { reconcile } from "./core/reconcile";
import { readStackConfig } from "./stackConfig";

/**
 * The stack's own secrets: the Ray token (ray executor), and the API key when the stack makes it
 * (no vllmApiKey set and vllm.apiKey not none). Made once and kept in the stack's state.
 */
function stackSecrets(config: FleetConfig, apiKey: pulumi.Output<string> | undefined): { rayToken?: pulumi.Output<string>; apiKey?: pulumi.Output<string> } {
    const rayToken =
        config.executor === "ray" ? new FleetSecret("ray-token", { purpose: "ray-token", rotation: config.security.rayTokenRotation }).value : undefined;
    if (config.vllm.apiKey === "none") {
        pulumi.log.warn(
            `vllm.apiKey is none: the API on port ${config.vllm.port} answers anyone who can reach it; without vllm.apiKey the stack makes a key (the output apiKey)`,
        );
        return { rayToken };
    }
    return { rayToken, apiKey: apiKey ?? new FleetSecret("vllm-api-key", { purpose: "vllm-api-key" }).value };
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

/** The outputs of a stack. */
export interface FleetOutputs {
    readonly endpoint: pulumi.Output<string>;
    readonly model: pulumi.Output<string>;
    readonly nodes: string[];
    readonly fabricIps: pulumi.Output<Record<string, string>>;
    readonly rayHead: pulumi.Output<string>;
    readonly rayStatus: pulumi.Output<string>;
    readonly completion: pulumi.Output<string>;
    /** The image and the vLLM and Ray versions its argument check found in it (`ray`: "none" without Ray). */
    readonly image: pulumi.Output<{ name: string; vllm: string; ray: string }>;
    /** Per node, the transport NCCL chose over the fabric (`IB`: RoCE, `Socket`: TCP). */
    readonly fabricTransport: pulumi.Output<Record<string, string>>;
    /** The API key clients send (`Authorization: Bearer`), a secret; "" with vllm.apiKey none. */
    readonly apiKey: pulumi.Output<string>;
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
}

/** How the image reaches node `index` (image.source): pulled there, copied from the first node, or present. */
function imageDelivery(config: FleetConfig, plan: FleetPlan, observed: readonly NodeFacts[], first: SparkNode | undefined, index: number): ImageDelivery | undefined {
    if (config.image.source === "pull") {
        return { image: config.image.name, pull: true };
    }
    if (config.image.source !== "copy" || !first) {
        return undefined;
    }
    const copy = plan.copies[index - 1];
    return { image: config.image.name, copyFrom: first, wantId: observed[0].imageId, sourceIp: copy.sourceIp, targetIp: copy.targetIp };
}

/**
 * The program. Validation happens before any resource is registered: a bad config fails
 * `pulumi preview` with a message naming each bad key, and nothing runs on any host.
 */
export async function fleetProgram(observe: Observer = observeOverSsh): Promise<FleetOutputs> {
    const { config, privateKey, privateKeyPath, apiKey, hfToken } = readStackConfig();
    const stack = pulumi.getStack();
    const containers = serviceContainers(DEFAULT_SERVICE);

    // The stack's secrets touch no host. Registered first, they bring up the engine's provider of
    // dynamic resources (a Node.js process, about half a second) while the nodes are read.
    const secrets = stackSecrets(config, apiKey);
    // Every node as it is now, read before anything that reaches a host is registered (read-only, in parallel).
    const observations = await observe(config, { privateKey: await plainValue(privateKey), privateKeyPath, stack, containers });
    // Another stack's containers on these nodes: refused before anything is registered.
    checkOwnership(stack, observations);
    const reconciliation = reconcile({ executor: config.executor, containers }, observations, newRevision);
    for (const finding of reconciliation.findings) {
        pulumi.log.warn(finding);
    }
    const unpinned = config.nodes.filter((node) => !node.hostKey).map((node) => node.name);
    if (unpinned.length > 0) {
        pulumi.log.warn(
            `no host key pinned for ${unpinned.join(", ")}: their SSH host keys are not checked; set vllm-fleet:nodes[i].hostKey to the line of \`ssh-keyscan -t ed25519 <host>\``,
        );
    }

    // The plan, once: each node's fabric, the host checks (a refusal stops here), the containers, the
    // serve arguments, the checks.
    const observed = observations.map((observation) => observation.facts);
    const plan = planFleet({
        config,
        stack,
        containers,
        nodes: observations.map((observation) => ({ name: observation.node, facts: observation.facts })),
        reconciliation,
        firewallRevisions: firewallRevisions(observations, newRevision),
        watchdogScript: readScript("watchdog.py"),
        lifecycleScript: readScript(VLLM_LIFECYCLE),
    });
    for (const warning of plan.warnings) {
        pulumi.log.warn(warning);
    }

    // The nodes, each with the image delivered to it.
    const nodes: SparkNode[] = [];
    config.nodes.forEach((node, index) => {
        nodes.push(
            new SparkNode(node.name, {
                connection: { node: node.name, host: node.host, port: node.port, user: node.user, privateKey, hostKey: node.hostKey, connectTimeoutSeconds: config.timeouts.sshConnectSeconds },
                sshFiles: { stack, privateKeyPath },
                runner: config.commandRunner,
                containerDriver: config.containerDriver,
                image: imageDelivery(config, plan, observed, nodes[0], index),
            }),
        );
    });
    const imageIds = nodes.map((node, index) => node.deliveredImageId ?? pulumi.output(observed[index].imageId));

    // The model on every node: downloaded on the first (model.source hub), then synced to the others.
    const runner = config.commandRunner;
    const hub = config.model.hub;
    const download = hub
        ? new HubDownload(
              `${nodes[0].nodeName}-hub`,
              { node: nodes[0], hub, modelPath: config.model.path, image: config.image.name, imageId: imageIds[0].apply((id) => id ?? ""), hfToken, runner },
              { parent: nodes[0] },
          )
        : undefined;
    const firstModel: pulumi.Output<ModelDirFacts> = download ? download.model : pulumi.output(observed[0].model);
    const synced =
        config.model.sync === "rsync"
            ? plan.copies.map(
                  (copy, index) =>
                      new WeightSync(
                          `${copy.target}-weights`,
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
                .all([imageIds[index], index === 0 ? download?.model : synced[index - 1]?.model])
                .apply(([imageId, model]) => ({ name: node.nodeName, facts: preparedFacts(observed[index], { imageId, model }) })),
        ),
    );
    const gate = prepared.apply((list) => {
        const fit = checkPrepared(config, list);
        if (fit) {
            pulumi.log.info(describeFitPlan(fit));
        }
        return true;
    });

    // The arguments checked by the image's own vLLM; Ray and vLLM start behind it and the firewall.
    const argsChecked = new ServeArgsCheck(
        "vllm-args-check",
        { node: nodes[0], check: gate.apply(() => plan.argsCheck), imageId: imageIds[0].apply((id) => id ?? ""), runner },
        { parent: nodes[0] },
    );
    const firewalls = plan.firewalls.map((rules, index) => new NodeFirewall(`${rules.node}-firewall`, { node: nodes[index], rules, runner }, { parent: nodes[index] }));
    // hostPrep (off by default): each node prepared (its page cache dropped) before the serving containers start.
    const preps = plan.hostPrep.map((prep, index) => new HostPrep(`${prep.node}-host-prep`, { node: nodes[index], plan: prep, gate, runner }, { parent: nodes[index] }));
    // The compile caches, keyed by the image id (one on every node once preflight passed); their
    // step on each node goes before the containers, so its removal at destroy (when asked) comes
    // after every container that mounts them is gone.
    const cache = plan.cache ? { plan: plan.cache, imageId: prepared.apply((list) => list[0].facts.imageId) } : undefined;
    const cacheSteps = plan.cache
        ? nodes.map((node) => new CompileCache(`${node.nodeName}-compile-cache`, { node, plan: plan.cache!, runner }, { parent: node }).step)
        : [];
    const after = [argsChecked.check, ...firewalls.map((firewall) => firewall.rules), ...preps.map((prep) => prep.step), ...cacheSteps];
    const driving = { runner, containerDriver: config.containerDriver };
    const ray = plan.ray ? new RayCluster("ray", { nodes, plan: plan.ray, gate, rayToken: secrets.rayToken!, after, cache, ...driving }) : undefined;
    const vllm = new VllmService("vllm", { nodes, plan: plan.vllm, gate, ray, apiKey: secrets.apiKey, after, cache, ...driving });

    return {
        endpoint: vllm.endpoint,
        model: vllm.modelId,
        nodes: config.nodes.map((node) => node.name),
        fabricIps: pulumi.output(Object.fromEntries(plan.nodes.map((node) => [node.name, node.fabric.ip]))),
        rayHead: ray ? ray.headAddress : pulumi.output(""),
        rayStatus: ray ? ray.status : pulumi.output(""),
        completion: vllm.completion,
        image: argsChecked.versions.apply((versions) => ({ name: config.image.name, vllm: versions?.vllm ?? "unknown", ray: versions?.ray ?? "unknown" })),
        fabricTransport: vllm.fabricTransport,
        apiKey: pulumi.secret(secrets.apiKey ?? ""),
        tensorParallel: config.parallelism.tensor,
        pipelineParallel: config.parallelism.pipeline,
    };
}
