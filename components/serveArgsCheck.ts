/**
 * The serve arguments checked by the vLLM inside the image (components/scripts/vllm-args-check.sh),
 * on the first node, before any Ray or vLLM container starts: a misspelled parser name or a flag
 * this vLLM does not have fails here with vLLM's own message and the config key, not minutes later
 * in a container that exits at start; so does the ray executor with an image without Ray. It runs
 * again when the image or the arguments change, and reports the image's vLLM and Ray versions.
 */
import * as pulumi from "@pulumi/pulumi";
import { ArgsCheckPlan } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

/** The check of the serve arguments (vllm-args-check.sh), with what it uses. */
export const ARGS_CHECK = ["docker-state", "vllm-args-check"];

/** The versions of vLLM and Ray in the image, as the check found them installed (`ray` is "none" without Ray). */
export interface ImageVersions {
    readonly vllm: string;
    readonly ray: string;
}

/** What the check printed on success: its verdict, why it could not judge, the image's versions. */
export interface ArgsCheckReport {
    readonly verdict: "accepted" | "unchecked";
    /** Why the image's vLLM could not judge the arguments here (unchecked). */
    readonly reason?: string;
    /** Absent when the check could not read them (the check of an older vllm-fleet, a Python that did not start). */
    readonly versions?: ImageVersions;
}

/** Parses the standard output of vllm-args-check.sh (a refusal fails the command: no output to parse). */
export function parseArgsCheck(stdout: string): ArgsCheckReport {
    const unchecked = /^unchecked: (.*)$/m.exec(stdout);
    const versions = /^versions vllm=(\S+) ray=(\S+)$/m.exec(stdout);
    return {
        verdict: unchecked ? "unchecked" : "accepted",
        ...(unchecked ? { reason: unchecked[1] } : {}),
        ...(versions ? { versions: { vllm: versions[1], ray: versions[2] } } : {}),
    };
}

/** The image's own PYTHONPATH from what image_pythonpath (image-identity.sh) printed ("" when it sets none). */
export function parseImagePythonPath(stdout: string): string {
    return /^pythonpath ?(.*)$/m.exec(stdout)?.[1].trim() ?? "";
}

export interface ServeArgsCheckArgs {
    /** The first node: the check runs there. */
    readonly node: NodeAccess;
    /** What to check, and the keys behind the flags (infra/core/plan); known once preflight passed. */
    readonly check: pulumi.Input<ArgsCheckPlan>;
    /**
     * The image's content identity on the node (image-identity.sh): another image is checked again (the
     * arguments are in the program); the same image moved to another image store is not.
     */
    readonly imageIdentity: pulumi.Input<string>;
    readonly runner: CommandRunner;
}

/** The check; what starts Ray or vLLM goes after it. */
export class ServeArgsCheck extends pulumi.ComponentResource {
    /** The step that runs the check. */
    public readonly check: pulumi.Resource;
    /** The image's vLLM and Ray versions (undefined when the check could not read them). */
    public readonly versions: pulumi.Output<ImageVersions | undefined>;
    /** The image's own PYTHONPATH ("" without one): what the key check's directory goes before (image_pythonpath, image-identity.sh). */
    public readonly imagePythonPath: pulumi.Output<string>;

    constructor(name: string, args: ServeArgsCheckArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:vllm:ServeArgsCheck", name, {}, opts);
        const command = hostCommand(
            args.runner,
            name,
            {
                connection: args.node.connection,
                create: pulumi.output(args.check).apply((check) =>
                    scriptProgram(ARGS_CHECK, {
                        IMAGE: check.image,
                        CONTAINER: check.container,
                        SERVE_ARGS: [...check.argv],
                        FLAG_KEYS: [...check.flagKeys],
                        TIMEOUT: check.timeoutSeconds,
                    }),
                ),
                triggers: [args.imageIdentity],
            },
            // The step was a child of the node before this component was: the same resource.
            { parent: this, aliases: opts?.parent ? [{ parent: opts.parent }] : [] },
        );
        const report = command.stdout.apply(parseArgsCheck);
        report.apply((found) => {
            if (found.verdict === "unchecked") {
                pulumi.log.warn(`the serve arguments were not checked with the image's vLLM: ${found.reason}`, this);
            }
        });
        this.check = command.resource;
        this.versions = report.apply((found) => found.versions);
        // A step of its own, run again only when the image changes: a change of the serve arguments
        // leaves it, so preview knows the serving containers' PYTHONPATH is the same, and a change of
        // max-model-len does not show (nor make) a new Ray head.
        const pythonPath = hostCommand(
            args.runner,
            `${name}-pythonpath`,
            {
                connection: args.node.connection,
                create: pulumi.output(args.check).apply((check) => `${scriptProgram("image-identity", { IMAGE: check.image })}\nimage_pythonpath "$IMAGE"`),
                triggers: [args.imageIdentity],
            },
            { parent: this },
        );
        this.imagePythonPath = pythonPath.stdout.apply(parseImagePythonPath);
        this.registerOutputs({ versions: this.versions, imagePythonPath: this.imagePythonPath });
    }
}
