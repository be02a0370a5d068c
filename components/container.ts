import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { ContainerSpec, toDockerContainerInputs, toDockerRunArgs } from "./containerSpec";
import { CommandRunner, hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { scriptProgram } from "./shell";

/** A container on a node, whichever driver made it. */
export interface RealizedContainer {
    readonly resource: pulumi.CustomResource;
    /** The container's id: changes whenever the container is (re)created, so what depends on it re-runs. */
    readonly revision: pulumi.Output<string>;
}

/** The Pulumi names of the two components that own serving containers (see servingContainerAliases). */
export const RAY_CLUSTER_NAME = "ray";
export const VLLM_SERVICE_NAME = "vllm";

/** The Pulumi name of node `index`'s serving container under each executor. */
export function servingContainerName(executor: "ray" | "mp", nodeName: string, index: number): string {
    return executor === "ray" ? `${RAY_CLUSTER_NAME}-${nodeName}-ray-${index === 0 ? "head" : "worker"}` : `${VLLM_SERVICE_NAME}-${nodeName}-rank${index}`;
}

/**
 * A node's serving container is one resource whichever executor runs it: the Ray container under
 * `ray` and the vLLM rank under `mp` alias each other. Switching the executor then replaces the
 * container (the old one removed first: it holds the GPU) instead of creating the new one beside it
 * and deleting the old one at the end of the update, which is what Pulumi does with a resource that
 * merely left the program. The same holds for both drivers.
 */
export function servingContainerAliases(executor: "ray" | "mp", nodeName: string, index: number): pulumi.Alias[] {
    const other = executor === "ray" ? "mp" : "ray";
    const otherParent = other === "ray" ? pulumi.createUrn(RAY_CLUSTER_NAME, "vllm-fleet:ray:RayCluster") : pulumi.createUrn(VLLM_SERVICE_NAME, "vllm-fleet:vllm:VllmService");
    return [{ name: servingContainerName(other, nodeName, index), parent: otherParent }];
}

/** The id a `container-run.sh` printed (`container-id <id>`). */
export function containerIdFromRunOutput(stdout: string): string {
    const line = stdout.split("\n").find((text) => text.startsWith("container-id "));
    return line ? line.slice("container-id ".length).trim() : "";
}

/** How the ssh driver starts a container. */
export interface StartOptions {
    /**
     * Seconds the new container must stay up before its step succeeds (default 2). 0 when a later
     * step on the same node watches it anyway (the Ray join wait), so no time is spent waiting.
     */
    readonly watchSeconds?: number;
}

/** `create` and `delete` command lines of the ssh driver for a spec. */
export function sshDriverCommands(spec: ContainerSpec, start: StartOptions = {}): { create: string; delete: string } {
    return {
        create: scriptProgram("container-run", { NAME: spec.name, RUN_ARGS: toDockerRunArgs(spec), WATCH_SECONDS: start.watchSeconds ?? 2 }),
        delete: scriptProgram("container-remove", { NAME: spec.name }),
    };
}

/**
 * Realizes `spec` on `node` with the chosen driver. Any change of the spec replaces the container
 * (removed first: the name is fixed). `start` says how the ssh driver starts it.
 */
export function realizeContainer(
    driver: "docker" | "ssh",
    runner: CommandRunner,
    name: string,
    node: SparkNode,
    spec: pulumi.Output<ContainerSpec>,
    opts: pulumi.CustomResourceOptions,
    start: StartOptions = {},
): RealizedContainer {
    if (driver === "docker") {
        if (!node.dockerProvider) {
            throw new Error(`node ${node.nodeName} has no Docker provider (containerDriver docker)`);
        }
        const inputs = spec.apply(toDockerContainerInputs);
        const container = new docker.Container(
            name,
            {
                name: inputs.name,
                image: inputs.image,
                entrypoints: inputs.entrypoints,
                command: inputs.command,
                envs: inputs.envs,
                volumes: inputs.volumes,
                networkMode: inputs.apply((i) => i.networkMode ?? "bridge"),
                ipcMode: inputs.apply((i) => i.ipcMode ?? "private"),
                shmSize: inputs.apply((i) => i.shmSize ?? 64),
                ulimits: inputs.ulimits,
                gpus: inputs.apply((i) => i.gpus ?? ""),
                restart: inputs.restart,
                maxRetryCount: inputs.maxRetryCount,
                stopSignal: inputs.stopSignal,
                labels: inputs.labels,
                mustRun: inputs.mustRun,
                wait: inputs.wait,
            },
            { ...opts, provider: node.dockerProvider, deleteBeforeReplace: true },
        );
        return { resource: container, revision: container.id };
    }
    const commands = spec.apply((resolved) => sshDriverCommands(resolved, start));
    const container = hostCommand(
        runner,
        name,
        {
            connection: node.connection,
            create: commands.create,
            delete: commands.delete,
            // A changed spec is a new container, as with the Docker provider.
            triggers: [commands.create],
        },
        opts,
    );
    return { resource: container.resource, revision: container.stdout.apply(containerIdFromRunOutput) };
}
