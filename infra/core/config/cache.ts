/**
 * The schema of `vllm-fleet:cache`: where each node keeps the compile caches of the serving
 * containers (vLLM's torch.compile cache, Triton, TorchInductor, FlashInfer and CUDA JIT caches), so
 * that a new container starts warm, and whether `pulumi destroy` removes them. Pure.
 */
import { z } from "zod";
import { CrossKeyIssue } from "./ports";
import { ABSOLUTE_PATH, normalizeAbsolutePath, reservedPlace } from "./model";

/** The default directory on every node (below it: `<stack>/<image key>`). */
export const DEFAULT_CACHE_DIR = "/var/cache/vllm-fleet";

const CACHE_DEFAULTS = { enabled: true, dir: DEFAULT_CACHE_DIR, removeOnDestroy: false };

/**
 * Why `value` (an absolute path) cannot be a directory the fleet's containers mount and write (the
 * compile caches, Prometheus's data: `writer` says who writes it), or undefined when it can.
 */
export function ownDirectoryProblem(value: string, writer: string): string | undefined {
    // Docker's bind mount (`--volume source:target`, the Docker provider's binds) splits at ':'.
    if (ABSOLUTE_PATH.test(value) && (value.includes(":") || value.includes(","))) {
        return "a directory whose path has no ':' or ',' (Docker's mount syntax splits there)";
    }
    const place = reservedPlace(value);
    if (!place) {
        return undefined;
    }
    return place.kind === "kernel" ? `a directory on disk, not ${place.text}` : `a directory of its own, not ${place.text} (it is written by ${writer})`;
}

const cacheDirProblem = (value: string) => ownDirectoryProblem(value, "the serving containers");

export const cacheSchema = z
    .strictObject({
        /** Mount a cache directory of the node into the serving containers (false: caches live and die with each container). */
        enabled: z.boolean().default(CACHE_DEFAULTS.enabled),
        /** The directory on every node; this stack's caches go to `<dir>/<stack>/<image key>`. */
        dir: z
            .string()
            .regex(ABSOLUTE_PATH, "an absolute path on every node, such as /var/cache/vllm-fleet")
            .superRefine((value, context) => {
                const problem = cacheDirProblem(value);
                if (problem) {
                    context.addIssue({ code: "custom", message: problem });
                }
            })
            .default(CACHE_DEFAULTS.dir),
        /** `pulumi destroy` removes this stack's caches on every node (`<dir>/<stack>`); default: they stay. */
        removeOnDestroy: z.boolean().default(CACHE_DEFAULTS.removeOnDestroy),
    })
    .transform((cache) => ({ ...cache, dir: normalizeAbsolutePath(cache.dir) }))
    .default(CACHE_DEFAULTS);

const within = (inner: string, outer: string) => inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);

/**
 * The cache directory across a model path (`model.path`, or a service's at `modelKey`): neither inside
 * the other (the model directory is mounted read-only and compared across nodes; removing the caches
 * must never remove weights).
 */
export function cacheIssues(cache: { readonly enabled: boolean; readonly dir: string }, modelPath: string, modelKey = "model.path"): CrossKeyIssue[] {
    // A directory refused on its own (cacheDirProblem) is not compared.
    if (!cache.enabled || !ABSOLUTE_PATH.test(cache.dir) || cacheDirProblem(cache.dir) || !ABSOLUTE_PATH.test(modelPath)) {
        return [];
    }
    const dir = normalizeAbsolutePath(cache.dir);
    const model = normalizeAbsolutePath(modelPath);
    // A model path in a reserved place is refused on its own (model.ts).
    if (reservedPlace(model)) {
        return [];
    }
    if (within(dir, model) || within(model, dir)) {
        return [
            {
                path: ["cache", "dir"],
                value: cache.dir,
                expected: `a directory apart from vllm-fleet:${modelKey} (${model}): neither inside the other`,
            },
        ];
    }
    return [];
}
