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
import { Observer, observeOverSsh } from "../components/observer";
import { RayCluster } from "../components/rayCluster";
import { SparkNode, planFleet } from "../components/sparkNode";
import { VllmService } from "../components/vllmService";
import { syncWeights } from "../components/weightSync";
import { CONFIG_KEYS, CONFIG_NAMESPACE, ConfigError, ConfigKey, FleetConfig, parseFleetConfig } from "./config";
import { newRevision, reconcile } from "./observe";
import { findProjectRoot } from "./project";

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

/**
 * The SSH private key as text: `secret` (the value of `vllm-fleet:sshPrivateKey`), else the file named
 * by `vllm-fleet:ssh.privateKeyPath`, read here. Checked before anything reaches a host.
 */
export function resolvePrivateKeyText(config: FleetConfig, secret: string | undefined, projectRoot: string): { privateKey: string; privateKeyPath?: string } {
    if (secret !== undefined) {
        return { privateKey: secret, privateKeyPath: config.sshPrivateKeyPath };
    }
    if (config.sshPrivateKeyPath === undefined) {
        throw new ConfigError([
            {
                key: `${CONFIG_NAMESPACE}:sshPrivateKey`,
                value: undefined,
                expected: "the SSH private key as a secret (pulumi config set --secret sshPrivateKey < key), or vllm-fleet:ssh.privateKeyPath",
            },
        ]);
    }
    const keyPath = path.resolve(projectRoot, config.sshPrivateKeyPath.replace(/^~(?=\/)/, process.env.HOME ?? "~"));
    try {
        return { privateKey: fs.readFileSync(keyPath, "utf8"), privateKeyPath: keyPath };
    } catch (error) {
        throw new ConfigError([
            {
                key: `${CONFIG_NAMESPACE}:ssh.privateKeyPath`,
                value: config.sshPrivateKeyPath,
                expected: `a readable private key file (${(error as Error).message})`,
            },
        ]);
    }
}

/** {@link resolvePrivateKeyText} for the program: the key stays a secret. */
export function resolvePrivateKey(
    config: FleetConfig,
    secret: pulumi.Output<string> | undefined,
    projectRoot: string,
): { privateKey: pulumi.Output<string>; privateKeyPath?: string } {
    if (secret !== undefined) {
        return { privateKey: secret, privateKeyPath: config.sshPrivateKeyPath };
    }
    const { privateKey, privateKeyPath } = resolvePrivateKeyText(config, undefined, projectRoot);
    return { privateKey: pulumi.secret(privateKey), privateKeyPath };
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
    readonly tensorParallel: number;
    readonly pipelineParallel: number;
}

/**
 * The program. Validation happens before any resource is registered: a bad config fails
 * `pulumi preview` with a message naming each bad key, and nothing runs on any host.
 */
export async function fleetProgram(observe: Observer = observeOverSsh): Promise<FleetOutputs> {
    const pulumiConfig = new pulumi.Config(CONFIG_NAMESPACE);
    const config: FleetConfig = parseFleetConfig(readRawConfig(pulumiConfig));
    const { privateKey, privateKeyPath } = resolvePrivateKey(config, pulumiConfig.getSecret("sshPrivateKey"), findProjectRoot());
    const apiKey = pulumiConfig.getSecret("vllmApiKey");
    const stack = pulumi.getStack();

    // Every node as it is now, read before anything is registered (read-only, in parallel).
    const observations = await observe(config, {
        privateKey: await plainValue(privateKey),
        privateKeyPath,
        apiKey: apiKey ? await plainValue(apiKey) : "",
        stack,
    });
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
    const synced = config.model.sync === "rsync" ? syncWeights(config, nodes, privateKey, undefined) : undefined;
    const planned = planFleet(config, nodes, synced);
    const ray = config.executor === "ray" ? new RayCluster(RAY_CLUSTER_NAME, { config, stack, nodes, planned, revisions: reconciliation.revisions }) : undefined;
    const vllm = new VllmService(VLLM_SERVICE_NAME, { config, stack, nodes, planned, ray, apiKey, reconciliation });

    return {
        endpoint: vllm.endpoint,
        model: vllm.modelId,
        nodes: config.nodes.map((node) => node.name),
        fabricIps: planned.apply((list) => Object.fromEntries(list.map((node) => [node.name, node.fabric.ip]))),
        rayHead: ray ? ray.headAddress : pulumi.output(""),
        rayStatus: ray ? ray.status : pulumi.output(""),
        completion: vllm.completion,
        tensorParallel: config.parallelism.tensor,
        pipelineParallel: config.parallelism.pipeline,
    };
}
