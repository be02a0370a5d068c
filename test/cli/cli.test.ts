/**
 * The users' default path, end to end: the Pulumi CLI runs the project directory's program
 * (Pulumi.yaml, `main: infra/index.ts`) through the Node.js language host, not an inline program,
 * with `commandRunner: pulumi-command` (remote.Command of @pulumi/command) and `containerDriver:
 * docker` (@pulumi/docker containers over an ssh:// Docker host), the SSH key as the secret
 * `vllm-fleet:sshPrivateKey` and every node's host key pinned, on two simulated Sparks, for both
 * executors.
 *
 * It needs what a regular Pulumi install has and the project's offline toolchain cannot build (see
 * docs/toolchain.md): `pulumi-language-nodejs`, and the resource plugins `command` and `docker` at
 * the versions the SDKs in node_modules declare. Where they are missing (CI) the suite is skipped
 * and says why.
 *
 * Nothing is written into the repository but what Pulumi writes for a stack,
 * stacks/Pulumi.<stack>.yaml (Pulumi.yaml sets `stackConfigDir: stacks`), removed at the end; the
 * backend and the node key files the program keeps for the Docker provider live in a temporary
 * directory.
 */
import { execFileSync } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineEvent, LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import { RAY_CONTAINER, VLLM_CONTAINER } from "../../infra/core/names";

/** The Pulumi name of node `index`'s serving container: the Ray cluster's ("ray") or vLLM's ("vllm") child. */
function servingContainerName(executor: "ray" | "mp", nodeName: string, index: number): string {
    return executor === "ray" ? `ray-${nodeName}-ray-${index === 0 ? "head" : "worker"}` : `vllm-${nodeName}-rank${index}`;
}
import { findProjectRoot } from "../../infra/core/project";
import { SIM_VLLM, SimCluster, complete, onNode, putTinyModel, simStackConfig, simUp, tearDown, timer } from "../e2e/simCluster";

const REPO_ROOT = findProjectRoot(__dirname);
const MODEL_DIR = "/home/spark/models/tiny-moe";

/** The executable `name` in the first of `dirs` that holds one. */
function findExecutable(name: string, dirs: readonly string[]): string | undefined {
    for (const dir of dirs) {
        const candidate = path.join(dir, name);
        try {
            fs.accessSync(candidate, fs.constants.X_OK);
            if (fs.statSync(candidate).isFile()) {
                return candidate;
            }
        } catch {
            // not there
        }
    }
    return undefined;
}

/** The resource plugin version an SDK package in node_modules declares (package.json `pulumi.version`). */
function declaredPluginVersion(sdkPackage: string): string {
    const manifest = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "node_modules", sdkPackage, "package.json"), "utf8"));
    return String(manifest.pulumi?.version ?? "").replace(/^v/, "");
}

/**
 * Why this machine cannot run the CLI path, or undefined when it can: a `pulumi` on PATH, the
 * Node.js language host on PATH or next to it (where the CLI looks), and `pulumi plugin ls`
 * (in this environment's PULUMI_HOME) listing the command and docker resource plugins at the
 * versions of @pulumi/command and @pulumi/docker.
 */
function missingForCliPath(): string | undefined {
    const pathDirs = (process.env.PATH ?? "").split(path.delimiter).filter((dir) => dir !== "");
    const pulumi = findExecutable("pulumi", pathDirs);
    if (!pulumi) {
        return "no pulumi CLI on PATH";
    }
    const beside = [path.dirname(pulumi), path.dirname(fs.realpathSync(pulumi))];
    if (!findExecutable("pulumi-language-nodejs", [...pathDirs, ...beside])) {
        return `no pulumi-language-nodejs on PATH (nor next to ${pulumi})`;
    }
    let listed: { name: string; kind: string; version: string }[];
    try {
        const text = execFileSync(pulumi, ["plugin", "ls", "--json"], { encoding: "utf8", timeout: 120_000, stdio: ["ignore", "pipe", "pipe"] });
        listed = JSON.parse(text) ?? [];
    } catch (error) {
        return `\`pulumi plugin ls --json\` failed: ${(error as Error).message.split("\n")[0]}`;
    }
    const missing = [
        { name: "command", version: declaredPluginVersion("@pulumi/command") },
        { name: "docker", version: declaredPluginVersion("@pulumi/docker") },
    ].filter((want) => !listed.some((plugin) => plugin.kind === "resource" && plugin.name === want.name && plugin.version.replace(/^v/, "") === want.version));
    if (missing.length > 0) {
        const home = process.env.PULUMI_HOME ?? path.join(os.homedir(), ".pulumi");
        return `${missing.map((want) => `no resource plugin ${want.name} ${want.version}`).join(", ")} (pulumi plugin ls, PULUMI_HOME=${home})`;
    }
    return undefined;
}

const missing = missingForCliPath();
if (missing !== undefined) {
    console.log(`CLI suite skipped: ${missing}`);
}

describe.skipIf(missing !== undefined).each([
    { executor: "ray" as const, container: RAY_CONTAINER },
    { executor: "mp" as const, container: VLLM_CONTAINER },
])("the CLI path ($executor executor): pulumi CLI, language host, command and docker providers on 2 simulated Sparks", ({ executor, container }) => {
    const clusterName = `cli-${executor}`;
    const stackName = `cli-${executor}-${crypto.randomBytes(3).toString("hex")}`;
    // Pulumi writes the stack's settings where Pulumi.yaml says (stackConfigDir: stacks).
    const stackFile = path.join(REPO_ROOT, "stacks", `Pulumi.${stackName}.yaml`);
    const timings: Record<string, number> = {};
    let simStarted = false;
    let cluster: SimCluster;
    let stack: Stack | undefined;
    let tempDir: string | undefined;

    const timed = timer(timings);

    /** The id of the serving container on every node. */
    function servingIds(): string[] {
        return cluster.nodes.map((node) => onNode(node, `docker inspect --format '{{.Id}}' ${container}`).trim());
    }

    /** What every rank reports in a completion: its fabric address, and the text names them all. */
    async function expectServedByFabric(endpoint: string, apiKey: string): Promise<void> {
        const fabricIps = cluster.nodes.map((node) => node.fabricIp).sort();
        const body = await complete(endpoint, "tiny-moe", apiKey);
        expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort()).toEqual(fabricIps);
        for (const ip of fabricIps) {
            expect(body.choices[0].text).toContain(ip);
        }
        for (const node of cluster.nodes) {
            expect(body.choices[0].text).not.toContain(node.mgmtIp);
        }
    }

    beforeAll(async () => {
        tempDir = fs.mkdtempSync(path.join(os.tmpdir(), `vllm-fleet-${stackName}-`));
        fs.mkdirSync(path.join(tempDir, "state"));
        const envVars = {
            PULUMI_BACKEND_URL: `file://${path.join(tempDir, "state")}`,
            PULUMI_CONFIG_PASSPHRASE: "cli-test",
            PULUMI_SKIP_UPDATE_CHECK: "true",
            // The plugins were found installed at the right versions: nothing is to be downloaded.
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
            // The program keeps each node's key and pinned host key as files for the Docker
            // provider's ssh (components/ssh.ts): in the temporary directory, not in ~/.cache.
            XDG_CACHE_HOME: path.join(tempDir, "cache"),
        };
        simStarted = true;
        cluster = await simUp(clusterName, 2);
        putTinyModel(cluster, MODEL_DIR);
        // The project directory is the program: the CLI runs infra/index.ts in the language host.
        stack = await LocalWorkspace.createOrSelectStack({ stackName, workDir: REPO_ROOT }, { envVars });
        await stack.setAllConfig({
            ...simStackConfig(cluster, MODEL_DIR, {
                executor,
                commandRunner: "pulumi-command",
                containerDriver: "docker",
                // The key as the README gives it: the secret vllm-fleet:sshPrivateKey, no key file.
                ssh: { user: cluster.sshUser },
            }),
            "vllm-fleet:sshPrivateKey": { value: fs.readFileSync(cluster.sshPrivateKeyPath, "utf8"), secret: true },
        });
    });

    afterAll(async () => {
        try {
            await tearDown({ stacks: [stack], cluster: simStarted ? clusterName : undefined, workDir: tempDir });
        } finally {
            fs.rmSync(stackFile, { force: true });
            console.log(`CLI path timings (s): ${JSON.stringify({ executor, stack: stackName, ...timings })}`);
        }
    });

    it("previews every resource as a create, through remote.Command and docker.Container, host keys pinned", async () => {
        const config = await stack!.getAllConfig();
        expect(config["vllm-fleet:sshPrivateKey"].secret).toBe(true);
        expect(JSON.parse(config["vllm-fleet:nodes"].value).map((node: { hostKey?: string }) => node.hostKey)).toEqual(cluster.nodes.map((node) => node.sshHostKey));
        expect(fs.existsSync(stackFile)).toBe(true);

        const preview = await stack!.preview();
        expect(Object.keys(preview.changeSummary)).toEqual(["create"]);
        for (const type of ["command:remote:Command", "docker:index:Container", "pulumi:providers:docker"]) {
            expect(preview.stdout).toContain(type);
        }
        // No resource of the builtin runner; the stack's own secrets are the only dynamic resources.
        expect(preview.stdout).not.toContain("dynamic/remote:SshCommand");
        expect(preview.stdout).toContain("pulumi-nodejs:dynamic/secret:FleetSecret");
        expect(preview.stdout).not.toContain("no host key pinned");
    });

    it("comes up with `pulumi up` and answers a completion naming both fabric addresses", async () => {
        const up = await timed("coldUp", () => stack!.up());
        expect(up.summary.result).toBe("succeeded");
        expect(up.outputs.endpoint.value).toBe(`http://${cluster.nodes[0].sshHost}:8000/v1`);
        expect(Object.values(up.outputs.fabricIps.value).sort()).toEqual(cluster.nodes.map((node) => node.fabricIp).sort());
        await expectServedByFabric(up.outputs.endpoint.value, up.outputs.apiKey.value);

        // The users' resources: remote.Command and Docker containers (a serving one per node), none
        // of the builtin runner's.
        const resources: { type: string; urn: string }[] = (await stack!.exportStack()).deployment.resources;
        expect(resources.map((resource) => resource.type)).toContain("command:remote:Command");
        const containers = resources.filter((resource) => resource.type === "docker:index/container:Container").map((resource) => resource.urn.split("::").pop());
        for (const node of cluster.nodes) {
            expect(containers).toContain(servingContainerName(executor, `spark${node.index + 1}`, node.index));
        }
        expect(resources.filter((resource) => resource.type.startsWith("pulumi-nodejs:dynamic") && !resource.type.endsWith("/secret:FleetSecret"))).toEqual([]);
        for (const node of cluster.nodes) {
            expect(onNode(node, `docker ps -q --filter label=vllm-fleet.stack=${stackName} --filter name=^${container}$`).trim()).not.toBe("");
        }
    });

    it("reports no changes on a second up and replaces no container", async () => {
        const before = servingIds();
        const again = await timed("noopUp", () => stack!.up({ expectNoChanges: true }));
        expect(again.summary.result).toBe("succeeded");
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        expect(servingIds()).toEqual(before);
    });

    it("applies a vLLM-only change (maxModelLen 2048) and serves with it", async () => {
        const before = servingIds();
        await stack!.setConfig("vllm-fleet:vllm", { value: JSON.stringify({ ...SIM_VLLM, maxModelLen: 2048 }) });
        const events: { op: string; name: string }[] = [];
        const preview = await stack!.preview({
            onEvent: (event: EngineEvent) => {
                if (event.resourcePreEvent) {
                    events.push({ op: event.resourcePreEvent.metadata.op, name: event.resourcePreEvent.metadata.urn.split("::").pop()! });
                }
            },
        });
        const named = (op: string) => events.filter((event) => event.op === op).map((event) => event.name).sort();

        console.log(`CLI path, ${executor} executor, vLLM-only change: update ${JSON.stringify(named("update"))}, replace ${JSON.stringify(named("replace"))}`);
        expect(preview.changeSummary.create ?? 0).toBe(0);
        expect(preview.changeSummary.delete ?? 0).toBe(0);

        const up = await timed("vllmChange", () => stack!.up());
        expect(up.summary.result).toBe("succeeded");
        const after = servingIds();
        const serving = cluster.nodes.map((node) => servingContainerName(executor, `spark${node.index + 1}`, node.index));
        if (executor === "ray") {
            // `vllm serve` restarts in place; the Ray containers are neither updated nor replaced
            // and keep their ids.
            expect(named("update")).toContain("vllm-serve");
            expect([...named("update"), ...named("replace")].filter((name) => serving.includes(name))).toEqual([]);
            expect(after).toEqual(before);
        } else {
            // Under mp the serving arguments are the ranks' command lines: every rank's container
            // is replaced.
            expect(named("replace")).toEqual(expect.arrayContaining(serving));
            after.forEach((id, index) => expect(id).not.toBe(before[index]));
        }
        const models = (await (await fetch(`${up.outputs.endpoint.value}/models`, { headers: { Authorization: `Bearer ${up.outputs.apiKey.value}` } })).json()) as { data: { id: string; max_model_len: number }[] };
        expect(models.data[0]).toMatchObject({ id: "tiny-moe", max_model_len: 2048 });
        await expectServedByFabric(up.outputs.endpoint.value, up.outputs.apiKey.value);
    });

    it("sees a killed serving container on node 2 in `pulumi refresh` (the Docker provider's read)", async () => {
        const node = cluster.nodes[1];
        const resourceName = servingContainerName(executor, "spark2", 1);
        onNode(node, `docker kill ${container}`);
        expect(onNode(node, `docker inspect --format '{{.State.Running}}' ${container}`).trim()).toBe("false");

        const refresh = await stack!.refresh();
        expect(refresh.summary.result).toBe("succeeded");
        const changes = refresh.summary.resourceChanges ?? {};
        expect(Object.keys(changes).filter((kind) => kind !== "same").length).toBeGreaterThan(0);
        expect(refresh.stdout).toMatch(new RegExp(`~ +docker:index:Container +${resourceName}\\b`));
        // The provider read the stopped container: it is no longer running as the program wants.
        const state = (await stack!.exportStack()).deployment.resources.find(
            (resource: { urn: string; type: string }) => resource.type === "docker:index/container:Container" && resource.urn.endsWith(`::${resourceName}`),
        );
        expect(state?.outputs?.mustRun).toBe(false);
        // Only the environment (the Ray token, the API key) is secret; every other field shows in a diff.
        expect(Object.keys(state?.outputs?.envs ?? {})).toContain("4dabf18193072939515e22adb298388d");
        expect(typeof state?.outputs?.image).toBe("string");
    });

    it("replaces the killed container on the next up and serves again", async () => {
        const before = servingIds();
        const up = await stack!.up();
        expect(up.summary.result).toBe("succeeded");
        const after = servingIds();
        expect(after[1]).not.toBe(before[1]);
        expect(onNode(cluster.nodes[1], `docker inspect --format '{{.State.Running}}' ${container}`).trim()).toBe("true");
        await expectServedByFabric(up.outputs.endpoint.value, up.outputs.apiKey.value);
    });

    it("destroys everything: no container of the stack left on any node", async () => {
        const destroy = await timed("destroy", () => stack!.destroy());
        expect(destroy.summary.result).toBe("succeeded");
        for (const node of cluster.nodes) {
            expect(onNode(node, `docker ps -aq --filter label=vllm-fleet.stack=${stackName}`).trim()).toBe("");
        }
    });
});
