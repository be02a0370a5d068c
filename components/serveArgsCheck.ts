/**
 * The serve arguments checked by the vLLM inside the image (components/scripts/vllm-args-check.sh),
 * on the first node, before any Ray or vLLM container starts: a misspelled parser name or a flag
 * this vLLM does not have fails here with vLLM's own message and the config key, not minutes later
 * in a container that exits at start; so does the ray executor with an image without Ray. It runs
 * again when the image or the arguments change, and reports the image's vLLM and Ray versions.
 */
import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/config";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { servingContainerOf } from "../infra/observe";
import { scriptProgram } from "./shell";

/** The check of the serve arguments (vllm-args-check.sh), with what it uses. */
export const ARGS_CHECK = ["docker-state", "vllm-args-check"];

/** The flags vllm-fleet writes from config keys, and the words vLLM's refusals use for them. */
const FLAG_KEYS: readonly (readonly [string, string])[] = [
    ["--reasoning-parser", "vllm.reasoningParser"],
    ["reasoning parser", "vllm.reasoningParser"],
    ["--tool-call-parser", "vllm.toolCallParser"],
    ["tool call parser", "vllm.toolCallParser"],
    ["--enable-auto-tool-choice", "vllm.enableAutoToolChoice"],
    ["--max-model-len", "vllm.maxModelLen"],
    ["--gpu-memory-utilization", "vllm.gpuMemoryUtilization"],
    ["--tensor-parallel-size", "parallelism.tensor"],
    ["--pipeline-parallel-size", "parallelism.pipeline"],
    ["--distributed-executor-backend", "executor"],
    ["--served-model-name", "model.servedName"],
    ["--trust-remote-code", "vllm.trustRemoteCode"],
];

/** `<text>|<key>` pairs for the check: the fixed flags, and each flag of `vllm.extraArgs`. */
export function flagKeys(config: FleetConfig): string[] {
    const extra = config.vllm.extraArgs
        .filter((arg) => arg.startsWith("-"))
        .map((arg) => arg.split("=")[0])
        .map((flag) => `${flag}|vllm.extraArgs`);
    return [...FLAG_KEYS.map(([text, key]) => `${text}|${key}`), ...extra];
}

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

/** The check on the first node: the resource that gates the starts, and what it found. */
export interface ServeArgsCheck {
    readonly resource: pulumi.Resource;
    /** The image's vLLM and Ray versions (undefined when the check could not read them). */
    readonly versions: pulumi.Output<ImageVersions | undefined>;
}

/** Registers the check on `head`; `argv` are the arguments of `vllm` on the first node (`serve` first). */
export function serveArgsCheck(
    name: string,
    config: FleetConfig,
    head: SparkNode,
    argv: pulumi.Input<string[]>,
    opts: pulumi.CustomResourceOptions,
): ServeArgsCheck {
    const check = hostCommand(
        config.commandRunner,
        name,
        {
            connection: head.connection,
            create: pulumi.output(argv).apply((args) =>
                scriptProgram(ARGS_CHECK, {
                    IMAGE: config.image.name,
                    CONTAINER: servingContainerOf(config),
                    SERVE_ARGS: args,
                    FLAG_KEYS: flagKeys(config),
                    TIMEOUT: 600,
                }),
            ),
            // The image's id, so a new image is checked again (the arguments are in the program).
            triggers: [head.facts.apply((facts) => facts.imageId ?? "")],
        },
        opts,
    );
    const report = check.stdout.apply((stdout) => parseArgsCheck(stdout));
    report.apply((found) => {
        if (found.verdict === "unchecked") {
            pulumi.log.warn(`the serve arguments were not checked with the image's vLLM: ${found.reason}`);
        }
    });
    return { resource: check.resource, versions: report.apply((found) => found.versions) };
}
