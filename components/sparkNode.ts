/**
 * One host of the fleet: how to reach it (SSH, and a Docker provider over SSH with the `docker`
 * container driver), and the image delivered to it before anything runs there. What the host *is*
 * (its facts) comes from the read at the start of every run (observer.ts) and flows through the plan
 * (infra/core/plan), not through this component.
 */
import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { parseImageName } from "../infra/core/image";
import { IMAGE_COPY_PORT } from "../infra/core/names";
import { ComponentError } from "./errors";
import { fabricSecret } from "./fabricSecret";
import { CommandRunner, hostCommand } from "./hostCommand";
import { readScript, scriptProgram } from "./shell";
import { SshConnection, SshFiles, materializeSshFiles, sshClientOptions } from "./ssh";

/** What the components that act on a node take from it. */
export interface NodeAccess {
    /** The node's name in the stack. */
    readonly nodeName: string;
    /** How commands reach the node. */
    readonly connection: SshConnection;
    /** The key and pinned host key of the node as files on this machine, for the system ssh client. */
    readonly sshFiles: pulumi.Output<SshFiles>;
    /** A Docker provider over SSH to the node (the `docker` container driver only). */
    readonly dockerProvider?: docker.Provider;
}

/** How the image arrives on a node before anything runs there (image.source). */
export type ImageSource =
    | {
          readonly image: string;
          readonly pull: true;
          /** The config key that names the image (`vllm-fleet:image.name`), for a failed pull's message. */
          readonly key: string;
      }
    | {
          readonly image: string;
          /** Streamed from this node over the fabric (node to node). */
          readonly copyFrom: NodeAccess;
          /** The content identity of the source node's image (image-identity.sh): what the copy must load here. */
          readonly wantIdentity: string | undefined;
          readonly sourceIp: string;
          readonly targetIp: string;
      };

/**
 * One image's delivery to a node: how it arrives, and the mark the step leaves once it is there
 * (components/scripts/image-mark.sh) with the step's revision. The revision is the step's trigger:
 * kept while the node has the image, new once it is gone, so that `up` delivers it again.
 */
export type ImageDelivery = ImageSource & {
    /** The mark's file, relative to the SSH user's home (infra/core/names.ts deliveryMark). */
    readonly mark: string;
    readonly revision: string;
};

export interface SparkNodeArgs {
    /** How to reach the node (ssh.ts): host, port, user, the key, the pinned host key, the connect timeout. */
    readonly connection: SshConnection;
    /** Where this machine keeps the node's ssh files (ssh.ts): by stack, or the key file when given as one. */
    readonly sshFiles: { readonly stack: string; readonly privateKeyPath?: string };
    readonly runner: CommandRunner;
    /** `docker`: a Docker provider over SSH for the node's containers. */
    readonly containerDriver: "docker" | "ssh";
    /**
     * The images to deliver before anything runs (one per image the node's services use, named by
     * the step that delivers it); an image not listed must be present already (preflight checks).
     */
    readonly images?: readonly { readonly step: string; readonly delivery: ImageDelivery }[];
}

/** The content identity a delivery step reports (`image-pulled|image-present|image-copied <image> <identity>`). */
export function deliveredImageIdentity(stdout: string): string | undefined {
    return /^image-(?:pulled|present|copied) \S+ (\S+)/m.exec(stdout)?.[1];
}

/** One host of the fleet. */
export class SparkNode extends pulumi.ComponentResource implements NodeAccess {
    public readonly nodeName: string;
    public readonly connection: SshConnection;
    public readonly sshFiles: pulumi.Output<SshFiles>;
    public readonly dockerProvider?: docker.Provider;
    /** The content identity each delivery step reports once it ran, by image name; an image not delivered is not listed. */
    public readonly deliveredImageIdentities: Readonly<Record<string, pulumi.Output<string | undefined>>>;

    constructor(name: string, args: SparkNodeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:node:SparkNode", name, {}, opts);
        this.nodeName = args.connection.node;
        this.connection = args.connection;
        this.sshFiles = materializeSshFiles(args.sshFiles.stack, this.connection, args.sshFiles.privateKeyPath);
        if (args.containerDriver === "docker") {
            // The same key and host-key rules as every other path to the node (ssh.ts).
            this.dockerProvider = new docker.Provider(
                `${name}-docker`,
                {
                    host: `ssh://${this.connection.user}@${this.connection.host}:${this.connection.port}`,
                    sshOpts: this.sshFiles.apply((files) => sshClientOptions(this.connection, files.keyFile, files.knownHostsFile)),
                },
                { parent: this },
            );
        }
        this.deliveredImageIdentities = Object.fromEntries(
            (args.images ?? []).map(({ step, delivery }) => [delivery.image, this.deliverImage(step, args.runner, delivery).stdout.apply(deliveredImageIdentity)]),
        );
        this.registerOutputs({ deliveredImageIdentities: this.deliveredImageIdentities });
    }

    /** Pulls the image (by its digest when pinned), or streams it from another node, before anything looks at it. */
    private deliverImage(step: string, runner: CommandRunner, delivery: ImageDelivery) {
        if ("pull" in delivery) {
            const pull = scriptProgram(["docker-state", "image-identity", "image-mark", "image-pull"], {
                IMAGE: delivery.image,
                DIGEST: parseImageName(delivery.image).digest ?? "",
                IMAGE_KEY: delivery.key,
                MARK: delivery.mark,
                REVISION: delivery.revision,
            });
            return hostCommand(runner, step, { connection: this.connection, create: pull, triggers: [delivery.revision], createBeforeReplace: true }, { parent: this });
        }
        // Node to node over the fabric: a short-lived receiver here (image-receive.sh) while the
        // source node streams `docker save` into it (image-send.sh), with a secret for this copy.
        // Only the two sessions' control and output pass through this machine.
        const source = delivery.copyFrom;
        if (!delivery.wantIdentity) {
            throw new ComponentError(
                `image.source copy: ${source.nodeName}, the node copied from, has no image ${delivery.image}; expected it there: pull or load it on ${source.nodeName}, ` +
                    `or set vllm-fleet:image.source to pull (every node pulls vllm-fleet:image.name)`,
                this,
            );
        }
        const secret = fabricSecret(this.connection.privateKey, `image ${this.nodeName} ${delivery.wantIdentity}`);
        const vars = secret.apply((key) => ({
            IMAGE: delivery.image,
            WANT_IDENTITY: delivery.wantIdentity!,
            PORT: IMAGE_COPY_PORT,
            SECRET: key,
            FABRIC_STREAM: readScript("fabric-stream.py"),
        }));
        return hostCommand(
            runner,
            step,
            {
                connection: this.connection,
                create: vars.apply((common) =>
                    scriptProgram(["image-identity", "image-mark", "image-receive"], {
                        ...common,
                        BIND_IP: delivery.targetIp,
                        SENDER_IP: delivery.sourceIp,
                        MARK: delivery.mark,
                        REVISION: delivery.revision,
                    }),
                ),
                peer: { connection: source.connection, program: vars.apply((common) => scriptProgram(["image-identity", "image-send"], { ...common, TARGET_IP: delivery.targetIp, IMAGE_LAYERS: readScript("image-layers.py") })) },
                peerFiles: { peer: source.sshFiles, self: this.sshFiles },
                triggers: [delivery.revision],
                // Delivered again: what takes the identity it reports is not replaced with it.
                createBeforeReplace: true,
            },
            { parent: this },
        );
    }
}
