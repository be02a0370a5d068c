import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { FleetNode } from "../infra/config";
import { FabricFacts, NodeFacts, findFabric, parseProbeOutput } from "../infra/facts";
import { CommandRunner, SshConnection, hostCommand } from "./hostCommand";
import { bashCommand, scriptProgram } from "./shell";

export interface SparkNodeArgs {
    readonly node: FleetNode;
    /** The SSH private key (a secret). */
    readonly privateKey: pulumi.Input<string>;
    /** A key file for the Docker provider's ssh:// connection (docker driver only). */
    readonly privateKeyPath?: string;
    readonly connectTimeoutSeconds: number;
    readonly runner: CommandRunner;
    readonly containerDriver: "docker" | "ssh";
    /** The image whose id the probe reports. */
    readonly image: string;
    /** The model directory the probe inspects. */
    readonly modelPath: string;
    /** The fabric subnet: the node's interface with an address in it is its fabric interface. */
    readonly fabricSubnet: string;
}

/**
 * One host of the fleet: how to reach it and what it is. The probe runs once when the node is
 * added (and again when the image or model path changes); it only reads.
 */
export class SparkNode extends pulumi.ComponentResource {
    /** The node's name in the stack. */
    public readonly nodeName: string;
    /** How commands reach this node. */
    public readonly connection: SshConnection;
    /** Everything the probe found: GPUs, driver/CUDA, memory, interfaces, HCAs, Docker, image, model. */
    public readonly facts: pulumi.Output<NodeFacts>;
    /** The fabric interface, its address and the RoCE devices (from the probe, never guessed). */
    public readonly fabric: pulumi.Output<FabricFacts>;
    /** A Docker provider over SSH to this node (the `docker` container driver only). */
    public readonly dockerProvider?: docker.Provider;

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
        const probe = hostCommand(
            args.runner,
            `${name}-probe`,
            {
                connection: this.connection,
                create: bashCommand(scriptProgram("probe", { IMAGE: args.image, MODEL_PATH: args.modelPath })),
            },
            { parent: this },
        );
        this.facts = probe.stdout.apply(parseProbeOutput);
        this.fabric = this.facts.apply((facts) => findFabric(args.node.name, facts, args.fabricSubnet));
        if (args.containerDriver === "docker") {
            this.dockerProvider = new docker.Provider(
                `${name}-docker`,
                {
                    host: `ssh://${args.node.user}@${args.node.host}:${args.node.port}`,
                    sshOpts: [
                        "-o", "BatchMode=yes",
                        "-o", `ConnectTimeout=${args.connectTimeoutSeconds}`,
                        ...(args.privateKeyPath ? ["-i", args.privateKeyPath, "-o", "IdentitiesOnly=yes"] : []),
                    ],
                },
                { parent: this },
            );
        }
        this.registerOutputs({ facts: this.facts, fabric: this.fabric });
    }
}
