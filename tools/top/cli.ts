/** `npm run top`'s command line: its flags, their defaults and their checks. */

export interface TopArgs {
    readonly stack?: string;
    /** Seconds between two refreshes. */
    readonly intervalSeconds: number;
    /** Print one frame (after two reads `interval` apart) and exit. */
    readonly once: boolean;
    /** Services given on the command line instead of a stack's outputs: name -> URL. */
    readonly endpoints?: ReadonlyMap<string, string>;
    /** Prometheus's base URL instead of the stack's output monitoring.endpoint. */
    readonly prometheus?: string;
    /** The variable holding the API key, when `--api-key-env` was given. */
    readonly apiKeyEnv?: string;
    readonly help: boolean;
}

export const DEFAULT_INTERVAL_SECONDS = 2;
const MIN_INTERVAL_SECONDS = 0.2;
/** At most half the minute the rates are taken over, so that it holds two reads. */
const MAX_INTERVAL_SECONDS = 30;

export const TOP_USAGE = `usage: npm run top -- [options]
  --stack NAME              the Pulumi stack (default: the selected stack)
  --interval SECONDS        between two refreshes (default ${DEFAULT_INTERVAL_SECONDS}; ${MIN_INTERVAL_SECONDS} to ${MAX_INTERVAL_SECONDS})
  --once                    print one frame, after two reads SECONDS apart, and exit
  --endpoints NAME=URL[,NAME=URL...]
                            these services instead of the stack's (URL: the service's API,
                            http://host:port or http://host:port/v1; its /metrics is read)
  --prometheus URL          read the figures from this Prometheus instead of the stack's
                            output monitoring.endpoint
  --api-key-env NAME        the API key in this variable (default: the stack's output apiKey)
keys: q or Ctrl-C quits`;

const VALUE_FLAGS = ["--stack", "--interval", "--endpoints", "--prometheus", "--api-key-env"] as const;

/** `name=url,name2=url2` as a map; throws naming what is wrong. */
export function parseEndpoints(text: string): Map<string, string> {
    const endpoints = new Map<string, string>();
    for (const part of text.split(",")) {
        const eq = part.indexOf("=");
        const name = part.slice(0, eq).trim();
        const url = part.slice(eq + 1).trim();
        if (eq <= 0 || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name) || url === "") {
            throw new Error(`--endpoints: expected NAME=URL[,NAME=URL...], got ${JSON.stringify(part)}`);
        }
        if (endpoints.has(name)) {
            throw new Error(`--endpoints: ${name} given twice`);
        }
        endpoints.set(name, url);
    }
    return endpoints;
}

/** Parses the command line. Throws naming the flag. */
export function parseTopArgs(argv: readonly string[]): TopArgs {
    const values = new Map<string, string>();
    let once = false;
    let help = false;
    for (let index = 0; index < argv.length; index++) {
        const arg = argv[index];
        if (arg === "--help" || arg === "-h") {
            help = true;
            continue;
        }
        if (arg === "--once") {
            once = true;
            continue;
        }
        const eq = arg.indexOf("=");
        const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
        if (!(VALUE_FLAGS as readonly string[]).includes(flag)) {
            throw new Error(`unknown option ${JSON.stringify(arg)}; expected one of ${VALUE_FLAGS.join(", ")}, --once, --help`);
        }
        let value: string | undefined;
        if (flag !== arg) {
            value = arg.slice(eq + 1);
        } else {
            value = argv[++index];
            if (value === undefined || (value.startsWith("--") && value.length > 2)) {
                throw new Error(`${flag}: expected a value after it`);
            }
        }
        if (values.has(flag)) {
            throw new Error(`${flag}: given twice`);
        }
        if (value.trim() === "") {
            throw new Error(`${flag}: expected a value, got an empty string`);
        }
        values.set(flag, value);
    }
    const intervalText = values.get("--interval");
    const intervalSeconds = intervalText === undefined ? DEFAULT_INTERVAL_SECONDS : Number(intervalText);
    if (!(intervalSeconds >= MIN_INTERVAL_SECONDS && intervalSeconds <= MAX_INTERVAL_SECONDS)) {
        throw new Error(`--interval: expected seconds from ${MIN_INTERVAL_SECONDS} to ${MAX_INTERVAL_SECONDS}, got ${JSON.stringify(intervalText)}`);
    }
    const endpointsText = values.get("--endpoints");
    if (endpointsText !== undefined && values.has("--stack")) {
        throw new Error("--endpoints replaces the stack's services: give it or --stack, not both");
    }
    const apiKeyEnv = values.get("--api-key-env");
    if (apiKeyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(apiKeyEnv)) {
        throw new Error(`--api-key-env: expected the name of an environment variable, got ${JSON.stringify(apiKeyEnv)}`);
    }
    return {
        stack: values.get("--stack"),
        intervalSeconds,
        once,
        endpoints: endpointsText === undefined ? undefined : parseEndpoints(endpointsText),
        prometheus: values.get("--prometheus"),
        apiKeyEnv,
        help,
    };
}
