/**
 * The compile caches of the serving containers, kept on each node so that they outlive the
 * containers: a container that `up`, a fault repair or a change replaces starts with the kernels and
 * graphs its predecessor compiled. Each library is pointed at its own directory under one mount,
 * by the variable it reads (from their sources):
 *
 * | variable | read by | default without it |
 * |---|---|---|
 * | `VLLM_CACHE_ROOT` | vLLM (vllm/envs.py): `torch_compile_cache/<hash>/rank_<r>_<dp>/` | `~/.cache/vllm` |
 * | `TORCHINDUCTOR_CACHE_DIR` | TorchInductor (torch/_inductor/runtime/cache_dir_utils.py) | `/tmp/torchinductor_<user>` |
 * | `TRITON_CACHE_DIR` | Triton's kernel cache (triton/runtime/cache.py) | `~/.triton/cache` |
 * | `FLASHINFER_WORKSPACE_BASE` | FlashInfer's JIT (flashinfer/jit/env.py): `<base>/.cache/flashinfer/` | `~` |
 * | `CUDA_CACHE_PATH` | the CUDA driver's PTX JIT cache | `~/.nv/ComputeCache` |
 *
 * The host directory is `<cache.dir>/<stack>/<key>`, the key made from the image's content identity
 * (components/scripts/image-identity.sh: the same on Docker's classic and containerd image stores,
 * unlike Docker's image id), so that another image (another vLLM, torch, Triton or FlashInfer) never
 * reads what this one compiled, and one image shares its cache whatever store a node keeps it in. Pure.
 */
import { FleetConfig } from "../config";
import { ContainerSpec } from "../containerSpec";
import { FleetError } from "../errors";

/** Where the node's cache directory is mounted in every serving container. */
export const CONTAINER_CACHE_DIR = "/vllm-fleet-cache";

/** The variables that point each library at its directory under {@link CONTAINER_CACHE_DIR}. */
export const CACHE_ENV: Readonly<Record<string, string>> = {
    VLLM_CACHE_ROOT: `${CONTAINER_CACHE_DIR}/vllm`,
    TORCHINDUCTOR_CACHE_DIR: `${CONTAINER_CACHE_DIR}/inductor`,
    TRITON_CACHE_DIR: `${CONTAINER_CACHE_DIR}/triton`,
    FLASHINFER_WORKSPACE_BASE: `${CONTAINER_CACHE_DIR}/flashinfer`,
    CUDA_CACHE_PATH: `${CONTAINER_CACHE_DIR}/cuda`,
};

/** The caches of a stack on its nodes (config `cache`, enabled). */
export interface CachePlan {
    /** `<cache.dir>/<stack>` on every node: one directory per image below it. */
    readonly stackDir: string;
    /** Whether `pulumi destroy` removes {@link stackDir} on every node. */
    readonly removeOnDestroy: boolean;
    /** The serving image: the removal runs `rm` in it as root, since the containers write as root. */
    readonly image: string;
}

// The characters Pulumi allows in a stack name.
const STACK_NAME = /^[A-Za-z0-9_.-]+$/;

/** The caches of the stack, or undefined with `cache.enabled: false`. */
export function planCache(config: Pick<FleetConfig, "cache" | "image">, stack: string): CachePlan | undefined {
    if (!config.cache.enabled) {
        return undefined;
    }
    return { stackDir: stackDirectory(config.cache.dir, stack, "cache.dir"), removeOnDestroy: config.cache.removeOnDestroy, image: config.image.name };
}

/**
 * The stack's own directory below `dir` (an absolute path the key `key` gives): `<dir>/<stack>`.
 * Throws when the stack's name cannot name a directory there.
 */
export function stackDirectory(dir: string, stack: string, key: string): string {
    if (!STACK_NAME.test(stack) || stack === "." || stack === "..") {
        throw new FleetError(`the stack name ${JSON.stringify(stack)} cannot name a directory under vllm-fleet:${key}; expected letters, digits, '-', '_' and '.'`);
    }
    return `${dir === "/" ? "" : dir}/${stack}`;
}

/**
 * The directory name of an image's caches: the first 16 hex digits of its content identity
 * (`sha256:<64 hex>`, as image-identity.sh gives it), so another image, even under the same tag,
 * gets a cold cache.
 */
export function cacheKey(imageIdentity: string): string {
    const match = /^(?:sha256:)?([0-9a-f]{64})$/.exec(imageIdentity.trim());
    if (!match) {
        throw new FleetError(`the image's content identity ${JSON.stringify(imageIdentity)} is not sha256:<64 hex>; the compile cache is keyed by it`);
    }
    return `image-${match[1].slice(0, 16)}`;
}

/**
 * `spec` with the node's cache directory for `imageIdentity` mounted (read-write) at
 * {@link CONTAINER_CACHE_DIR} and every library pointed into it; `spec` unchanged without a cache.
 * Docker creates the host directory (as root) when the container is created, with either driver
 * (a missing bind source is made, by `docker run --volume` and by the Docker provider's binds).
 */
export function withCompileCache(spec: ContainerSpec, cache: CachePlan | undefined, imageIdentity: string | undefined): ContainerSpec {
    if (!cache) {
        return spec;
    }
    if (!imageIdentity) {
        throw new FleetError(`container ${spec.name}: the image's content identity is unknown, and the compile cache is keyed by it`);
    }
    return {
        ...spec,
        env: { ...spec.env, ...CACHE_ENV },
        mounts: [...spec.mounts, { source: `${cache.stackDir}/${cacheKey(imageIdentity)}`, target: CONTAINER_CACHE_DIR, readOnly: false }],
    };
}
