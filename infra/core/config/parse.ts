/**
 * The stack configuration of vllm-fleet, from raw values to a validated, defaulted
 * {@link FleetConfig}, or a {@link ConfigError} listing every problem, each naming the key, the value
 * it got and what was expected. Nothing here touches a host, so a stack whose config fails
 * validation never registers a resource.
 */
import { CONFIG_NAMESPACE, SECRET_CONFIG_KEYS } from "./keys";
import { ConfigError, ConfigIssue, expectedFor, formatKey, nearestKeys, unknownKeyIssues, valueAt } from "./issues";
import { API_KEY_NONE_EXPECTED, FleetConfig, fleetConfigSchemaFor, mixedOneModelKeys } from "./schema";
import { ONE_MODEL_KEYS } from "./services";

/** The one issue of a stack that sets `services` and single-model keys (`mixed`). */
function mixedFormsIssue(mixed: readonly string[]): ConfigIssue {
    const named = mixed.map((key) => `${CONFIG_NAMESPACE}:${key}`).join(", ");
    return {
        key: `${CONFIG_NAMESPACE}:services`,
        value: undefined,
        found: `set together with ${named}`,
        expected: `one form: the single-model keys (${mixed.join(", ")}) and services do not mix; move ${mixed.length === 1 ? "it" : "them"} into a service (each entry of services has its own ${ONE_MODEL_KEYS.join(", ")})`,
    };
}

/**
 * Validates the raw config values (as read from `vllm-fleet:*` keys) and applies the defaults.
 * Throws {@link ConfigError} naming every bad key; returns a complete {@link FleetConfig}. Keys that
 * are not part of the schema are reported as unknown (with the nearest known key); the secret keys
 * ({@link SECRET_CONFIG_KEYS}) are not read here and are ignored when present.
 */
export function parseFleetConfig(raw: Readonly<Record<string, unknown>>): FleetConfig {
    const given = Object.fromEntries(Object.entries(raw).filter(([key]) => !(SECRET_CONFIG_KEYS as readonly string[]).includes(key)));
    // With services, the single-model keys are one problem, said once; the rest is checked without them.
    const mixed = mixedOneModelKeys(given);
    const input = Object.fromEntries(Object.entries(given).filter(([key]) => !mixed.includes(key)));
    const result = fleetConfigSchemaFor(input).safeParse(input);
    if (mixed.length > 0 && result.success) {
        throw new ConfigError([mixedFormsIssue(mixed)]);
    }
    if (!result.success) {
        // A required key that is missing because it was misspelled is said once, by the unknown key.
        const missing = new Set(
            result.error.issues.filter((issue) => issue.code === "invalid_type" && valueAt(input, issue.path) === undefined).map((issue) => formatKey(issue.path)),
        );
        const claimed = new Set<string>();
        for (const issue of result.error.issues) {
            if (issue.code === "unrecognized_keys") {
                for (const name of issue.keys) {
                    const nearest = nearestKeys(name, issue.path).map((target) => `${CONFIG_NAMESPACE}:${target}`);
                    if (nearest.length === 1 && missing.has(nearest[0])) {
                        claimed.add(nearest[0]);
                    }
                }
            }
        }
        throw new ConfigError([
            ...(mixed.length > 0 ? [mixedFormsIssue(mixed)] : []),
            ...result.error.issues.flatMap((issue) => {
                if (issue.code === "unrecognized_keys") {
                    return unknownKeyIssues(issue.keys, issue.path, missing);
                }
                const key = formatKey(issue.path);
                if (claimed.has(key)) {
                    return [];
                }
                if (key === `${CONFIG_NAMESPACE}:vllm.apiKey`) {
                    // Whatever is there may be a key put in the wrong place: never quoted.
                    return [{ key, value: undefined, found: "a value other than none (not shown: it may be a key)", expected: API_KEY_NONE_EXPECTED }];
                }
                // The checks across keys carry the value they judged (a resolved or defaulted one).
                const judged = issue.code === "custom" && issue.params && "value" in issue.params;
                return [{ key, value: judged ? issue.params?.value : valueAt(input, issue.path), expected: expectedFor(issue) }];
            }),
        ]);
    }
    return result.data;
}

