/**
 * The schemas of the keys a service is made of (its image, executor, parallelism, vLLM and Ray
 * settings), shared by the single-model form (the top-level keys) and by each entry of `services`,
 * and the node a stack names. Pure.
 */
import { z } from "zod";
import { imageDigestProblem, parseImageName } from "../image";
import { managedFlagExpectation, managedVllmFlag } from "./vllmFlags";

/** A node's or a service's name: lowercase letters, digits and '-', at most 32. */
export const NAME = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;
// An image reference: [registry[:port]/]repo[:tag][@digest]; no whitespace or shell syntax. The
// digest's own form is checked apart (imageDigestProblem), to say what a digest pin looks like.
const IMAGE_REF = /^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[A-Za-z0-9:+._-]*)?$/;
// A parser name as vLLM spells them (qwen3, qwen3_coder, deepseek_r1, ...).
const PARSER = /^[A-Za-z0-9_.-]{1,64}$/;

/** One host of the fleet, with the SSH settings resolved. */
export interface FleetNode {
    readonly name: string;
    readonly host: string;
    readonly user: string;
    readonly port: number;
    readonly hostKey?: string;
}

/** The tag form of a pinned name, for a message: `repo:tag`, or `repo:<tag>` when it has none. */
function tagged(name: string): string {
    const parsed = parseImageName(name);
    return `${parsed.repository}:${parsed.tag ?? "<tag>"}`;
}

/** An image reference: a tag (`repo:tag`) or a pin by registry digest (`repo@sha256:...`, `repo:tag@sha256:...`). */
export const imageNameSchema = z
    .string()
    .regex(IMAGE_REF, "a Docker image reference such as nvcr.io/nvidia/vllm:25.11-py3 (or pinned: nvcr.io/nvidia/vllm@sha256:<64 hex>)")
    .superRefine((value, context) => {
        const problem = IMAGE_REF.test(value) ? imageDigestProblem(value) : undefined;
        if (problem) {
            context.addIssue({ code: "custom", message: problem });
        }
    });

export const imageSchema = z
    .strictObject({
        /** A tag (`repo:tag`) or a pin by registry digest (`repo@sha256:...`, `repo:tag@sha256:...`). */
        name: imageNameSchema,
        /**
         * How the image gets onto the nodes: `present` (already there; preflight checks), `pull` (docker
         * pull on every node), `copy` (docker save on the first node, docker load on the others over the
         * fabric, skipped where the content already matches).
         */
        source: z.enum(["present", "pull", "copy"]).default("present"),
    })
    .superRefine((image, context) => {
        // docker save/load carries tags, never registry digests: a node that loaded the copy would
        // not find the image by `repo@sha256:...` (Docker would go and pull it).
        if (image.source === "copy" && image.name.includes("@") && !imageDigestProblem(image.name)) {
            context.addIssue({
                code: "custom",
                path: ["source"],
                message: `pull with a name pinned by digest (${image.name}): copy moves the image by docker save/load, which keeps tags but not registry digests, so the other nodes would not find it by that name; or copy with a tag (${tagged(image.name)})`,
            });
        }
    });

export const executorSchema = z.enum(["ray", "mp"]).default("ray");

export const parallelismSchema = z
    .strictObject({
        tensor: z.number().int().min(1).max(64).optional(),
        pipeline: z.number().int().min(1).max(64).default(1),
    })
    .default({ pipeline: 1 });

/** What vllm.apiKey takes. */
export const API_KEY_NONE_EXPECTED =
    'none, to serve without a key (a key of your own is the secret vllm-fleet:vllmApiKey: pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"; without either the stack makes one)';

/** vLLM's --gpu-memory-utilization: a fraction of the node's whole memory. */
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;
const gpuMemoryUtilizationSchema = z.number().gt(0, "a fraction in (0, 1], e.g. 0.9").max(1, "a fraction in (0, 1], e.g. 0.9");

/** The vLLM settings of a service but its memory share (and the stack's API key). */
const vllmFields = {
    port: z.number().int().min(1).max(65535).default(8000),
    /** Where the API listens on the first node: `all` its addresses, or only its `fabric` address. */
    host: z.enum(["all", "fabric"]).default("all"),
    maxModelLen: z.number().int().min(16).max(10_000_000).optional(),
    reasoningParser: z.string().regex(PARSER, "a vLLM reasoning parser name such as qwen3").optional(),
    toolCallParser: z.string().regex(PARSER, "a vLLM tool-call parser name such as qwen3_coder").optional(),
    enableAutoToolChoice: z.boolean().default(false),
    trustRemoteCode: z.boolean().default(false),
    extraArgs: z
        .array(z.string().regex(/^[^\0\n\r]*$/, "one argument without newlines"))
        .superRefine((args, context) => {
            args.forEach((arg, index) => {
                const managed = managedVllmFlag(arg);
                if (managed) {
                    context.addIssue({ code: "custom", path: [index], message: managedFlagExpectation(managed) });
                }
            });
        })
        .default([]),
    /** Rendezvous port of rank 0 with the `mp` executor (vLLM's --master-port). */
    masterPort: z.number().int().min(1).max(65535).default(29501),
};
const VLLM_DEFAULTS = { port: 8000, host: "all" as const, enableAutoToolChoice: false, trustRemoteCode: false, extraArgs: [], masterPort: 29501 };

/** The top-level `vllm` of the single-model form. */
export const vllmSchema = z
    .strictObject({
        ...vllmFields,
        gpuMemoryUtilization: gpuMemoryUtilizationSchema.default(DEFAULT_GPU_MEMORY_UTILIZATION),
        /**
         * `none` serves the API without a key. Otherwise the key is the secret vllm-fleet:vllmApiKey,
         * or, when that is not set, one the stack makes and keeps (the stack output `apiKey`).
         */
        apiKey: z.literal("none").optional(),
    })
    .default({ ...VLLM_DEFAULTS, gpuMemoryUtilization: DEFAULT_GPU_MEMORY_UTILIZATION });

/**
 * The `vllm` of an entry of `services`: no API key (the stack has one), and a memory share that,
 * unset, the planner chooses.
 */
export const serviceVllmSchema = z
    .strictObject({
        ...vllmFields,
        gpuMemoryUtilization: gpuMemoryUtilizationSchema.optional(),
    })
    .default(VLLM_DEFAULTS);

export const raySchema = z
    .strictObject({
        port: z.number().int().min(1).max(65535).default(6379),
    })
    .default({ port: 6379 });
