/**
 * The model from the Hugging Face Hub (`model.source: hub`): downloaded once, on the first node, into
 * `model.path`, by the huggingface_hub inside the serving image (components/scripts/hub-download.sh,
 * a throw-away container like the serve-argument check's); the weight sync then copies it to the
 * other nodes over the fabric.
 *
 * The step is a host command, so it runs on `up` only, never at preview, and again only when the
 * repo, the commit, the Hub's address, the image or the token change; even then it starts no
 * container when the directory already holds that commit (its marker). The token reaches the
 * container through the environment, never a command line.
 */
import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/core/config";
import { ModelDirFacts, NodeFacts, parseModelDir, splitSections } from "../infra/core/facts";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { scriptProgram } from "./shell";

/** The model directory a download step reports (its `model` and `model-config` sections). */
export function downloadedModel(stdout: string): ModelDirFacts {
    const sections = splitSections(stdout);
    return { ...parseModelDir(sections.get("model") ?? ""), configJson: sections.get("model-config") || undefined };
}

/** The download step on `head` and the first node's model directory as it left it. */
export interface HubDownload {
    readonly resource: pulumi.Resource;
    /** The model directory on the first node after the download. */
    readonly model: pulumi.Output<ModelDirFacts>;
    /** `hub-present|hub-downloaded <repo>@<revision> ...`: what the step did. */
    readonly summary: pulumi.Output<string>;
}

/**
 * Registers the download of `config.model.hub` on `head` (the first node). `hfToken` is the secret
 * `vllm-fleet:hfToken`, when set.
 */
export function hubDownload(config: FleetConfig, head: SparkNode, hfToken: pulumi.Output<string> | undefined, opts: pulumi.CustomResourceOptions): HubDownload {
    const hub = config.model.hub;
    if (!hub) {
        throw new Error("hubDownload: model.source is not hub");
    }
    const token = hfToken ?? pulumi.output("");
    const command = hostCommand(
        config.commandRunner,
        `${head.nodeName}-hub-download`,
        {
            connection: head.connection,
            create: token.apply((value) =>
                scriptProgram(["model-list", "docker-state", "hub-download"], {
                    IMAGE: config.image.name,
                    MODEL_PATH: config.model.path,
                    REPO: hub.repo,
                    REVISION: hub.revision,
                    HUB_ENDPOINT: hub.endpoint ?? "",
                    SECRET_ENV: value ? [`HF_TOKEN=${value}`] : [],
                }),
            ),
            // Another commit, repo or Hub downloads again (into the same directory: what is there is kept
            // where it matches). The image's id, as the first node has it after a pull or copy: the
            // step runs that image, so it waits for its delivery (a new image finds the marker).
            triggers: [hub.repo, hub.revision, hub.endpoint ?? "", config.model.path, head.facts.apply((facts) => facts.imageId ?? "")],
        },
        opts,
    );
    const summary = command.stdout.apply((stdout) => /^hub-(?:present|downloaded) .*$/m.exec(stdout)?.[0] ?? "");
    return { resource: command.resource, model: command.stdout.apply(downloadedModel), summary };
}

/**
 * `node` as the steps after the download see it: its facts with the model directory the download
 * left (the read at the start of the run saw it before). A view, not a new node: everything else is
 * the node's own.
 */
export function withModel(node: SparkNode, model: pulumi.Output<ModelDirFacts>): SparkNode {
    const facts: pulumi.Output<NodeFacts> = pulumi.all([node.facts, model]).apply(([own, listing]) => ({ ...own, model: listing }));
    const view = Object.create(node) as SparkNode;
    Object.defineProperty(view, "facts", { value: facts, enumerable: true });
    return view;
}
