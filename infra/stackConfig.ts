/**
 * Reading the stack's config (the composition root's first step): every `vllm-fleet:*` value Pulumi
 * gives the program, checked by the pure layer (infra/core/config), with the secrets read on their
 * own and kept secret. Every problem is reported at once, before anything reaches a host.
 */
import * as pulumi from "@pulumi/pulumi";
import {
    CONFIG_KEYS,
    CONFIG_NAMESPACE,
    ConfigError,
    ConfigIssue,
    FleetConfig,
    SecretConfigKey,
    apiKeyIssues,
    hfTokenIssues,
    parseFleetConfig,
    plainTextSecretIssues,
    sshPrivateKeyIssues,
} from "./core/config";
import { rawConfigValues, resolvePrivateKeyText } from "./core/config/stackValues";
import { findProjectRoot } from "./core/project";

/** The keys set in the current stack under the `vllm-fleet` namespace, without the namespace. */
function stackKeys(): string[] {
    const prefix = `${CONFIG_NAMESPACE}:`;
    return Object.keys(pulumi.runtime.allConfig())
        .filter((key) => key.startsWith(prefix))
        .map((key) => key.slice(prefix.length));
}

/**
 * Whether the stack holds `vllm-fleet:<key>` as a secret. @pulumi/pulumi's runtime exports
 * isConfigSecret (it reads PULUMI_CONFIG_SECRET_KEYS, which the Node.js language host and the
 * Automation API both set) without declaring it in its typings; an SDK without it cannot tell, and
 * the value is then taken for a secret.
 */
function isSecretConfig(key: SecretConfigKey): boolean {
    const probe = (pulumi.runtime as unknown as { isConfigSecret?: (fullKey: string) => boolean }).isConfigSecret;
    return typeof probe === "function" ? probe(`${CONFIG_NAMESPACE}:${key}`) : true;
}

/**
 * Reads the raw `vllm-fleet:*` values of the current stack: every key set in the namespace, so that
 * parseFleetConfig reports a misspelled or unknown one, except the secrets ({@link SECRET_CONFIG_KEYS}),
 * which are read on their own and never reach the parsed config.
 */
export function readRawConfig(config = new pulumi.Config(CONFIG_NAMESPACE), keys: readonly string[] = stackKeys()): Record<string, unknown> {
    return rawConfigValues((key) => config.get(key), [...CONFIG_KEYS, ...keys]);
}

/** {@link resolvePrivateKeyText} for the program: `secret` is the plain text of the secret key; the key stays a secret. */
export function resolvePrivateKey(
    config: FleetConfig,
    secret: string | undefined,
    projectRoot: string,
): { privateKey: pulumi.Output<string>; privateKeyPath?: string } {
    const { privateKey, privateKeyPath } = resolvePrivateKeyText(config, secret, projectRoot);
    return { privateKey: pulumi.secret(privateKey), privateKeyPath };
}

/** What the program takes from the stack config. */
export interface StackConfig {
    readonly config: FleetConfig;
    readonly privateKey: pulumi.Output<string>;
    readonly privateKeyPath?: string;
    /** The secret `vllm-fleet:vllmApiKey`, when set. */
    readonly apiKey?: pulumi.Output<string>;
    /** The secret `vllm-fleet:hfToken`, when set (model.source hub: a gated or private repo). */
    readonly hfToken?: pulumi.Output<string>;
}

/**
 * Reads and checks everything the program takes from the stack config: the settings, the SSH key
 * (secret or file) and the API key. Every problem is reported at once, one line each, in one
 * {@link ConfigError}, before anything reaches a host; secrets are never quoted.
 */
export function readStackConfig(pulumiConfig = new pulumi.Config(CONFIG_NAMESPACE), projectRoot = findProjectRoot()): StackConfig {
    const issues: ConfigIssue[] = [];
    const collect = <T>(read: () => T): T | undefined => {
        try {
            return read();
        } catch (error) {
            if (!(error instanceof ConfigError)) {
                throw error;
            }
            issues.push(...error.issues);
            return undefined;
        }
    };
    const config = collect(() => parseFleetConfig(readRawConfig(pulumiConfig)));
    // Secret values are read as text here to be checked; they leave this function as secrets.
    const sshSecret = pulumiConfig.get("sshPrivateKey");
    const apiKeyText = pulumiConfig.get("vllmApiKey");
    const hfTokenText = pulumiConfig.get("hfToken");
    issues.push(...plainTextSecretIssues("sshPrivateKey", sshSecret, isSecretConfig("sshPrivateKey")));
    let key: { privateKey: pulumi.Output<string>; privateKeyPath?: string } | undefined;
    if (config) {
        key = collect(() => resolvePrivateKey(config, sshSecret, projectRoot));
    } else {
        // Without valid settings there is no key file to read; the secret can still be checked.
        issues.push(...sshPrivateKeyIssues(sshSecret));
    }
    issues.push(...plainTextSecretIssues("vllmApiKey", apiKeyText, isSecretConfig("vllmApiKey")), ...apiKeyIssues(apiKeyText));
    issues.push(...plainTextSecretIssues("hfToken", hfTokenText, isSecretConfig("hfToken")), ...hfTokenIssues(hfTokenText));
    if (config?.vllm.apiKey === "none" && apiKeyText !== undefined) {
        issues.push({
            key: `${CONFIG_NAMESPACE}:vllm.apiKey`,
            value: "none",
            expected: "not none while the secret vllm-fleet:vllmApiKey is set: keep one of the two (pulumi config rm vllmApiKey, or remove vllm.apiKey)",
        });
    }
    if (issues.length > 0 || !config || !key) {
        throw new ConfigError(issues);
    }
    return {
        config,
        privateKey: key.privateKey,
        privateKeyPath: key.privateKeyPath,
        apiKey: apiKeyText === undefined ? undefined : pulumi.secret(apiKeyText),
        hfToken: hfTokenText === undefined ? undefined : pulumi.secret(hfTokenText),
    };
}
