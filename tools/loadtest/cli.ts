/** The load test's command line: its flags, their defaults and their checks. */
import * as path from "path";
import { metricsUrlOf } from "../top/sources";
import { LoadtestApi, normalizeEndpoint } from "./client";
import { DEFAULT_CONCURRENCY, DEFAULT_MAX_TOKENS, DEFAULT_PROMPT, DEFAULT_REQUESTS, DEFAULT_TIMEOUT_MS } from "./run";

/** What the command line asks for. */
export interface LoadtestArgs {
    readonly endpoint?: string;
    readonly stack?: string;
    readonly model?: string;
    /** A service of the stack (its output `services`): its endpoint and model. */
    readonly service?: string;
    readonly api: LoadtestApi;
    readonly concurrency: number;
    readonly requests: number;
    readonly maxTokens: number;
    readonly prompt: string;
    readonly timeoutMs: number;
    readonly out: string;
    /** The variable holding the key, when `--api-key-env` was given. */
    readonly apiKeyEnv?: string;
    /** Prometheus's base URL for the server's side (default: the stack's output monitoring.endpoint). */
    readonly prometheus?: string;
    /** A /metrics URL for the server's side (default: the stack's service serving the model). */
    readonly metrics?: string;
    readonly help: boolean;
}

export const LOADTEST_USAGE = `usage: npm run loadtest -- [options]
  --endpoint URL       the API's base, e.g. http://10.1.230.180:8000/v1 (default: the stack's output endpoint)
  --stack NAME         the Pulumi stack for the endpoint and the key (default: the selected stack)
  --model NAME         default: the first model GET /v1/models lists
  --service NAME       a service of the stack: its endpoint and its model (a stack of several)
  --api completions|chat   the route (default completions)
  --concurrency C      requests in flight at the second level (default ${DEFAULT_CONCURRENCY}); the first is 1
  --requests N         requests per level (default ${DEFAULT_REQUESTS})
  --max-tokens N       max_tokens of each request (default ${DEFAULT_MAX_TOKENS})
  --prompt TEXT        the prompt (default: a short story request)
  --timeout SECONDS    per request (default ${DEFAULT_TIMEOUT_MS / 1000})
  --out DIR            where loadtest.json and loadtest.svg go (default loadtest-out/)
  --api-key-env NAME   read the API key from this variable (default: the stack's secret
                       output apiKey, else VLLM_API_KEY)
  --prometheus URL     where the server's side is read first, e.g. http://10.1.230.180:9090
                       (default: the stack's output monitoring.endpoint)
  --metrics URL        where it is read next: a service's /metrics (or its API base, e.g.
                       http://10.1.230.180:8000/v1) (default: the stack's service of the model)`;

const VALUE_FLAGS = ["--endpoint", "--stack", "--model", "--service", "--api", "--concurrency", "--requests", "--max-tokens", "--prompt", "--timeout", "--out", "--api-key-env", "--prometheus", "--metrics"] as const;

/** Parses the command line; relative `--out` is resolved against `cwd`. Throws naming the flag. */
export function parseLoadtestArgs(argv: readonly string[], cwd: string): LoadtestArgs {
    const values = new Map<string, string>();
    let help = false;
    for (let index = 0; index < argv.length; index++) {
        const arg = argv[index];
        if (arg === "--help" || arg === "-h") {
            help = true;
            continue;
        }
        const eq = arg.indexOf("=");
        const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
        if (!(VALUE_FLAGS as readonly string[]).includes(flag)) {
            throw new Error(`unknown option ${JSON.stringify(arg)}; expected one of ${VALUE_FLAGS.join(", ")}, --help`);
        }
        let value: string | undefined;
        if (flag !== arg) {
            value = arg.slice(eq + 1);
        } else {
            value = argv[index + 1];
            if (value === undefined || (value.startsWith("--") && value.length > 2)) {
                throw new Error(`${flag}: expected a value after it`);
            }
            index++;
        }
        if (values.has(flag)) {
            throw new Error(`${flag}: given twice`);
        }
        values.set(flag, value);
    }
    const integer = (flag: string, fallback: number): number => {
        const text = values.get(flag);
        if (text === undefined) {
            return fallback;
        }
        if (!/^\d+$/.test(text.trim()) || Number(text) < 1) {
            throw new Error(`${flag}: expected a whole number of at least 1, got ${JSON.stringify(text)}`);
        }
        return Number(text);
    };
    const text = (flag: string): string | undefined => {
        const value = values.get(flag);
        if (value !== undefined && value.trim() === "") {
            throw new Error(`${flag}: expected a value, got an empty string`);
        }
        return value;
    };
    const api = values.get("--api") ?? "completions";
    if (api !== "completions" && api !== "chat") {
        throw new Error(`--api: expected completions or chat, got ${JSON.stringify(api)}`);
    }
    const timeoutText = values.get("--timeout");
    const timeoutSeconds = timeoutText === undefined ? DEFAULT_TIMEOUT_MS / 1000 : Number(timeoutText);
    if (!(timeoutSeconds > 0) || !Number.isFinite(timeoutSeconds)) {
        throw new Error(`--timeout: expected a number of seconds above 0, got ${JSON.stringify(timeoutText)}`);
    }
    const endpoint = text("--endpoint");
    if (endpoint !== undefined) {
        normalizeEndpoint(endpoint);
    }
    const apiKeyEnv = text("--api-key-env");
    if (apiKeyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(apiKeyEnv)) {
        throw new Error(`--api-key-env: expected the name of an environment variable, got ${JSON.stringify(apiKeyEnv)}`);
    }
    /** An http(s) URL without its trailing slashes; `example` says what is expected. */
    const url = (flag: string, example: string): string | undefined => {
        const value = text(flag);
        if (value === undefined) {
            return undefined;
        }
        let parsed: URL | undefined;
        try {
            parsed = new URL(value);
        } catch {
            parsed = undefined;
        }
        if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
            throw new Error(`${flag}: expected an http(s) URL such as ${example}, got ${JSON.stringify(value)}`);
        }
        return value.replace(/\/+$/, "");
    };
    const metrics = url("--metrics", "http://host:8000/metrics");
    return {
        endpoint,
        stack: text("--stack"),
        model: text("--model"),
        service: text("--service"),
        api,
        concurrency: integer("--concurrency", DEFAULT_CONCURRENCY),
        requests: integer("--requests", DEFAULT_REQUESTS),
        maxTokens: integer("--max-tokens", DEFAULT_MAX_TOKENS),
        prompt: text("--prompt") ?? DEFAULT_PROMPT,
        timeoutMs: Math.round(timeoutSeconds * 1000),
        out: path.resolve(cwd, text("--out") ?? "loadtest-out"),
        apiKeyEnv,
        prometheus: url("--prometheus", "http://host:9090"),
        // A service's API base (http://host:8000/v1) stands for its /metrics.
        metrics: metrics === undefined || /\/metrics$/.test(new URL(metrics).pathname) ? metrics : metricsUrlOf(metrics),
        help,
    };
}
