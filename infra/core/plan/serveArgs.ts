/**
 * The arguments of `vllm serve`, from the one table of the flags vllm-fleet sets itself
 * (config/vllmFlags.ts), and the addresses the API binds and is probed on. Pure.
 */
import * as path from "path";
import { FleetConfig } from "../config";
import { MANAGED_FLAGS, ServeValues, managedFlagKeys } from "../config/vllmFlags";
import { PlannedNode } from "./nodes";

/** Where the container that runs vLLM's API server carries vllm-fleet's key check (first on PYTHONPATH). */
export const KEY_CHECK_DIR = "/opt/vllm-fleet/python";
/** vLLM's `--middleware` value: the key check's class (components/scripts/vllm_fleet_key.py, in {@link KEY_CHECK_DIR}). */
export const KEY_CHECK_MIDDLEWARE = "vllm_fleet_key.RequireKey";

/** Where the model directory is mounted inside the containers (read-only). */
export function containerModelPath(config: Pick<FleetConfig, "model">): string {
    return `/models/${path.posix.basename(config.model.path)}`;
}

/** The address vLLM's API binds on the first node (`head`): every address, or its fabric address (vllm.host). */
export function apiBindAddress(config: Pick<FleetConfig, "vllm">, head: PlannedNode): string {
    return config.vllm.host === "fabric" ? head.fabric.ip : "0.0.0.0";
}

/** The address on the first node where the probes (readiness gate, watchdog) reach the API. */
export function apiProbeAddress(config: Pick<FleetConfig, "vllm">, head: PlannedNode): string {
    return config.vllm.host === "fabric" ? head.fabric.ip : "127.0.0.1";
}

/** The values of the managed flags for `config`, the API bound to `host`; `mp` with the mp executor. */
function serveValues(config: FleetConfig, host: string, mp?: ServeValues["mp"]): ServeValues {
    return {
        servedName: config.model.servedName,
        host,
        port: config.vllm.port,
        tensor: config.parallelism.tensor,
        pipeline: config.parallelism.pipeline,
        executor: config.executor,
        gpuMemoryUtilization: config.vllm.gpuMemoryUtilization,
        maxModelLen: config.vllm.maxModelLen,
        reasoningParser: config.vllm.reasoningParser,
        toolCallParser: config.vllm.toolCallParser,
        enableAutoToolChoice: config.vllm.enableAutoToolChoice,
        trustRemoteCode: config.vllm.trustRemoteCode,
        allowedOrigins: config.security.allowedOrigins,
        keyMiddleware: config.vllm.apiKey === "none" ? undefined : KEY_CHECK_MIDDLEWARE,
        mp,
    };
}

/** The managed flags with their values, in the table's order; `vllm.extraArgs` go between the two groups. */
function managedArgs(values: ServeValues, multiNode: boolean): string[] {
    return MANAGED_FLAGS.filter((entry) => (entry.multiNode ?? false) === multiNode).flatMap((entry) => {
        const value = entry.value?.(values);
        return value === undefined ? [] : value === true ? [entry.flag] : [entry.flag, value];
    });
}

/**
 * The arguments of `vllm serve` (after `vllm`), listening on `host` ({@link apiBindAddress}); with
 * `mp`, those of one rank of vLLM's native multi-node. The API key travels as VLLM_API_KEY, never on
 * the command line.
 */
export function vllmServeArgs(config: FleetConfig, host: string, mp?: ServeValues["mp"]): string[] {
    const values = serveValues(config, host, mp);
    return ["serve", containerModelPath(config), ...managedArgs(values, false), ...config.vllm.extraArgs, ...managedArgs(values, true)];
}

/**
 * `<text>|<config key>` pairs for the check of the serve arguments: each flag vllm-fleet sets from a
 * key (config/vllmFlags.ts, with the words vLLM's refusals use for it), and each flag of
 * `vllm.extraArgs`.
 */
export function argsCheckKeys(config: Pick<FleetConfig, "vllm">): string[] {
    return [...managedFlagKeys(), ...config.vllm.extraArgs.filter((arg) => arg.startsWith("-")).map((arg) => `${arg.split("=")[0]}|vllm.extraArgs`)];
}
