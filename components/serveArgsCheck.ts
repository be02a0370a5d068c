/**
 * The serve arguments checked by the vLLM inside the image (components/scripts/vllm-args-check.sh),
 * on the first node, before any Ray or vLLM container starts: a misspelled parser name or a flag
 * this vLLM does not have fails here with vLLM's own message and the config key, not minutes later
 * in a container that exits at start. It runs again when the image or the arguments change.
 */
import * as pulumi from "@pulumi/pulumi";
import { FleetConfig } from "../infra/core/config";
import { hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { servingContainerOf } from "../infra/core/observe";
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

/** Registers the check on `head`; `argv` are the arguments of `vllm` on the first node (`serve` first). */
export function serveArgsCheck(
    name: string,
    config: FleetConfig,
    head: SparkNode,
    argv: pulumi.Input<string[]>,
    opts: pulumi.CustomResourceOptions,
): pulumi.Resource {
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
    check.stdout.apply((stdout) => {
        const unchecked = /^unchecked: (.*)$/m.exec(stdout);
        if (unchecked) {
            pulumi.log.warn(`the serve arguments were not checked with the image's vLLM: ${unchecked[1]}`);
        }
    });
    return check.resource;
}
