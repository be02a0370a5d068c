/**
 * The real Pulumi engine and CLI (built by test/toolchain/pulumi.sh) running the real program through
 * the Automation API, offline, on a file:// backend in a temporary directory.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import { LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../../infra/automation";

// One node that is never contacted: preview only plans, it runs nothing on a host.
const minimalConfig = (keyPath: string) => ({
    "vllm-fleet:nodes": { value: JSON.stringify([{ name: "spark1", host: "192.0.2.10" }]) },
    "vllm-fleet:ssh": { value: JSON.stringify({ user: "spark", privateKeyPath: keyPath }) },
    "vllm-fleet:containerDriver": { value: "ssh" },
    "vllm-fleet:commandRunner": { value: "builtin" },
    "vllm-fleet:fabric": { value: JSON.stringify({ subnet: "192.168.200.0/24" }) },
    "vllm-fleet:image": { value: JSON.stringify({ name: "vllm-fleet-sim/workload:current" }) },
    "vllm-fleet:model": { value: JSON.stringify({ path: "/models/tiny", servedName: "tiny" }) },
});

describe("the Pulumi engine, offline", () => {
    let workDir: string;
    let envVars: Record<string, string>;
    let stack: Stack;

    beforeAll(async () => {
        workDir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-engine-"));
        fs.mkdirSync(path.join(workDir, "state"));
        envVars = { PULUMI_BACKEND_URL: `file://${path.join(workDir, "state")}`, PULUMI_CONFIG_PASSPHRASE: "engine-test" };
        // Dynamic resources run in a provider process that loads @pulumi/pulumi from the workspace.
        fs.symlinkSync(path.resolve(__dirname, "../../node_modules"), path.join(workDir, "node_modules"));
        fs.writeFileSync(path.join(workDir, "id_test"), "not a real key\n", { mode: 0o600 });
        stack = await openStack("ci-minimal", { workDir, envVars, config: minimalConfig(path.join(workDir, "id_test")) });
    });

    afterAll(async () => {
        if (stack) {
            await stack.workspace.removeStack(stack.name, { force: true }).catch(() => undefined);
        }
        fs.rmSync(workDir, { recursive: true, force: true });
    });

    it("uses the CLI the bootstrap built, at the release of the SDK in the lock file", async () => {
        const cliVersion = execFileSync("pulumi", ["version"], { encoding: "utf8" }).trim();
        const lock = JSON.parse(fs.readFileSync(path.resolve(__dirname, "../../package-lock.json"), "utf8"));
        expect(cliVersion).toBe(`v${lock.packages["node_modules/@pulumi/pulumi"].version}`);
        expect(stack.workspace.pulumiVersion).toBe(cliVersion.slice(1));
    });

    it("previews the program on a minimal stack, offline, contacting no host", async () => {
        const preview = await stack.preview();
        // Stack, SparkNode + probe, RayCluster + head container + join wait + readiness gate,
        // VllmService + serve command.
        expect(preview.changeSummary).toEqual({ create: 9 });
        for (const type of ["vllm-fleet:node:SparkNode", "vllm-fleet:ray:RayCluster", "vllm-fleet:vllm:VllmService", "pulumi-nodejs:dynamic/remote:SshCommand"]) {
            expect(preview.stdout).toContain(type);
        }
    });

    it("runs a stack's whole life on the engine: up, a no-op up, destroy", async () => {
        // A program of the engine test's own (no hosts involved): the toolchain, not the fleet.
        fs.mkdirSync(path.join(workDir, "lifecycle"));
        const lifecycle = await LocalWorkspace.createOrSelectStack(
            {
                stackName: "ci-lifecycle",
                projectName: "vllm-fleet-engine-test",
                program: async () => {
                    const config = new pulumi.Config();
                    const marker = new pulumi.ComponentResource("vllm-fleet:test:Marker", "marker", {});
                    return { greeting: `hello ${config.require("who")}`, marker: marker.urn };
                },
            },
            { workDir: path.join(workDir, "lifecycle"), envVars, projectSettings: { name: "vllm-fleet-engine-test", runtime: "nodejs" } },
        );
        try {
            await lifecycle.setConfig("who", { value: "spark" });
            const up = await lifecycle.up();
            expect(up.summary.result).toBe("succeeded");
            expect(up.outputs.greeting.value).toBe("hello spark");
            const again = await lifecycle.up({ expectNoChanges: true });
            expect(again.summary.resourceChanges).toEqual({ same: 2 });
            const destroy = await lifecycle.destroy();
            expect(destroy.summary.resourceChanges).toEqual({ delete: 2 });
        } finally {
            await lifecycle.workspace.removeStack("ci-lifecycle", { force: true }).catch(() => undefined);
        }
    });

    it("fails preview on a bad value, naming the key, before registering anything", async () => {
        await stack.setConfig("vllm-fleet:vllm", { value: JSON.stringify({ gpuMemoryUtilization: 1.5 }) });
        try {
            const failure = await stack.preview().then(
                () => undefined,
                (error: Error) => error,
            );
            expect(failure?.message).toMatch(/vllm-fleet:vllm\.gpuMemoryUtilization: got 1\.5; expected a fraction in \(0, 1\]/);
            expect(failure?.message).toMatch(/nothing was run on any host/);
            // Only the stack itself was registered: no component of the fleet.
            expect(failure?.message).not.toMatch(/vllm-fleet:(node|ray|vllm):/);
        } finally {
            await stack.removeConfig("vllm-fleet:vllm");
        }
    });
});
