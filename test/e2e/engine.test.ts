/**
 * The real Pulumi engine and CLI (built by test/toolchain/pulumi.sh) running the real program through
 * the Automation API, offline, on a file:// backend in a temporary directory.
 */
import { execFileSync, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import { LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import { openStack } from "../automation";
import { buildTimeline } from "../../tools/timeline/criticalPath";
import { parseEventLog } from "../../tools/timeline/events";

// One node where nothing listens (loopback, port 1): every preview reads the nodes first, so this
// one is refused at once, before anything is registered.
const minimalConfig = (keyPath: string) => ({
    "vllm-fleet:nodes": { value: JSON.stringify([{ name: "spark1", host: "127.0.0.1", port: 1 }]) },
    "vllm-fleet:timeouts": { value: JSON.stringify({ sshConnectSeconds: 2 }) },
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
        // A real key (nothing accepts it: the node does not exist); config validation reads it.
        execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(workDir, "id_test")]);
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

    it("previews only after reading every node: an unreachable one is refused in one line naming it, nothing registered", async () => {
        const start = Date.now();
        const failure = await stack.preview().then(
            () => undefined,
            (error: Error) => error,
        );
        expect((Date.now() - start) / 1000).toBeLessThan(30);
        expect(failure?.message).toMatch(/error: node spark1 \(spark@127\.0\.0\.1:1\): ssh failed \(connection or authentication\): .*refused/);
        expect(failure?.message).not.toMatch(/error serializing property|at .*\.js:\d+/);
        expect(failure?.message).not.toMatch(/vllm-fleet:(node|ray|vllm):/);
    });

    it("takes the timeline recipe of docs/operations.md: --event-log on the CLI (as the Automation API passes it), whose events the timeline reads", async () => {
        const probe = (env: Record<string, string>) =>
            spawnSync("pulumi", ["up", "--event-log", path.join(workDir, "probe.jsonl"), "--stack", "none", "--non-interactive"], {
                cwd: workDir,
                env: { ...process.env, ...env },
                encoding: "utf8",
            });
        // The released CLI hides the flag unless PULUMI_DEBUG_COMMANDS is set, as docs/operations.md says.
        expect(probe({ PULUMI_DEBUG_COMMANDS: "" }).stderr).toContain("unknown flag: --event-log");
        expect(probe({ PULUMI_DEBUG_COMMANDS: "true" }).stderr).not.toContain("unknown flag");
        // The events of a real up, as `--event-log` writes them (the Automation API reads that file).
        fs.mkdirSync(path.join(workDir, "timeline"));
        const events: string[] = [];
        const timed = await LocalWorkspace.createOrSelectStack(
            {
                stackName: "ci-timeline",
                projectName: "vllm-fleet-engine-test",
                program: async () => {
                    const marker = new pulumi.ComponentResource("vllm-fleet:test:Marker", "marker", {});
                    return { marker: marker.urn };
                },
            },
            { workDir: path.join(workDir, "timeline"), envVars, projectSettings: { name: "vllm-fleet-engine-test", runtime: "nodejs" } },
        );
        try {
            await timed.up({ onEvent: (event) => events.push(JSON.stringify(event)) });
            const timeline = buildTimeline(parseEventLog(events.join("\n")));
            expect(timeline.spans.map((span) => span.name)).toContain("marker");
        } finally {
            await timed.workspace.removeStack("ci-timeline", { force: true }).catch(() => undefined);
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
