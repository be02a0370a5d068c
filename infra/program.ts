/**
 * The vllm-fleet program: reads and validates the stack config, then composes the components.
 *
 * Used both by the Pulumi CLI (`main: infra/index.ts`) and by the Automation API driver
 * (infra/automation.ts) as an inline program, so both paths run exactly the same code.
 */
import * as fs from "fs";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { RAY_CLUSTER_NAME, VLLM_SERVICE_NAME } from "../components/container";
import { nodeFirewalls } from "../components/firewall";
import { FleetSecret } from "../components/fleetSecret";
import { Observer, observeOverSsh } from "../components/observer";
import { RayCluster } from "../components/rayCluster";
import { serveArgsCheck } from "../components/serveArgsCheck";
import { SparkNode, planFleet } from "../components/sparkNode";
import { VllmService } from "../components/vllmService";
import { syncWeights } from "../components/weightSync";
import { hubDownload, withModel } from "../components/hubDownload";
import {
    CONFIG_KEYS,
    CONFIG_NAMESPACE,
    ConfigError,
    ConfigIssue,
    FleetConfig,
    SECRET_CONFIG_KEYS,
    SecretConfigKey,
    apiKeyIssues,
    hfTokenIssues,
    parseFleetConfig,
    plainTextSecretIssues,
    privateKeyProblem,
    sshPrivateKeyIssues,
} from "./config";
import { checkOwnership, firewallRevisions, newRevision, reconcile } from "./observe";
import { apiBindAddress, mpRankSpec, vllmServeArgs } from "./plan";
import { findProjectRoot } from "./project";

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

/**
 * The stack's own secrets: the Ray token (ray executor), and the API key when the stack makes it
 * (no vllmApiKey set and vllm.apiKey not none). Made once and kept in the stack's state.
 */
function stackSecrets(config: FleetConfig, apiKey: pulumi.Output<string> | undefined): { rayToken?: pulumi.Output<string>; apiKey?: pulumi.Output<string> } {
    const rayToken =
        config.executor === "ray" ? new FleetSecret("ray-token", { purpose: "ray-token", rotation: config.security.rayTokenRotation }).value : undefined;
    if (config.vllm.apiKey === "none") {
        pulumi.log.warn(
            `vllm.apiKey is none: the API on port ${config.vllm.port} answers anyone who can reach it; without vllm.apiKey the stack makes a key (the output apiKey)`,
        );
        return { rayToken };
    }
    return { rayToken, apiKey: apiKey ?? new FleetSecret("vllm-api-key", { purpose: "vllm-api-key" }).value };
}

/** The value of a known Output (config values always are), for the program-time read. */
function plainValue<T>(output: pulumi.Output<T>): Promise<T> {
    return new Promise((resolve) => {
        output.apply((value) => {
            resolve(value);
            return value;
        });
    });
}

/** The outputs of a stack. */
export interface FleetOutputs {
    readonly endpoint: pulumi.Output<string>;
    readonly model: pulumi.Output<string>;
    readonly nodes: string[];
    readonly fabricIps: pulumi.Output<Record<string, string>>;
    readonly rayHead: pulumi.Output<string>;
    readonly rayStatus: pulumi.Output<string>;
    readonly completion: pulumi.Output<string>;
    /** Per node, the transport NCCL chose over the fabric (`IB`: RoCE, `Socket`: TCP). */
    readonly fabricTransport: pulumi.Output<Record<string, string>>;
    /** The API key clients send (`Authorization: Bearer`), a secret; "" with vllm.apiKey none. */
    readonly apiKey: pulumi.Output<string>;
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
}

/**
 * The program. Validation happens before any resource is registered: a bad config fails
 * `pulumi preview` with a message naming each bad key, and nothing runs on any host.
 */
export async function fleetProgram(observe: Observer = observeOverSsh): Promise<FleetOutputs> {
    const { config, privateKey, privateKeyPath, apiKey, hfToken } = readStackConfig();
    const stack = pulumi.getStack();

    // The stack's secrets touch no host. Registered first, they bring up the engine's provider of
    // dynamic resources (a Node.js process, about half a second) while the nodes are read.
    const secrets = stackSecrets(config, apiKey);
    // Every node as it is now, read before anything that reaches a host is registered (read-only, in parallel).
    const observations = await observe(config, { privateKey: await plainValue(privateKey), privateKeyPath, stack });
    // Another stack's containers on these nodes: refused before anything is registered.
    checkOwnership(stack, observations);
    const reconciliation = reconcile(config, observations, newRevision);
    for (const finding of reconciliation.findings) {
        pulumi.log.warn(finding);
    }

    const unpinned = config.nodes.filter((node) => !node.hostKey).map((node) => node.name);
    if (unpinned.length > 0) {
        pulumi.log.warn(
            `no host key pinned for ${unpinned.join(", ")}: their SSH host keys are not checked; set vllm-fleet:nodes[i].hostKey to the line of \`ssh-keyscan -t ed25519 <host>\``,
        );
    }
    const nodes: SparkNode[] = [];
    for (const node of config.nodes) {
        const source = nodes[0];
        nodes.push(
            new SparkNode(node.name, {
                node,
                privateKey,
                privateKeyPath,
                stack,
                connectTimeoutSeconds: config.timeouts.sshConnectSeconds,
                runner: config.commandRunner,
                containerDriver: config.containerDriver,
                image: config.image.name,
                observed: observations[nodes.length],
                fabricSubnet: config.fabric.subnet,
                imageFrom:
                    config.image.source === "pull"
                        ? "pull"
                        : config.image.source === "copy" && source
                          ? { node: source, imageId: source.facts.apply((facts) => facts.imageId ?? "") }
                          : undefined,
            }),
        );
    }
    // model.source hub: the download on the first node comes first; the sync and preflight see the
    // first node's directory as the download left it.
    const download = config.model.hub ? hubDownload(config, nodes[0], hfToken, { parent: nodes[0] }) : undefined;
    const modelNodes = download ? [withModel(nodes[0], download.model), ...nodes.slice(1)] : nodes;
    const synced = config.model.sync === "rsync" ? syncWeights(config, modelNodes, privateKey, undefined) : undefined;
    const planned = planFleet(config, modelNodes, synced);
    // The arguments of `vllm` on the first node, checked by the image's own vLLM before anything starts.
    const argv = planned.apply((list) => (config.executor === "ray" ? vllmServeArgs(config, apiBindAddress(config, list[0])) : [...mpRankSpec(config, stack, list, 0, "").command]));
    const argsCheck = serveArgsCheck(`${VLLM_SERVICE_NAME}-args-check`, config, nodes[0], argv, { parent: nodes[0] });
    // Ray and vLLM start behind the rules of security.firewall, when asked for.
    const firewalls = nodeFirewalls(config, stack, nodes, firewallRevisions(observations, newRevision));
    const ray =
        config.executor === "ray"
            ? new RayCluster(RAY_CLUSTER_NAME, { config, stack, nodes, planned, revisions: reconciliation.revisions, rayToken: secrets.rayToken!, after: [argsCheck.resource, ...firewalls] })
            : undefined;
    const vllm = new VllmService(VLLM_SERVICE_NAME, { config, stack, nodes, planned, ray, apiKey: secrets.apiKey, reconciliation, after: [argsCheck.resource, ...firewalls] });

    return {
        endpoint: vllm.endpoint,
        model: vllm.modelId,
        nodes: config.nodes.map((node) => node.name),
        fabricIps: planned.apply((list) => Object.fromEntries(list.map((node) => [node.name, node.fabric.ip]))),
        rayHead: ray ? ray.headAddress : pulumi.output(""),
        rayStatus: ray ? ray.status : pulumi.output(""),
        completion: vllm.completion,
        fabricTransport: vllm.fabricTransport,
        apiKey: pulumi.secret(secrets.apiKey ?? ""),
        tensorParallel: config.parallelism.tensor,
        pipelineParallel: config.parallelism.pipeline,
    };
}
