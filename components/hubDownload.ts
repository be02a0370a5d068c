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
import { ModelDirFacts, parseModelDir, splitSections } from "../infra/core/facts";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

/** The download (hub-download.sh), with what it uses. */
export const HUB_DOWNLOAD = ["model-list", "docker-state", "hub-download"];

/** The model directory a download step reports (its `model` and `model-config` sections). */
export function downloadedModel(stdout: string): ModelDirFacts {
    const sections = splitSections(stdout);
    return { ...parseModelDir(sections.get("model") ?? ""), configJson: sections.get("model-config") || undefined };
}

export interface HubDownloadArgs {
    /** The first node: the download happens there. */
    readonly node: NodeAccess;
    /** The repo, its commit, and the Hub's address (none: huggingface.co). */
    readonly hub: { readonly repo: string; readonly revision: string; readonly endpoint?: string };
    readonly modelPath: string;
    /** The serving image, which runs the download. */
    readonly image: string;
    /** The image's content identity on the node as delivery left it: the step runs that image, so it waits for it. */
    readonly imageIdentity: pulumi.Input<string>;
    /** The secret `vllm-fleet:hfToken`, when set (a gated or private repo). */
    readonly hfToken?: pulumi.Input<string>;
    readonly runner: CommandRunner;
}

/** The download of the model on the first node. */
export class HubDownload extends pulumi.ComponentResource {
    /** The model directory on the first node after the download. */
    public readonly model: pulumi.Output<ModelDirFacts>;
    /** `hub-present|hub-downloaded <repo>@<revision> ...`: what the step did. */
    public readonly summary: pulumi.Output<string>;

    constructor(name: string, args: HubDownloadArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:model:HubDownload", name, {}, opts);
        const { hub } = args;
        const token = pulumi.output(args.hfToken ?? "");
        const command = hostCommand(
            args.runner,
            `${name}-download`,
            {
                connection: args.node.connection,
                create: token.apply((value) =>
                    scriptProgram(HUB_DOWNLOAD, {
                        IMAGE: args.image,
                        MODEL_PATH: args.modelPath,
                        REPO: hub.repo,
                        REVISION: hub.revision,
                        HUB_ENDPOINT: hub.endpoint ?? "",
                        SECRET_ENV: value ? [`HF_TOKEN=${value}`] : [],
                    }),
                ),
                // Another commit, repo or Hub downloads again (into the same directory: what is there is
                // kept where it matches); so does a new image (it finds the marker).
                triggers: [hub.repo, hub.revision, hub.endpoint ?? "", args.modelPath, args.imageIdentity],
            },
            // The step was a child of the node before this component was: the same resource.
            { parent: this, aliases: opts?.parent ? [{ parent: opts.parent }] : [] },
        );
        this.summary = command.stdout.apply((stdout) => /^hub-(?:present|downloaded) .*$/m.exec(stdout)?.[0] ?? "");
        this.model = command.stdout.apply(downloadedModel);
        this.registerOutputs({ model: this.model, summary: this.summary });
    }
}
