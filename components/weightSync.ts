import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/config";
import { ModelDirFacts, parseModelDir, splitSections } from "../infra/facts";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { scriptProgram } from "./shell";

/** The port of the short-lived rsync daemon on a receiving node (fabric address only). */
export const RSYNC_PORT = 28730;

/** How many rsync processes send disjoint sets of the model's files at once (weights-send.sh). */
export const WEIGHT_STREAMS = 4;

/**
 * The secret of one copy between two nodes over the fabric (the weights' rsync daemon, the image
 * receiver): derived from the SSH key and `purpose`, not random, so the same on every run (no
 * spurious diff) and unknowable without the key. A purpose naming what is copied (the image id)
 * makes a secret per copy.
 */
export function fabricSecret(privateKey: pulumi.Input<string>, purpose: pulumi.Input<string>): pulumi.Output<string> {
    return pulumi.secret(
        pulumi.all([privateKey, purpose]).apply(([key, what]) => crypto.createHash("sha256").update(`vllm-fleet ${what}\n${key}`).digest("hex").slice(0, 32)),
    );
}

/**
 * Copies the model directory from the first node to every other node over the fabric (rsync,
 * resumable), before preflight compares the directories, to every receiving node at once (one
 * chain of steps per node, none waiting for another's). On each receiving node: an rsync daemon
 * bound to its fabric address, writable by the first node only with a per-node secret; the first
 * node pushes, in up to WEIGHT_STREAMS rsync processes over disjoint sets of files at once; the
 * daemon stops and the directory is listed again. Runs again when the first node's model directory
 * changes.
 *
 * Returns, by node name, the model directory as it is after the sync.
 */
export function syncWeights(
    config: FleetConfig,
    nodes: readonly SparkNode[],
    privateKey: pulumi.Output<string>,
    parent: pulumi.Resource | undefined,
): Map<string, pulumi.Output<ModelDirFacts>> {
    const synced = new Map<string, pulumi.Output<ModelDirFacts>>();
    const [source, ...targets] = nodes;
    if (!source) {
        return synced;
    }
    const sourceModel = source.facts.apply((facts) => JSON.stringify({ files: facts.model.files, config: facts.model.configSha256 }));
    for (const target of targets) {
        const secret = fabricSecret(privateKey, `weights ${target.nodeName}`);
        const addresses = pulumi.all([source.fabric, target.fabric]);
        const options = { parent: parent ?? target };
        const receive = hostCommand(
            config.commandRunner,
            `${target.nodeName}-weights-receive`,
            {
                connection: target.connection,
                create: pulumi.all([addresses, secret]).apply(([[from, to], key]) =>
                    scriptProgram("weights-receive", { MODEL_PATH: config.model.path, BIND_IP: to.ip, SENDER_IP: from.ip, PORT: RSYNC_PORT, SECRET: key }),
                ),
                delete: scriptProgram(["model-list", "weights-close"], { MODEL_PATH: config.model.path, PORT: RSYNC_PORT }),
                triggers: [sourceModel],
            },
            options,
        );
        const send = hostCommand(
            config.commandRunner,
            `${target.nodeName}-weights-send`,
            {
                connection: source.connection,
                create: pulumi.all([addresses, secret]).apply(([[, to], key]) =>
                    scriptProgram("weights-send", { MODEL_PATH: config.model.path, TARGET_IP: to.ip, PORT: RSYNC_PORT, SECRET: key, STREAMS: WEIGHT_STREAMS }),
                ),
                triggers: [sourceModel],
            },
            { ...options, dependsOn: [receive.resource] },
        );
        const close = hostCommand(
            config.commandRunner,
            `${target.nodeName}-weights-close`,
            {
                connection: target.connection,
                create: scriptProgram(["model-list", "weights-close"], { MODEL_PATH: config.model.path, PORT: RSYNC_PORT }),
                triggers: [send.stdout],
            },
            { ...options, dependsOn: [send.resource] },
        );
        synced.set(target.nodeName, close.stdout.apply((stdout) => parseModelDir(splitSections(stdout).get("model") ?? "")));
    }
    return synced;
}
