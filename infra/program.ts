/**
 * The vllm-fleet program: reads and validates the stack config, then composes the components.
 *
 * Used both by the Pulumi CLI (`main: infra/index.ts`) and by the Automation API driver
 * (infra/automation.ts) as an inline program, so both paths run exactly the same code.
 */
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_KEYS, CONFIG_NAMESPACE, ConfigKey, FleetConfig, parseFleetConfig } from "./config";

/** Reads the raw `vllm-fleet:*` values of the current stack. */
export function readRawConfig(config = new pulumi.Config(CONFIG_NAMESPACE)): Partial<Record<ConfigKey, unknown>> {
    const raw: Partial<Record<ConfigKey, unknown>> = {};
    for (const key of CONFIG_KEYS) {
        const text = config.get(key);
        if (text === undefined) {
            continue;
        }
        // Structured values arrive as JSON; plain ones (containerDriver: ssh) as text.
        try {
            raw[key] = JSON.parse(text);
        } catch {
            raw[key] = text;
        }
    }
    return raw;
}

/** The outputs of a stack. */
export interface FleetOutputs {
    readonly nodes: string[];
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
    readonly containerDriver: string;
    readonly model: string;
}

/**
 * The program. Validation happens before any resource is registered: a bad config fails
 * `pulumi preview` with a message naming each bad key, and nothing runs on any host.
 */
export async function fleetProgram(): Promise<FleetOutputs> {
    const config: FleetConfig = parseFleetConfig(readRawConfig());
    return {
        nodes: config.nodes.map((node) => node.name),
        tensorParallel: config.parallelism.tensor,
        pipelineParallel: config.parallelism.pipeline,
        containerDriver: config.containerDriver,
        model: config.model.servedName,
    };
}
