/**
 * The model directory copied from the first node to another over the fabric (`model.sync: rsync`),
 * resumable, before preflight compares the directories. One per receiving node, none waiting for
 * another's: on the receiving node a bulk receiver and an rsync daemon, bound to its fabric address,
 * writable by the first node only with a secret for this node (weights-receive.sh); the first node
 * finds the files that differ with rsync's quick check, sends them in up to WEIGHT_STREAMS plain
 * streams at once, and lets one rsync pass do the rest (weights-send.sh); the receivers stop and
 * the directory is listed again (weights-close.sh). Runs again when the first node's model
 * directory changes.
 */
import * as pulumi from "@pulumi/pulumi";
import { ModelDirFacts, parseModelDir, splitSections } from "../infra/core/facts";
import { CopyPlan } from "../infra/core/plan";
import { RSYNC_PORT, WEIGHT_FILES_PORT } from "../infra/core/names";
import { fabricSecret } from "./fabricSecret";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { readScript, scriptProgram } from "./shell";

/** The programs that start the receivers of a weight sync, and that end it (and list the directory). */
export const WEIGHTS_RECEIVE = ["weights-stop", "weights-receive"];
export const WEIGHTS_CLOSE = ["model-list", "weights-stop", "weights-close"];

/** How many plain streams carry the files that differ at once (weights-send.sh). */
export const WEIGHT_STREAMS = 4;

export interface WeightSyncArgs {
    /** The first node, which has the model directory, and the node that receives it. */
    readonly source: NodeAccess;
    readonly target: NodeAccess;
    /** Who sends to whom over which fabric addresses (infra/core/plan). */
    readonly copy: CopyPlan;
    readonly modelPath: string;
    /** The first node's model directory (its listing): a new one syncs again. */
    readonly sourceModel: pulumi.Input<string>;
    readonly runner: CommandRunner;
}

/** The sync of the model directory to one node. */
export class WeightSync extends pulumi.ComponentResource {
    /** The model directory on the receiving node as the sync left it. */
    public readonly model: pulumi.Output<ModelDirFacts>;

    constructor(name: string, args: WeightSyncArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:model:WeightSync", name, {}, opts);
        const { source, target, copy, modelPath, runner } = args;
        // The steps were children of the receiving node before this component was: the same resources.
        const child = { parent: this, aliases: opts?.parent ? [{ parent: opts.parent }] : [] };
        const common = { MODEL_PATH: modelPath, PORT: RSYNC_PORT, FILES_PORT: WEIGHT_FILES_PORT, FABRIC_STREAM: readScript("fabric-stream.py") };
        const secret = fabricSecret(target.connection.privateKey, `weights ${target.nodeName}`);
        const receive = hostCommand(
            runner,
            `${name}-receive`,
            {
                connection: target.connection,
                create: secret.apply((key) => scriptProgram(WEIGHTS_RECEIVE, { ...common, BIND_IP: copy.targetIp, SENDER_IP: copy.sourceIp, SECRET: key })),
                delete: scriptProgram(WEIGHTS_CLOSE, { MODEL_PATH: modelPath, PORT: RSYNC_PORT }),
                triggers: [args.sourceModel],
            },
            child,
        );
        const send = hostCommand(
            runner,
            `${name}-send`,
            {
                connection: source.connection,
                create: secret.apply((key) => scriptProgram("weights-send", { ...common, TARGET_IP: copy.targetIp, SECRET: key, STREAMS: WEIGHT_STREAMS })),
                triggers: [args.sourceModel],
            },
            { ...child, dependsOn: [receive.resource] },
        );
        const close = hostCommand(
            runner,
            `${name}-close`,
            {
                connection: target.connection,
                create: scriptProgram(WEIGHTS_CLOSE, { MODEL_PATH: modelPath, PORT: RSYNC_PORT }),
                triggers: [send.stdout],
            },
            { ...child, dependsOn: [send.resource] },
        );
        this.model = close.stdout.apply((stdout) => parseModelDir(splitSections(stdout).get("model") ?? ""));
        this.registerOutputs({ model: this.model });
    }
}
