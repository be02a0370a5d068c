import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { FleetConfig, FleetNode } from "../infra/core/config";
import { FleetError } from "../infra/core/errors";
import { FabricFacts, ModelDirFacts, NodeFacts, findFabric, preflight } from "../infra/core/facts";
import { NodeObservation } from "../infra/core/observe";
import { describeFitPlan, fitNodeFromFacts, kvCacheDtypeFromArgs, parseModelConfig, planFit, safetensorsWeightBytes } from "../infra/core/fit";
import { PlannedNode, gpusNeeded } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { readScript, scriptProgram } from "./shell";
import { fabricSecret } from "./weightSync";
import { SshConnection, SshFiles, materializeSshFiles, sshClientOptions } from "./ssh";

export interface SparkNodeArgs {
    readonly node: FleetNode;
    /** The SSH private key (a secret). */
    readonly privateKey: pulumi.Input<string>;
    /** The private key file, when the key was given as one (ssh.privateKeyPath); else one is written (ssh.ts). */
    readonly privateKeyPath?: string;
    /** The stack name: where this machine keeps the node's ssh files (ssh.ts). */
    readonly stack: string;
    readonly connectTimeoutSeconds: number;
    readonly runner: CommandRunner;
    readonly containerDriver: "docker" | "ssh";
    /** The image to deliver (image.source pull or copy). */
    readonly image: string;
    /** What this run's read of the node found (facts and live state). */
    readonly observed: NodeObservation;
    /** The fabric subnet: the node's interface with an address in it is its fabric interface. */
    readonly fabricSubnet: string;
    /**
     * How the image arrives before the probe: pulled here, or copied from another node (whose image
     * id is wanted); absent: it must be present already.
     */
    readonly imageFrom?: "pull" | { readonly node: SparkNode; readonly imageId: pulumi.Output<string> };
}

/** The port of the short-lived image receiver on a node that gets the image (fabric address only). */
export const IMAGE_COPY_PORT = 28731;

/** The image id a delivery step reports (`image-pulled|image-present|image-copied <image> <id>`). */
export function deliveredImageId(stdout: string): string | undefined {
    return /^image-(?:pulled|present|copied) \S+ (\S+)/m.exec(stdout)?.[1];
}

/**
 * One host of the fleet: how to reach it and what it is. Its facts come from the read at the start
 * of every run (components/observer.ts), never from an earlier one.
 */
export class SparkNode extends pulumi.ComponentResource {
    /** The node's name in the stack. */
    public readonly nodeName: string;
    /** How commands reach this node. */
    public readonly connection: SshConnection;
    /** What the read found: GPUs, driver/CUDA, memory, interfaces, HCAs, Docker, image, model. */
    public readonly facts: pulumi.Output<NodeFacts>;
    /** The fabric interface, its address and the RoCE devices (from the probe, never guessed). */
    public readonly fabric: pulumi.Output<FabricFacts>;
    /** A Docker provider over SSH to this node (the `docker` container driver only). */
    public readonly dockerProvider?: docker.Provider;
    /** The key and pinned host key of this node as files on this machine, for the system ssh client. */
    public readonly sshFiles: pulumi.Output<SshFiles>;

    constructor(name: string, args: SparkNodeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:node:SparkNode", name, {}, opts);
        this.nodeName = args.node.name;
        this.connection = {
            node: args.node.name,
            host: args.node.host,
            port: args.node.port,
            user: args.node.user,
            privateKey: args.privateKey,
            hostKey: args.node.hostKey,
            connectTimeoutSeconds: args.connectTimeoutSeconds,
        };
        this.sshFiles = materializeSshFiles(args.stack, this.connection, args.privateKeyPath);
        const image = this.deliverImage(name, args);
        // Read at the start of this run (components/observer.ts); a delivered image is what the
        // delivery step reports, since it arrives after that read.
        this.facts = image
            ? image.stdout.apply((stdout) => ({ ...args.observed.facts, imageId: deliveredImageId(stdout) ?? args.observed.facts.imageId }))
            : pulumi.output(args.observed.facts);
        this.fabric = this.facts.apply((facts) => findFabric(args.node.name, facts, args.fabricSubnet));
        if (args.containerDriver === "docker") {
            // The same key and host-key rules as every other path to the node (ssh.ts).
            this.dockerProvider = new docker.Provider(
                `${name}-docker`,
                {
                    host: `ssh://${args.node.user}@${args.node.host}:${args.node.port}`,
                    sshOpts: this.sshFiles.apply((files) => sshClientOptions(this.connection, files.keyFile, files.knownHostsFile)),
                },
                { parent: this },
            );
        }
        this.registerOutputs({ facts: this.facts, fabric: this.fabric });
    }

    /** Pulls the image, or streams it from another node, before the probe looks at it. */
    private deliverImage(name: string, args: SparkNodeArgs) {
        if (args.imageFrom === undefined) {
            return undefined;
        }
        if (args.imageFrom === "pull") {
            return hostCommand(
                args.runner,
                `${name}-image`,
                { connection: this.connection, create: scriptProgram("image-pull", { IMAGE: args.image }) },
                { parent: this },
            );
        }
        // Node to node over the fabric: a short-lived receiver here (image-receive.sh) while the
        // source node streams `docker save` into it (image-send.sh), with a secret for this copy.
        // Only the two sessions' control and output pass through this machine.
        const from = args.imageFrom;
        const source = from.node;
        const ownFabric = pulumi.output(args.observed.facts).apply((facts) => findFabric(args.node.name, facts, args.fabricSubnet));
        const secret = fabricSecret(args.privateKey, pulumi.interpolate`image ${args.node.name} ${from.imageId}`);
        const vars = pulumi.all([from.imageId, source.fabric, ownFabric, secret]).apply(([imageId, sourceFabric, fabric, key]) => {
            if (!imageId) {
                throw new FleetError(
                    `image.source copy: ${source.nodeName}, the node copied from, has no image ${args.image}; expected it there: pull or load it on ${source.nodeName}, ` +
                        `or set vllm-fleet:image.source to pull (every node pulls vllm-fleet:image.name)`,
                );
            }
            return {
                IMAGE: args.image,
                WANT_ID: imageId,
                PORT: IMAGE_COPY_PORT,
                SECRET: key,
                FABRIC_STREAM: readScript("fabric-stream.py"),
                BIND_IP: fabric.ip,
                SENDER_IP: sourceFabric.ip,
                TARGET_IP: fabric.ip,
            };
        });
        return hostCommand(
            args.runner,
            `${name}-image`,
            {
                connection: this.connection,
                create: vars.apply(({ TARGET_IP: _, ...receive }) => scriptProgram("image-receive", receive)),
                peer: {
                    connection: source.connection,
                    program: vars.apply(({ BIND_IP: _, SENDER_IP: __, ...send }) => scriptProgram("image-send", send)),
                },
                peerFiles: { peer: source.sshFiles, self: this.sshFiles },
            },
            { parent: this },
        );
    }
}

/**
 * Preflight across every node (image ids, model, GPUs for TP×PP, driver/CUDA), then the fit of the
 * model in each node's memory (infra/core/fit.ts; the plan is logged), then each node as the plan sees
 * it. Fails, naming node and fact or the numbers, before any container starts.
 */
export function planFleet(
    config: FleetConfig,
    nodes: readonly SparkNode[],
    synced: ReadonlyMap<string, pulumi.Output<ModelDirFacts>> = new Map(),
    parent?: pulumi.Resource,
): pulumi.Output<PlannedNode[]> {
    // A node that received the weights is judged by what is there after the sync.
    const current = nodes.map((node) => {
        const model = synced.get(node.nodeName);
        return model ? pulumi.all([node.facts, model]).apply(([facts, listing]) => ({ ...facts, model: { ...listing, configJson: facts.model.configJson } })) : node.facts;
    });
    return pulumi.all(current).apply((factsList) => {
        preflight(
            factsList.map((facts, index) => ({ name: nodes[index].nodeName, facts })),
            { image: config.image.name, imageSource: config.image.source, modelPath: config.model.path, modelSync: config.model.sync, gpusNeeded: gpusNeeded(config) },
        );
        const head = factsList[0];
        if (head.model.configJson) {
            const fit = planFit({
                model: parseModelConfig(head.model.configJson, `${config.model.path}/config.json on ${nodes[0].nodeName}`),
                modelName: config.model.servedName,
                weightBytes: safetensorsWeightBytes(head.model),
                tensorParallel: config.parallelism.tensor,
                pipelineParallel: config.parallelism.pipeline,
                nodes: factsList.map((facts, index) => fitNodeFromFacts(nodes[index].nodeName, facts)),
                gpuMemoryUtilization: config.vllm.gpuMemoryUtilization,
                maxModelLen: config.vllm.maxModelLen,
                kvCacheDtype: kvCacheDtypeFromArgs(config.vllm.extraArgs),
            });
            pulumi.log.info(describeFitPlan(fit), parent);
        }
        const planned = factsList.map((facts, index) => ({
            name: nodes[index].nodeName,
            fabric: findFabric(nodes[index].nodeName, facts, config.fabric.subnet),
            gpus: facts.gpus.length,
        }));
        for (const node of planned) {
            if (node.fabric.hcas.length > 0 && node.fabric.rdmaDevices.length === 0 && !config.container.privileged) {
                pulumi.log.warn(
                    `node ${node.name}: RoCE devices ${node.fabric.hcas.join(", ")} but no RDMA device nodes in /dev/infiniband: its NCCL will fall back to TCP sockets (load ib_uverbs and rdma_ucm)`,
                    parent,
                );
            }
        }
        return planned;
    });
}
