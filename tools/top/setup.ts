/** What `npm run top` looks at: a stack's services, key and Prometheus, or the command line's. */
import { projectStack } from "../stack";
import { TopArgs } from "./cli";
import { TopSetup, metricsUrlOf } from "./sources";

/** A stack's outputs as the Automation API gives them: name -> { value }. */
export type StackOutputs = Readonly<Record<string, { readonly value?: unknown } | undefined>>;

/**
 * The setup from a stack's outputs: `services` (name -> { endpoint: "http://host:port/v1", model,
 * ... }), the secret `apiKey` ("" when vLLM serves without one) and, when the stack has monitoring,
 * `monitoring.endpoint` (Prometheus's base URL).
 */
export function setupFromOutputs(stack: string, outputs: StackOutputs): TopSetup {
    const services = outputs.services?.value;
    if (typeof services !== "object" || services === null || Object.keys(services).length === 0) {
        throw new Error(`stack ${stack} has no output services (is it deployed?)`);
    }
    const monitoring = outputs.monitoring?.value as { endpoint?: unknown } | undefined;
    const prometheus = typeof monitoring?.endpoint === "string" && monitoring.endpoint !== "" ? monitoring.endpoint : undefined;
    return {
        stack,
        services: Object.entries(services as Record<string, { endpoint?: unknown; model?: unknown }>).map(([name, service]) => {
            if (typeof service?.endpoint !== "string") {
                throw new Error(`stack ${stack}: the output services.${name} has no endpoint`);
            }
            return { name, model: typeof service.model === "string" && service.model !== "" ? service.model : undefined, metricsUrl: metricsUrlOf(service.endpoint) };
        }),
        apiKey: typeof outputs.apiKey?.value === "string" ? outputs.apiKey.value : "",
        prometheus,
    };
}

/** The key from --api-key-env, which must name a variable that is set; undefined without the flag. */
function keyFromEnv(args: TopArgs, env: NodeJS.ProcessEnv): string | undefined {
    if (args.apiKeyEnv === undefined) {
        return undefined;
    }
    const key = env[args.apiKeyEnv];
    if (!key) {
        throw new Error(`--api-key-env: the variable ${args.apiKeyEnv} is not set`);
    }
    return key;
}

/** The setup for the command line: --endpoints, else the stack (read through the Pulumi CLI, as `npm run status` does). */
export async function resolveSetup(args: TopArgs, env: NodeJS.ProcessEnv, readOutputs: (stack?: string) => Promise<{ stack: string; outputs: StackOutputs }> = readStackOutputs): Promise<TopSetup> {
    const key = keyFromEnv(args, env);
    if (args.endpoints) {
        return {
            services: [...args.endpoints].map(([name, url]) => {
                try {
                    return { name, metricsUrl: metricsUrlOf(url) };
                } catch (error) {
                    throw new Error(`--endpoints ${name}: ${(error as Error).message}`);
                }
            }),
            apiKey: key ?? "",
            prometheus: args.prometheus,
        };
    }
    const { stack, outputs } = await readOutputs(args.stack);
    const setup = setupFromOutputs(stack, outputs);
    return { ...setup, apiKey: key ?? setup.apiKey, prometheus: args.prometheus ?? setup.prometheus };
}

/** A stack's outputs (the selected stack by default), the secret ones decrypted and kept in memory only. */
async function readStackOutputs(name?: string): Promise<{ stack: string; outputs: StackOutputs }> {
    const { workspace, stack } = await projectStack(name);
    if (!stack) {
        throw new Error("no stack selected: npm run top -- --stack NAME (or --endpoints NAME=URL)");
    }
    try {
        return { stack, outputs: await workspace.stackOutputs(stack) };
    } catch (error) {
        // The CLI's own words (e.g. "no stack named 'x' found"), not the whole command line.
        const said = String((error as Error).message).match(/^error: (.*)$/m)?.[1];
        throw new Error(`stack ${stack}: ${said ?? (error as Error).message}`);
    }
}
