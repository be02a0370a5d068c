/**
 * The stack's values as Pulumi gives them (JSON or text), and the SSH key they name: what the
 * program and `npm run status` both read the stack's config with. Reads the key file named by
 * `ssh.privateKeyPath` (the one read here); nothing else.
 */
import * as fs from "fs";
import * as path from "path";
import { ConfigError, ConfigIssue } from "./issues";
import { CONFIG_NAMESPACE, SECRET_CONFIG_KEYS } from "./keys";
import { FleetConfig } from "./schema";
import { privateKeyProblem, sshPrivateKeyIssues } from "./secrets";

/**
 * The raw values of `keys` (the secret keys left out) as `text` gives them: structured values arrive
 * as JSON, plain ones (containerDriver: ssh) as text. Shared by the program and `npm run status`.
 */
export function rawConfigValues(text: (key: string) => string | undefined, keys: readonly string[]): Record<string, unknown> {
    const raw: Record<string, unknown> = {};
    for (const key of new Set<string>(keys)) {
        if ((SECRET_CONFIG_KEYS as readonly string[]).includes(key)) {
            continue;
        }
        const value = text(key);
        if (value === undefined) {
            continue;
        }
        try {
            raw[key] = JSON.parse(value);
        } catch {
            raw[key] = value;
        }
    }
    return raw;
}

/** Reads a private key file named by config (`~/` is the home directory, relative paths are from the project). */
function readPrivateKeyFile(configuredPath: string, projectRoot: string): { text?: string; keyPath: string; issue?: ConfigIssue } {
    const keyPath = path.resolve(projectRoot, configuredPath.replace(/^~(?=\/)/, process.env.HOME ?? "~"));
    const key = `${CONFIG_NAMESPACE}:ssh.privateKeyPath`;
    let text: string;
    try {
        text = fs.readFileSync(keyPath, "utf8");
    } catch (error) {
        return { keyPath, issue: { key, value: configuredPath, expected: `a readable private key file (${(error as Error).message})` } };
    }
    const problem = privateKeyProblem(text);
    return problem ? { keyPath, issue: { key, value: configuredPath, expected: `a file holding ${problem}` } } : { text, keyPath };
}

/**
 * The SSH private key as text: `secret` (the value of `vllm-fleet:sshPrivateKey`), else the file named
 * by `vllm-fleet:ssh.privateKeyPath`, read here. Checked before anything reaches a host: the text
 * must be a private key without a passphrase (the file too when both are given: the clients that
 * need a file use it). Throws {@link ConfigError}, never quoting the key.
 */
export function resolvePrivateKeyText(config: FleetConfig, secret: string | undefined, projectRoot: string): { privateKey: string; privateKeyPath?: string } {
    const issues: ConfigIssue[] = sshPrivateKeyIssues(secret);
    let fromFile: string | undefined;
    let keyPath: string | undefined;
    if (config.sshPrivateKeyPath !== undefined) {
        const read = readPrivateKeyFile(config.sshPrivateKeyPath, projectRoot);
        fromFile = read.text;
        keyPath = read.keyPath;
        if (read.issue) {
            issues.push(read.issue);
        }
    } else if (secret === undefined) {
        issues.push({
            key: `${CONFIG_NAMESPACE}:sshPrivateKey`,
            value: undefined,
            expected: "the SSH private key as a secret (pulumi config set --secret sshPrivateKey < key), or vllm-fleet:ssh.privateKeyPath",
        });
    }
    if (issues.length > 0) {
        throw new ConfigError(issues);
    }
    if (secret !== undefined) {
        return { privateKey: secret, privateKeyPath: config.sshPrivateKeyPath };
    }
    return { privateKey: fromFile ?? "", privateKeyPath: keyPath };
}
