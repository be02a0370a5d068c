/**
 * The schema of `vllm-fleet:hostChecks` (what the read of the nodes judges on every run, each check
 * a warning, a refusal or off: infra/core/hostChecks.ts) and `vllm-fleet:hostPrep` (what is done to
 * a node before its serving containers start). Pure.
 */
import { z } from "zod";

/** What a host check does when it fires: warn (the run goes on), refuse (nothing starts), or nothing. */
export type HostCheckPolicy = "warn" | "refuse" | "off";

/** The host checks and their defaults (docs/what-it-takes-care-of.md, "Host checks, on every run"). */
export const HOST_CHECK_DEFAULTS = {
    /** The fabric interface's MTU (and its twin rail's) below 9000. */
    mtu: "warn",
    /** A RoCE rail of the fabric's cable down. */
    rails: "warn",
    /** A driver known bad for the node's GPU (590.x on GB10). */
    driver: "refuse",
    /**
     * MemAvailable below what vLLM asks for at its start on a unified-memory node (gpu-memory-utilization
     * × MemTotal): vLLM refuses to start then, so the stack does at preview.
     */
    memory: "refuse",
    /** Free memory below that while the page cache holds the rest (GB10's CUDA leaves the cache out of its free memory). */
    pageCache: "warn",
    /** Neither a userspace OOM killer (earlyoom, systemd-oomd, nohang) nor swap. */
    oomGuard: "warn",
} as const satisfies Record<string, HostCheckPolicy>;

export type HostCheckName = keyof typeof HOST_CHECK_DEFAULTS;

const policy = (name: HostCheckName) => z.enum(["warn", "refuse", "off"]).default(HOST_CHECK_DEFAULTS[name]);

export const hostChecksSchema = z
    .strictObject({
        mtu: policy("mtu"),
        rails: policy("rails"),
        driver: policy("driver"),
        memory: policy("memory"),
        pageCache: policy("pageCache"),
        oomGuard: policy("oomGuard"),
    })
    .default(HOST_CHECK_DEFAULTS);

export const HOST_PREP_DEFAULTS = { dropCaches: false };

export const hostPrepSchema = z
    .strictObject({
        /**
         * Drop the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`, as root) on every node before
         * its serving containers are (re)created, as NVIDIA's DGX Spark playbook does before a load.
         */
        dropCaches: z.boolean().default(HOST_PREP_DEFAULTS.dropCaches),
    })
    .default(HOST_PREP_DEFAULTS);
