/**
 * hostPrep (off by default): the program registers each node's preparation only when asked, before
 * the serving containers start and after preflight, again only when those containers are
 * (re)created; and drop-caches.sh, run against stand-ins of `id` and `sudo` (named as such) so that
 * this machine's page cache is left alone.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { scriptProgram } from "../../components/shell";
import { MockRun, liveAfter, runProgram, sparkProbeOutput, unsecret } from "./mocks";
import { sparkDuo } from "./stacks";

const ips: Record<string, [string, string]> = { spark1: ["192.168.200.12", "10.1.230.180"], spark2: ["192.168.200.13", "10.1.230.181"] };
const probe = (name: string) => sparkProbeOutput(...ips[name]);
const duo = { ...sparkDuo, containerDriver: "ssh", commandRunner: "builtin" };
const dropping = { ...duo, hostPrep: { dropCaches: true } };

const COMMAND = "pulumi-nodejs:dynamic/remote:SshCommand";

/** The preparation steps of a run (the commands, not their components). */
const steps = (run: MockRun) => run.resources.filter((resource) => resource.name.endsWith("-host-prep") && resource.type === COMMAND);

/** Live output after `run` with node `node`'s serving container found exited. */
function deadOn(run: MockRun, node: string): (name: string) => string {
    const live = liveAfter(run);
    return (name) => (name === node ? live(name).replace(/"running":true/g, '"running":false').replace(/"status":"running"/g, '"status":"exited"') : live(name));
}

describe("the program with hostPrep", async () => {
    const plain = await runProgram(duo, probe);
    const ray = await runProgram(dropping, probe);
    const mp = await runProgram({ ...dropping, executor: "mp" }, probe);

    it("registers no preparation by default", () => {
        expect(plain.resources.filter((resource) => resource.name.includes("host-prep"))).toEqual([]);
    });

    it("registers one per node with hostPrep.dropCaches, under the node, dropping the page cache", () => {
        const prepared = steps(ray);
        expect(prepared.map((step) => step.name)).toEqual(["spark1-host-prep", "spark2-host-prep"]);
        for (const step of prepared) {
            const component = ray.resources.find((resource) => resource.urn === step.parent);
            expect(component?.type).toBe("vllm-fleet:node:HostPrep");
            expect(ray.resources.find((resource) => resource.urn === component?.parent)?.name).toBe(step.name.replace(/-host-prep$/, ""));
            expect(unsecret(step.inputs.create)).toContain("echo 3 > /proc/sys/vm/drop_caches");
        }
    });

    it("starts the Ray head (which the workers follow) and every mp rank only after every node's preparation", () => {
        const urns = (run: MockRun) => steps(run).map((step) => step.urn);
        expect(ray.byName("ray-spark1-ray-head").dependencies).toEqual(expect.arrayContaining(urns(ray)));
        for (const rank of ["vllm-spark1-rank0", "vllm-spark2-rank1"]) {
            expect(mp.byName(rank).dependencies).toEqual(expect.arrayContaining(urns(mp)));
        }
    });

    it("does nothing again on an up with nothing to do, and again on every node when a serving container is recreated", async () => {
        const trigger = (run: MockRun) => steps(run).map((step) => JSON.stringify(unsecret(step.inputs.triggers)));
        const [first] = trigger(ray);
        expect(trigger(ray)).toEqual([first, first]);
        expect(trigger(await runProgram(dropping, probe, undefined, liveAfter(ray)))).toEqual([first, first]);
        const again = trigger(await runProgram(dropping, probe, undefined, deadOn(ray, "spark2")));
        expect(again[0]).not.toBe(first);
        expect(again).toEqual([again[0], again[0]]);
    });
});

describe("drop-caches.sh", () => {
    /** Runs the script as a user who is not root, with a stand-in sudo that records and exits `sudoExit`. */
    function run(sudoExit: number): { status: number | null; stdout: string; stderr: string; sudoCalls: string[] } {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "drop-caches-"));
        try {
            const log = path.join(dir, "sudo-calls");
            // STAND-INS: `id` says uid 1000 (user spark); `sudo` records its arguments and runs nothing.
            fs.writeFileSync(path.join(dir, "id"), '#!/bin/sh\ncase "$1" in -u) echo 1000;; -un) echo spark;; esac\n', { mode: 0o755 });
            fs.writeFileSync(path.join(dir, "sudo"), `#!/bin/sh\nprintf '%s\\n' "$*" >> ${log}\nexit ${sudoExit}\n`, { mode: 0o755 });
            const outcome = spawnSync("bash", ["-c", scriptProgram("drop-caches")], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
            const sudoCalls = fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n") : [];
            return { status: outcome.status, stdout: outcome.stdout, stderr: outcome.stderr, sudoCalls };
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }

    it("has root drop the page cache through sudo -n, after a sync, and says what it freed", () => {
        const outcome = run(0);
        expect(outcome.status).toBe(0);
        expect(outcome.sudoCalls).toEqual(["-n true", "-n sh -c sync; echo 3 > /proc/sys/vm/drop_caches"]);
        expect(outcome.stdout).toMatch(/^dropped caches: before MemFree: \d+ MiB Cached: \d+ MiB ; after MemFree: \d+ MiB Cached: \d+ MiB/);
    });

    it("fails naming the key and the sudo rule to add when the user may not use sudo", () => {
        const outcome = run(1);
        expect(outcome.status).toBe(1);
        expect(outcome.sudoCalls).toEqual(["-n true"]);
        expect(outcome.stderr).toMatch(/hostPrep\.dropCaches needs root .*spark is not root and may not use sudo without a password here .*spark ALL=\(root\) NOPASSWD: ALL.*vllm-fleet:hostPrep\.dropCaches to false/);
    });
});
