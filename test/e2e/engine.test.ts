/**
 * The real Pulumi engine and CLI (built by test/toolchain/pulumi.sh) running the real program through
 * the Automation API, offline, on a file:// backend in a temporary directory.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../../infra/automation";

const minimalConfig = {
    "vllm-fleet:nodes": { value: JSON.stringify([{ name: "spark1", host: "127.0.0.1" }]) },
    "vllm-fleet:ssh": { value: JSON.stringify({ user: "spark" }) },
    "vllm-fleet:fabric": { value: JSON.stringify({ subnet: "192.168.200.0/24" }) },
    "vllm-fleet:image": { value: JSON.stringify({ name: "vllm-fleet-sim/workload:current" }) },
    "vllm-fleet:model": { value: JSON.stringify({ path: "/models/tiny", servedName: "tiny" }) },
};

describe("the Pulumi engine, offline", () => {
    let workDir: string;
    let envVars: Record<string, string>;
    let stack: Stack;

    beforeAll(async () => {
        workDir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-engine-"));
        fs.mkdirSync(path.join(workDir, "state"));
        envVars = { PULUMI_BACKEND_URL: `file://${path.join(workDir, "state")}`, PULUMI_CONFIG_PASSPHRASE: "engine-test" };
        stack = await openStack("ci-minimal", { workDir, envVars, config: minimalConfig });
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

    it("previews the program on a minimal stack", async () => {
        const preview = await stack.preview();
        expect(preview.changeSummary).toEqual({ create: 1 });
        expect(preview.stdout).toContain("pulumi:pulumi:Stack");
    });

    it("applies, then a second up changes nothing, then destroys", async () => {
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        expect(up.outputs.nodes.value).toEqual(["spark1"]);
        expect(up.outputs.tensorParallel.value).toBe(1);
        expect(up.outputs.model.value).toBe("tiny");

        const again = await stack.up({ expectNoChanges: true });
        expect(again.summary.result).toBe("succeeded");
        expect(again.summary.resourceChanges).toEqual({ same: 1 });

        const destroy = await stack.destroy();
        expect(destroy.summary.result).toBe("succeeded");
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
