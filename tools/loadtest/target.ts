/**
 * Where the load test sends its requests and with which key, and where it reads what the server saw:
 * the command line, the stack, the environment.
 */
import { projectStack } from "../stack";
import { LoadtestArgs } from "./cli";
import { ServerOptions, StackService } from "./serverSources";

/** What a stack gives the load test: its endpoint output and its API key, if any. */
export interface StackTarget {
    readonly stack: string;
    readonly endpoint?: string;
    /** Its output apiKey. */
    readonly apiKey?: string;
    /** Its output services: each service's endpoint and model. */
    readonly services?: Readonly<Record<string, StackService>>;
    /** Its output monitoring.endpoint: Prometheus's base URL, when the stack has monitoring. */
    readonly prometheus?: string;
}

/** What resolveTarget gives: where the requests go, with which key, and where the server is read. */
export interface ResolvedTarget {
    readonly endpoint: string;
    readonly model?: string;
    readonly apiKey?: string;
    readonly apiKeySource: string;
    readonly stack?: string;
    readonly server: ServerOptions;
}

/** The output services' entries that name an endpoint and a model (others are of no use here). */
function stackServices(value: unknown): Record<string, StackService> | undefined {
    if (typeof value !== "object" || value === null) {
        return undefined;
    }
    const entries = Object.entries(value as Record<string, { endpoint?: unknown; model?: unknown }>).flatMap(([name, service]) =>
        typeof service?.endpoint === "string" && typeof service.model === "string" ? [[name, { endpoint: service.endpoint, model: service.model }] as const] : [],
    );
    return Object.fromEntries(entries);
}

/**
 * Reads a stack (the selected one by default) through the Pulumi CLI, as `npm run status` does: its
 * outputs `endpoint` and `apiKey` (the key vLLM serves with: the secret vllm-fleet:vllmApiKey, or the
 * one the stack made), the key decrypted and kept in memory only.
 */
export async function readStackTarget(stackName?: string): Promise<StackTarget> {
    const { workspace, stack } = await projectStack(stackName);
    if (!stack) {
        throw new Error("no stack selected: give --endpoint URL, or --stack NAME");
    }
    let outputs: Awaited<ReturnType<typeof workspace.stackOutputs>>;
    try {
        outputs = await workspace.stackOutputs(stack);
    } catch (error) {
        // The CLI's own words (e.g. "no stack named 'x' found"), not the whole command line.
        const said = String((error as Error).message).match(/^error: (.*)$/m)?.[1];
        throw new Error(`stack ${stack}: ${said ?? (error as Error).message}`);
    }
    const text = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined);
    return {
        stack,
        endpoint: text(outputs.endpoint?.value),
        apiKey: text(outputs.apiKey?.value),
        services: stackServices(outputs.services?.value),
        prometheus: text((outputs.monitoring?.value as { endpoint?: unknown } | undefined)?.endpoint),
    };
}

/**
 * The endpoint and key for the command line's arguments. The stack is read when `--stack` is given or
 * `--endpoint` is not. The key: the variable `--api-key-env` names when given and set, else the stack's
 * (its output apiKey), else VLLM_API_KEY. The server's side: `--prometheus`, else the stack's
 * Prometheus; `--metrics`, else the stack's services (with the stack's key, the one vLLM serves with).
 */
export async function resolveTarget(args: LoadtestArgs, env: NodeJS.ProcessEnv, readStack: (stack?: string) => Promise<StackTarget> = readStackTarget): Promise<ResolvedTarget> {
    const key = await resolveKey(args, env, readStack);
    const { target } = key;
    const server: ServerOptions = {
        prometheus: args.prometheus ?? target?.prometheus,
        metrics: args.metrics === undefined ? undefined : [args.metrics],
        services: target?.services,
        apiKey: target ? (target.apiKey ?? "") : key.resolved.apiKey,
        none: target ? undefined : "no stack read with --endpoint alone: give --prometheus URL or --metrics URL",
    };
    return { ...key.resolved, server };
}

async function resolveKey(
    args: LoadtestArgs,
    env: NodeJS.ProcessEnv,
    readStack: (stack?: string) => Promise<StackTarget>,
): Promise<{ target?: StackTarget; resolved: Omit<ResolvedTarget, "server"> }> {
    const target = args.stack !== undefined || args.endpoint === undefined || args.service !== undefined ? await readStack(args.stack) : undefined;
    const service = args.service === undefined ? undefined : target?.services?.[args.service];
    if (args.service !== undefined && !service) {
        const known = Object.keys(target?.services ?? {});
        throw new Error(`--service: stack ${target?.stack} has no service ${args.service}; expected one of: ${known.join(", ") || "(none: is it deployed?)"}`);
    }
    const endpoint = args.endpoint ?? service?.endpoint ?? target?.endpoint;
    const model = args.model ?? service?.model;
    if (!endpoint) {
        throw new Error(`stack ${target?.stack} has no output endpoint (is it deployed?); give --endpoint URL`);
    }
    const stack = target?.stack;
    const named = args.apiKeyEnv === undefined ? undefined : env[args.apiKeyEnv];
    if (args.apiKeyEnv !== undefined && named) {
        return { target, resolved: { endpoint, model, apiKey: named, apiKeySource: `env ${args.apiKeyEnv}`, stack } };
    }
    if (target?.apiKey) {
        return { target, resolved: { endpoint, model, apiKey: target.apiKey, apiKeySource: `stack ${target.stack} output apiKey`, stack } };
    }
    const fallback = args.apiKeyEnv ?? "VLLM_API_KEY";
    const resolved = env[fallback] ? { endpoint, model, apiKey: env[fallback], apiKeySource: `env ${fallback}`, stack } : { endpoint, model, apiKeySource: "none", stack };
    return { target, resolved };
}
