import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/core/config";
import { ModelDirFacts, parseModelDir, splitSections } from "../infra/core/facts";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { readScript, scriptProgram } from "./shell";

/** The port of the short-lived rsync daemon on a receiving node (fabric address only). */
export const RSYNC_PORT = 28730;

/** The port of the short-lived bulk receiver on a receiving node (fabric address only). */
export const WEIGHT_FILES_PORT = 28732;

/** The programs that start the receivers of a weight sync, and that end it (and list the directory). */
export const WEIGHTS_RECEIVE = ["weights-stop", "weights-receive"];
export const WEIGHTS_CLOSE = ["model-list", "weights-stop", "weights-close"];

/** How many plain streams carry the files that differ at once (weights-send.sh). */
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
 * Copies the model directory from the first node to every other node over the fabric (resumable),
 * before preflight compares the directories, to every receiving node at once (one chain of steps
 * per node, none waiting for another's). On each receiving node: a bulk receiver and an rsync
 * daemon, bound to its fabric address, writable by the first node only with a per-node secret
 * (weights-receive.sh); the first node finds the files that differ with rsync's quick check, sends
 * them in up to WEIGHT_STREAMS plain streams at once, and lets one rsync pass do the rest
 * (weights-send.sh); the receivers stop and the directory is listed again. Runs again when the
 * first node's model directory changes.
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
    const common = { MODEL_PATH: config.model.path, PORT: RSYNC_PORT, FILES_PORT: WEIGHT_FILES_PORT, FABRIC_STREAM: readScript("fabric-stream.py") };
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
                    scriptProgram(WEIGHTS_RECEIVE, { ...common, BIND_IP: to.ip, SENDER_IP: from.ip, SECRET: key }),
                ),
                delete: scriptProgram(WEIGHTS_CLOSE, { MODEL_PATH: config.model.path, PORT: RSYNC_PORT }),
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
                    scriptProgram("weights-send", { ...common, TARGET_IP: to.ip, SECRET: key, STREAMS: WEIGHT_STREAMS }),
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
                create: scriptProgram(WEIGHTS_CLOSE, { MODEL_PATH: config.model.path, PORT: RSYNC_PORT }),
                triggers: [send.stdout],
            },
            { ...options, dependsOn: [send.resource] },
        );
        synced.set(target.nodeName, close.stdout.apply((stdout) => parseModelDir(splitSections(stdout).get("model") ?? "")));
    }
    return synced;
}
