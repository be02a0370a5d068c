/**
 * A config problem in words: the key as the user writes it, what was found and what was expected;
 * zod's findings reworded; unknown keys with the nearest known one ("did you mean"). Pure.
 */
import { z } from "zod";
import { FleetError } from "../errors";
import { CONFIG_KEYS, CONFIG_NAMESPACE, SECRET_CONFIG_KEYS } from "./keys";
import { fleetConfigSchema } from "./schema";

export interface ConfigIssue {
    /** The full key, e.g. `vllm-fleet:vllm.gpuMemoryUtilization` or `vllm-fleet:nodes[1].host`. */
    readonly key: string;
    /** The value found there (undefined when missing). */
    readonly value: unknown;
    /** What was expected. */
    readonly expected: string;
    /**
     * What was found, in words, instead of the value: for secrets (never printed) and unknown keys
     * (whose value may be a secret set under a misspelled name).
     */
    readonly found?: string;
}

/**
 * Thrown when a stack's config is invalid; its message lists every issue, one line each. Issues about
 * the same key are merged into one line.
 */
export class ConfigError extends FleetError {
    readonly issues: readonly ConfigIssue[];

    constructor(issues: readonly ConfigIssue[]) {
        const merged = mergeIssues(issues);
        super(
            `invalid stack configuration (${merged.length} problem${merged.length === 1 ? "" : "s"}); nothing was run on any host:\n` +
                merged.map((issue) => `  - ${issue.key}: ${issue.found ?? describeValue(issue.value)}; expected ${issue.expected}`).join("\n"),
        );
        this.issues = merged;
    }
}

/** One issue per key, in the order of their first appearance; the expectations of a key joined. */
function mergeIssues(issues: readonly ConfigIssue[]): ConfigIssue[] {
    const byKey = new Map<string, ConfigIssue>();
    for (const issue of issues) {
        const first = byKey.get(issue.key);
        if (!first) {
            byKey.set(issue.key, issue);
        } else if (!first.expected.split("; and ").includes(issue.expected)) {
            byKey.set(issue.key, { ...first, expected: `${first.expected}; and ${issue.expected}` });
        }
    }
    return [...byKey.values()];
}

function describeValue(value: unknown): string {
    if (value === undefined) {
        return "missing";
    }
    const text = JSON.stringify(value);
    return `got ${text.length > 80 ? `${text.slice(0, 77)}...` : text}`;
}

/** A config key as the user writes it: `vllm-fleet:vllm.extraArgs[2]`, `vllm-fleet:nodes[0].host`. */
export function formatKey(keyPath: readonly PropertyKey[]): string {
    let key = CONFIG_NAMESPACE + ":";
    keyPath.forEach((part, index) => {
        if (typeof part === "number") {
            key += `[${part}]`;
        } else {
            key += index === 0 ? String(part) : `.${String(part)}`;
        }
    });
    return key;
}

export function valueAt(raw: unknown, keyPath: readonly PropertyKey[]): unknown {
    let current: unknown = raw;
    for (const part of keyPath) {
        if (current === null || typeof current !== "object") {
            return undefined;
        }
        current = (current as Record<PropertyKey, unknown>)[part];
    }
    return current;
}

/** A JSON type, as a sentence says it. */
function typeInWords(type: string): string {
    switch (type) {
        case "int":
            return "an integer";
        case "object":
            return "an object";
        case "array":
            return "a list";
        case "boolean":
            return "true or false";
        default:
            return `a ${type}`;
    }
}

/** zod's own wording ("Too small: expected number to be >=1"), replaced by ours; ours is kept. */
function isZodWording(message: string): boolean {
    return /^(Too small|Too big|Invalid|Unrecognized)\b/.test(message);
}

function boundInWords(issue: { origin: string; inclusive?: boolean }, bound: unknown, direction: "min" | "max"): string {
    const amount = String(bound);
    switch (issue.origin) {
        case "string":
            return `${direction === "min" ? "at least" : "at most"} ${amount} character${amount === "1" ? "" : "s"}`;
        case "array":
        case "set":
            return `${direction === "min" ? "at least" : "at most"} ${amount} item${amount === "1" ? "" : "s"}`;
        default:
            if (issue.inclusive === false) {
                return `${direction === "min" ? "more than" : "less than"} ${amount}`;
            }
            return `${direction === "min" ? "at least" : "at most"} ${amount}`;
    }
}

export function expectedFor(issue: z.core.$ZodIssue): string {
    switch (issue.code) {
        case "invalid_type":
            return typeInWords(issue.expected);
        case "invalid_value":
            return issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
        case "too_small":
            return isZodWording(issue.message) ? boundInWords(issue, issue.minimum, "min") : issue.message;
        case "too_big":
            return isZodWording(issue.message) ? boundInWords(issue, issue.maximum, "max") : issue.message;
        case "not_multiple_of":
            return isZodWording(issue.message) ? `a multiple of ${String(issue.divisor)}` : issue.message;
        case "invalid_format":
            return isZodWording(issue.message) ? `a string in ${issue.format} format` : issue.message;
        default:
            return isZodWording(issue.message) ? "a valid value" : issue.message;
    }
}

/** The object schema inside defaults, optionals, transforms and lists, or undefined. */
function unwrapSchema(schema: z.core.$ZodType | undefined): z.core.$ZodType | undefined {
    let current = schema;
    for (let depth = 0; current && depth < 10; depth++) {
        const def = current._zod.def as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
        if ((def.type === "default" || def.type === "optional" || def.type === "nullable" || def.type === "prefault") && def.innerType) {
            current = def.innerType;
        } else if (def.type === "pipe" && def.in) {
            current = def.in;
        } else {
            return current;
        }
    }
    return current;
}

/** The schema at `keyPath` (names and list indexes), or undefined. */
function schemaAt(keyPath: readonly PropertyKey[]): z.core.$ZodType | undefined {
    let current: z.core.$ZodType | undefined = fleetConfigSchema;
    for (const part of keyPath) {
        const unwrapped = unwrapSchema(current);
        const def = unwrapped?._zod.def as { type: string; shape?: Record<string, z.core.$ZodType>; element?: z.core.$ZodType } | undefined;
        if (def?.type === "array" && typeof part === "number") {
            current = def.element;
        } else if (def?.type === "object" && typeof part === "string") {
            current = def.shape?.[part];
        } else {
            return undefined;
        }
    }
    return unwrapSchema(current);
}

/** The field names of the object at `keyPath`; at the top: every key the program reads. */
function fieldsAt(keyPath: readonly PropertyKey[]): string[] {
    const def = schemaAt(keyPath)?._zod.def as { type: string; shape?: Record<string, unknown> } | undefined;
    const fields = def?.type === "object" && def.shape ? Object.keys(def.shape) : [];
    return keyPath.length === 0 ? [...fields, ...SECRET_CONFIG_KEYS] : fields;
}

/**
 * Names people give keys that are spelled otherwise here (the stack outputs `tensorParallel` and
 * `pipelineParallel`, vLLM's flag names, the words of other tools).
 */
const KEY_ALIASES: Readonly<Record<string, string>> = {
    tensorParallel: "parallelism.tensor",
    tensorParallelSize: "parallelism.tensor",
    tp: "parallelism.tensor",
    pipelineParallel: "parallelism.pipeline",
    pipelineParallelSize: "parallelism.pipeline",
    pp: "parallelism.pipeline",
    apiKey: "vllmApiKey",
    huggingfaceToken: "hfToken",
    hubToken: "hfToken",
    HF_TOKEN: "hfToken",
    privateKey: "sshPrivateKey",
    sshKey: "sshPrivateKey",
    hosts: "nodes",
    servedModelName: "model.servedName",
    modelPath: "model.path",
    subnet: "fabric.subnet",
};

/** Optimal string alignment distance (Levenshtein with transpositions), case-insensitive. */
export function editDistance(a: string, b: string): number {
    const x = a.toLowerCase();
    const y = b.toLowerCase();
    const rows: number[][] = Array.from({ length: x.length + 1 }, (_, i) => Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
    for (let i = 1; i <= x.length; i++) {
        for (let j = 1; j <= y.length; j++) {
            const cost = x[i - 1] === y[j - 1] ? 0 : 1;
            rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) {
                rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
            }
        }
    }
    return rows[x.length][y.length];
}

/**
 * The known keys nearest to `name`, as paths below the namespace (`vllm.maxModelLen`): the fields of
 * the object at `keyPath`, and at the top also the fields one level down (a nested key set at the top)
 * and {@link KEY_ALIASES}; a field of `keyPath` itself hides one of the same name below it. Empty when
 * nothing is close: at most a third of the name's letters differ.
 */
export function nearestKeys(name: string, keyPath: readonly PropertyKey[] = []): string[] {
    const here = formatKey(keyPath).slice(CONFIG_NAMESPACE.length + 1);
    const join = (field: string) => (here ? `${here}.${field}` : field);
    const candidates: { label: string; target: string }[] = fieldsAt(keyPath).map((field) => ({ label: field, target: join(field) }));
    if (keyPath.length === 0) {
        for (const key of CONFIG_KEYS) {
            const below: readonly PropertyKey[] = key === "nodes" ? [key, 0] : [key];
            for (const field of fieldsAt(below)) {
                candidates.push({ label: field, target: key === "nodes" ? `nodes[i].${field}` : `${key}.${field}` });
            }
        }
        for (const [alias, target] of Object.entries(KEY_ALIASES)) {
            candidates.push({ label: alias, target });
        }
    }
    const limit = Math.max(1, Math.floor(name.length / 3));
    let best = Infinity;
    let targets: string[] = [];
    for (const candidate of candidates) {
        const distance = editDistance(name, candidate.label);
        if (distance > limit || distance > best) {
            continue;
        }
        if (distance < best) {
            best = distance;
            targets = [];
        }
        if (!targets.includes(candidate.target)) {
            targets.push(candidate.target);
        }
    }
    // A field here hides a field of the same name a level down (`imag`: image, not gateway.image too).
    const own = fieldsAt(keyPath).filter((field) => targets.includes(join(field)));
    return targets.filter((target) => own.some((field) => target === join(field)) || !own.some((field) => target.endsWith(`.${field}`)));
}

/**
 * The issues of keys unknown at `keyPath` (the top of the namespace by default), each naming the key
 * and the nearest known one when there is one, never its value. `names` are the keys found there,
 * without the namespace (`tensorParalel`, not `vllm-fleet:tensorParalel`). `missing`: the keys
 * (`vllm-fleet:model.path`) reported missing, said of the nearest key when it is one of them. Pure.
 */
export function unknownKeyIssues(names: readonly string[], keyPath: readonly PropertyKey[] = [], missing: ReadonlySet<string> = new Set()): ConfigIssue[] {
    const known = fieldsAt(keyPath);
    const where = keyPath.length === 0 ? "a key vllm-fleet reads" : `a key of ${formatKey(keyPath)}`;
    return names
        .filter((name) => !known.includes(name))
        .map((name) => {
            const nearest = nearestKeys(name, keyPath);
            // A nested key meant at the top is set with --path; say how.
            const nested = nearest.length === 1 && keyPath.length === 0 && nearest[0].includes(".") && !nearest[0].startsWith("nodes[") ? nearest[0] : undefined;
            const hint =
                nearest.length > 0
                    ? `; did you mean ${nearest
                          .slice(0, 3)
                          .map((target) => `${CONFIG_NAMESPACE}:${target}`)
                          .join(" or ")}?${nested ? ` (set with \`pulumi config set --path ${nested} <value>\`)` : ""}${
                          nearest.length === 1 && missing.has(`${CONFIG_NAMESPACE}:${nearest[0]}`) ? " (it is required and missing)" : ""
                      }`
                    : known.length > 0
                      ? `: ${known.join(", ")}`
                      : "";
            return { key: formatKey([...keyPath, name]), value: undefined, found: "unknown key", expected: `${where}${hint}` };
        });
}

