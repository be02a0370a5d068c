/**
 * A container on a node from its spec (infra/core/containerSpec.ts), with either driver: the Docker
 * provider's Container (`docker`), or `docker run` / `docker rm -f` as host commands (`ssh`).
 */
import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { ContainerSpec, toDockerContainerInputs, toDockerRunArgs } from "../infra/core/containerSpec";
import { KeyCheckPlan, withKeyCheck } from "../infra/core/plan";
import { CommandRunner, hostCommand } from "./hostCommand";
import { NodeAccess } from "./sparkNode";
import { scriptProgram } from "./shell";

/** A container on a node, whichever driver made it. */
export interface RealizedContainer {
    readonly resource: pulumi.CustomResource;
    /** The container's id: changes whenever the container is (re)created, so what depends on it re-runs. */
    readonly revision: pulumi.Output<string>;
}

function toArray(value: pulumi.CustomResourceOptions["dependsOn"]): pulumi.Input<pulumi.Resource>[] {
    return value === undefined ? [] : Array.isArray(value) ? value : [value as pulumi.Input<pulumi.Resource>];
}

/** The id a `container-run.sh` printed (`container-id <id>`). */
export function containerIdFromRunOutput(stdout: string): string {
    const line = stdout.split("\n").find((text) => text.startsWith("container-id "));
    return line ? line.slice("container-id ".length).trim() : "";
}

/** How a container is started. */
export interface StartOptions {
    /**
     * Containers to remove before this one starts: the other executor's serving container, which
     * holds the GPU. Pulumi would delete it only at the end of the update, after this one started.
     */
    readonly removeFirst?: readonly string[];
    /**
     * Seconds the new container must stay up before its step succeeds (default 2). 0 when a later
     * step on the same node watches it anyway (the Ray join wait), so no time is spent waiting.
     */
    readonly watchSeconds?: number;
}

/**
 * Variables whose values are secrets: the ssh driver's `docker run` names them (`--env NAME`) and
 * takes their values from its own environment, set by the program (which travels on standard
 * input), so they never appear in a command line, where any user of the node could read them.
 */
export const SECRET_ENV = ["VLLM_API_KEY", "RAY_AUTH_TOKEN", "GF_SECURITY_ADMIN_PASSWORD"] as const;

/** The key check the container that runs vLLM's API server carries, and the image's own PYTHONPATH. */
export interface ServingKeyCheck {
    readonly plan: KeyCheckPlan;
    /** As the argument check read it from the image ("" without one). */
    readonly imagePythonPath: pulumi.Input<string>;
}

/** `spec` carrying the key check once the image's PYTHONPATH is known; `spec` itself without one. */
export function withServingKeyCheck(spec: pulumi.Output<ContainerSpec>, keyCheck: ServingKeyCheck | undefined): pulumi.Output<ContainerSpec> {
    if (!keyCheck) {
        return spec;
    }
    return pulumi.all([spec, keyCheck.imagePythonPath]).apply(([resolved, pythonPath]) => withKeyCheck(resolved, keyCheck.plan, pythonPath));
}

/** The programs that start and remove a container (container-run.sh, container-remove.sh), with what they use. */
export const CONTAINER_RUN = ["docker-state", "container-run"];
export const CONTAINER_REMOVE = ["docker-state", "container-remove"];

/** The `create` and `delete` programs of the ssh driver for a spec. */
export function sshDriverCommands(spec: ContainerSpec, start: StartOptions = {}): { create: string; delete: string } {
    const secrets = SECRET_ENV.filter((name) => spec.env[name] !== undefined);
    return {
        create: scriptProgram(CONTAINER_RUN, {
            NAME: spec.name,
            RUN_ARGS: toDockerRunArgs(spec, { valuesFromEnvironment: secrets }),
            SECRET_ENV: secrets.map((name) => `${name}=${spec.env[name]}`),
            FILE_PATHS: (spec.files ?? []).map((file) => file.path),
            FILE_CONTENTS: (spec.files ?? []).map((file) => file.content),
            REMOVE_FIRST: (start.removeFirst ?? []).filter((name) => name !== spec.name),
            WATCH_SECONDS: start.watchSeconds ?? 2,
        }),
        delete: scriptProgram(CONTAINER_REMOVE, { NAME: spec.name }),
    };
}

/**
 * Realizes `spec` on `node` with the chosen driver. Any change of the spec replaces the container
 * (removed first: the name is fixed). `start` says what goes first (both drivers) and how long the
 * ssh driver watches the new container.
 */
export function realizeContainer(
    driver: "docker" | "ssh",
    runner: CommandRunner,
    name: string,
    node: NodeAccess,
    spec: pulumi.Output<ContainerSpec>,
    opts: pulumi.CustomResourceOptions,
    start: StartOptions = {},
): RealizedContainer {
    if (driver === "docker") {
        if (!node.dockerProvider) {
            throw new pulumi.RunError(`node ${node.nodeName} has no Docker provider (containerDriver docker)`);
        }
        // Secrets live only in the environment (SECRET_ENV): the spec as a whole is secret when it
        // holds one, but only `envs` is kept secret, so that a preview still shows what else changes.
        const withSecrets = spec.apply(toDockerContainerInputs);
        const inputs = pulumi.unsecret(withSecrets);
        // The Docker provider has no "remove that one first": a step of our own does it, created
        // with this container (a switch of executor makes both new), before it.
        const removeFirst = (start.removeFirst ?? []).length
            ? [
                  hostCommand(
                      runner,
                      `${name}-remove-first`,
                      {
                          connection: node.connection,
                          create: inputs.name.apply((own) =>
                              (start.removeFirst ?? [])
                                  .filter((other) => other !== own)
                                  .map((other) => scriptProgram(CONTAINER_REMOVE, { NAME: other }))
                                  .join("\n"),
                          ),
                      },
                      opts,
                  ).resource,
              ]
            : [];
        const container = new docker.Container(
            name,
            {
                name: inputs.name,
                image: inputs.image,
                entrypoints: inputs.entrypoints,
                command: inputs.command,
                envs: withSecrets.envs,
                volumes: inputs.volumes,
                networkMode: inputs.apply((i) => i.networkMode ?? "bridge"),
                ipcMode: inputs.apply((i) => i.ipcMode ?? "private"),
                shmSize: inputs.apply((i) => i.shmSize ?? 64),
                ulimits: inputs.ulimits,
                gpus: inputs.apply((i) => i.gpus ?? ""),
                devices: inputs.devices,
                capabilities: inputs.capabilities,
                privileged: inputs.privileged,
                restart: inputs.restart,
                maxRetryCount: inputs.maxRetryCount,
                stopSignal: inputs.stopSignal,
                labels: inputs.labels,
                mustRun: inputs.mustRun,
                wait: inputs.wait,
                uploads: inputs.uploads,
            },
            { ...opts, provider: node.dockerProvider, deleteBeforeReplace: true, dependsOn: [...toArray(opts.dependsOn), ...removeFirst] },
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
