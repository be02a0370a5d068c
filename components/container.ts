import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { ContainerSpec, toDockerContainerInputs, toDockerRunArgs } from "./containerSpec";
import { CommandRunner, hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { bashCommand, scriptProgram } from "./shell";

/** A container on a node, whichever driver made it. */
export interface RealizedContainer {
    readonly resource: pulumi.CustomResource;
    /** Changes whenever the container is (re)created: use it to re-run what depends on it. */
    readonly revision: pulumi.Output<string>;
}

/** How the ssh driver starts a container. */
export interface StartOptions {
    /** Containers to remove before this one starts (the other executor's, which hold the GPU). */
    readonly removeFirst?: readonly string[];
    /**
     * Seconds the new container must stay up before its step succeeds (default 2). 0 when a later
     * step on the same node watches it anyway (the Ray join wait), so no time is spent waiting.
     */
    readonly watchSeconds?: number;
}

/** `create` and `delete` command lines of the ssh driver for a spec. */
export function sshDriverCommands(spec: ContainerSpec, start: StartOptions = {}): { create: string; delete: string } {
    const removeFirst = start.removeFirst ?? [];
    return {
        create: bashCommand(
            scriptProgram("container-run", {
                NAME: spec.name,
                RUN_ARGS: toDockerRunArgs(spec),
                REMOVE_FIRST: removeFirst.filter((name) => name !== spec.name),
                WATCH_SECONDS: start.watchSeconds ?? 2,
            }),
        ),
        delete: bashCommand(scriptProgram("container-remove", { NAME: spec.name })),
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
                entrypoints: inputs.apply((i) => i.entrypoints ?? []),
                command: inputs.command,
                envs: inputs.envs,
                volumes: inputs.volumes,
                networkMode: inputs.apply((i) => i.networkMode ?? "bridge"),
                ipcMode: inputs.apply((i) => i.ipcMode ?? "private"),
                shmSize: inputs.apply((i) => i.shmSize ?? 64),
                ulimits: inputs.ulimits,
                gpus: inputs.apply((i) => i.gpus ?? ""),
                restart: inputs.restart,
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
    return { resource: container.resource, revision: container.stdout };
}
