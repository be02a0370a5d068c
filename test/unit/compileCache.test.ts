/**
 * The compile caches that outlive the serving containers (config `cache`): the key's validation, the
 * program's serving containers mounting them, the removal at destroy only when asked, and the
 * removal's node-side program. The mount and variables of a spec: containerSpec.test.ts.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { DIR_REMOVE } from "../../components/compileCache";
import { bashCommand, scriptProgram } from "../../components/shell";
import { parseFleetConfig } from "../../infra/core/config";
import { CONTAINER_CACHE_DIR, cacheKey } from "../../infra/core/plan";
import { FAKE_IMAGE_IDENTITY, runWithFakeDocker } from "./fakeDocker";
import { MockRun, runProgram, sparkProbeOutput, unsecret } from "./mocks";
import { sparkDuo } from "./stacks";
import { configProblems } from "./configErrors";

const configError = configProblems;

describe("vllm-fleet:cache", () => {
    it("is on by default, under /var/cache/vllm-fleet, and kept at destroy", () => {
        expect(parseFleetConfig(sparkDuo).cache).toEqual({ enabled: true, dir: "/var/cache/vllm-fleet", removeOnDestroy: false });
    });

    it("takes a directory of its own, normalized", () => {
        expect(parseFleetConfig({ ...sparkDuo, cache: { dir: "/data//caches/", removeOnDestroy: true } }).cache).toEqual({ enabled: true, dir: "/data/caches", removeOnDestroy: true });
    });

    it.each([
        ["relative", "an absolute path on every node, such as /var/cache/vllm-fleet"],
        ["/", "a directory of its own, not the root directory (it is written by the serving containers)"],
        ["/var/cache", "a directory of its own, not the system directory /var/cache (it is written by the serving containers)"],
        ["/proc/cache", "a directory on disk, not a path inside /proc (a kernel file system)"],
        ["/data/a:b", "a directory whose path has no ':' or ',' (Docker's mount syntax splits there)"],
    ])("refuses cache.dir %s, naming the key", (dir, expected) => {
        expect(configError({ ...sparkDuo, cache: { dir } })).toEqual([`  - vllm-fleet:cache.dir: got ${JSON.stringify(dir)}; expected ${expected}`]);
    });

    it("refuses a cache directory inside the model directory, or around it", () => {
        const model = sparkDuo.model.path;
        for (const dir of [`${model}/cache`, path.posix.dirname(model)]) {
            expect(configError({ ...sparkDuo, cache: { dir } })).toEqual([
                `  - vllm-fleet:cache.dir: got ${JSON.stringify(dir)}; expected a directory apart from vllm-fleet:model.path (${model}): neither inside the other`,
            ]);
        }
        // Switched off, it is not looked at.
        expect(parseFleetConfig({ ...sparkDuo, cache: { enabled: false, dir: `${model}/cache` } }).cache.enabled).toBe(false);
    });

    it("refuses a value of the wrong type and an unknown field, naming the key", () => {
        expect(configError({ ...sparkDuo, cache: { enabled: "yes" } })[0]).toContain("vllm-fleet:cache.enabled");
        expect(configError({ ...sparkDuo, cache: { removeOnDestory: true } })[0]).toContain("vllm-fleet:cache.removeOnDestory: unknown key");
    });
});

const fabricIps: Record<string, string> = { spark1: "192.168.200.12", spark2: "192.168.200.13" };
const mgmtIps: Record<string, string> = { spark1: "10.1.230.180", spark2: "10.1.230.181" };
const probe = (node: string) => sparkProbeOutput(fabricIps[node], mgmtIps[node]);
const duo = { ...sparkDuo, containerDriver: "ssh", commandRunner: "builtin" };
const COMMAND = "pulumi-nodejs:dynamic/remote:SshCommand";

/** The `--volume` arguments of a container step's `docker run` (ssh driver). */
function volumesOf(run: MockRun, name: string): string[] {
    const calls = runWithFakeDocker(bashCommand(unsecret(run.byName(name).inputs.create)), {}).calls;
    // A container that carries files is created, then started, from the same arguments.
    const args = calls.find((call) => call[0] === "run" || call[0] === "create") ?? [];
    return args.flatMap((arg, index) => (args[index - 1] === "--volume" ? [arg] : []));
}

describe("the program", async () => {
    const kept = await runProgram(duo, probe);
    const removed = await runProgram({ ...duo, cache: { removeOnDestroy: true } }, probe);
    const mp = await runProgram({ ...duo, executor: "mp", cache: { dir: "/data/vllm-cache" } }, probe);
    const off = await runProgram({ ...duo, cache: { enabled: false } }, probe);
    const mount = (dir: string) => `${dir}/unit/${cacheKey(FAKE_IMAGE_IDENTITY)}:${CONTAINER_CACHE_DIR}`;

    it("mounts each node's cache of the image into every serving container, and not into the watchdog", () => {
        for (const name of ["ray-spark1-ray-head", "ray-spark2-ray-worker"]) {
            expect(volumesOf(kept, name)).toContain(mount("/var/cache/vllm-fleet"));
        }
        for (const name of ["vllm-spark1-rank0", "vllm-spark2-rank1"]) {
            expect(volumesOf(mp, name)).toContain(mount("/data/vllm-cache"));
        }
        expect(volumesOf(kept, "vllm-watchdog").join(" ")).not.toContain(CONTAINER_CACHE_DIR);
        expect(volumesOf(off, "ray-spark1-ray-head").join(" ")).not.toContain(CONTAINER_CACHE_DIR);
    });

    it("removes the caches at destroy only when asked, from a step per node that the containers wait for (so destroy runs it after them)", () => {
        const steps = (run: MockRun) => run.resources.filter((r) => r.type === COMMAND && r.name.endsWith("-compile-cache")).map((r) => r.name);
        expect(steps(off)).toEqual([]);
        for (const run of [kept, removed]) {
            expect(steps(run).sort()).toEqual(["spark1-compile-cache", "spark2-compile-cache"]);
        }
        for (const node of ["spark1", "spark2"]) {
            const removal = unsecret(removed.byName(`${node}-compile-cache`).inputs.delete);
            expect(removal).toContain("DIR='/var/cache/vllm-fleet/unit'");
            expect(removal).toContain(`IMAGE='${sparkDuo.image.name}'`);
            expect(removal).toContain("docker run --rm --network none --user 0 --entrypoint rm");
            // Kept: the delete only says so (turning removeOnDestroy off updates it in place).
            const keep = unsecret(kept.byName(`${node}-compile-cache`).inputs.delete);
            expect(keep).not.toMatch(/\brm\b/);
            expect(keep).toContain("compile caches kept in /var/cache/vllm-fleet/unit");
            for (const run of [kept, removed]) {
                expect(run.byName("ray-spark1-ray-head").dependencies).toContain(run.byName(`${node}-compile-cache`).urn);
            }
        }
        expect(mp.byName("vllm-spark2-rank1").dependencies).toContain(mp.byName("spark2-compile-cache").urn);
    });
});

/**
 * Runs dir-remove.sh as the runners send it, with a stand-in `docker` that records its calls and
 * exits with `dockerExit`; with `userMayNot`, a stand-in `rm` that answers as for files written by
 * root (the tests may run as root, who may remove anything).
 */
function removeCache(dir: string, dockerExit: number, userMayNot = false): { status: number; stdout: string; stderr: string; dockerCalls: string } {
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), "cache-remove-bin-"));
    const calls = path.join(bin, "calls");
    // STAND-IN for the docker CLI: records its arguments; exits as told.
    fs.writeFileSync(path.join(bin, "docker"), `#!/usr/bin/env bash\nprintf '%s\\n' "$*" >>${JSON.stringify(calls)}\nexit ${dockerExit}\n`, { mode: 0o755 });
    if (userMayNot) {
        // STAND-IN for rm as a user who may not remove files root wrote.
        fs.writeFileSync(path.join(bin, "rm"), `#!/usr/bin/env bash\necho "rm: cannot remove '\${@: -1}/x': Permission denied" >&2\nexit 1\n`, { mode: 0o755 });
    }
    const result = spawnSync("bash", ["-c", bashCommand(scriptProgram(DIR_REMOVE, { DIR: dir, WHAT: "compile cache", IMAGE: "vllm:test" }))], {
        encoding: "utf8",
        env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
    const dockerCalls = fs.existsSync(calls) ? fs.readFileSync(calls, "utf8") : "";
    fs.rmSync(bin, { recursive: true, force: true });
    return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr, dockerCalls };
}

describe("dir-remove.sh", () => {
    it("takes a missing directory for done", () => {
        const outcome = removeCache("/nonexistent/vllm-fleet/unit", 0);
        expect(outcome).toMatchObject({ status: 0, dockerCalls: "" });
        expect(outcome.stdout).toContain("no compile cache at /nonexistent/vllm-fleet/unit");
    });

    it("removes a directory the user may remove, without Docker", () => {
        const root = fs.mkdtempSync(path.join(os.tmpdir(), "cache-remove-"));
        fs.mkdirSync(path.join(root, "unit", "image-0123456789abcdef", "vllm"), { recursive: true });
        fs.writeFileSync(path.join(root, "unit", "image-0123456789abcdef", "vllm", "entry"), "x");
        const outcome = removeCache(path.join(root, "unit"), 1);
        expect(outcome.status).toBe(0);
        expect(fs.existsSync(path.join(root, "unit"))).toBe(false);
        expect(fs.existsSync(root)).toBe(true);
        expect(outcome.dockerCalls).toBe("");
        fs.rmSync(root, { recursive: true, force: true });
    });

    it("removes as root in a container of the image what the user may not, and says so when that fails", () => {
        const root = fs.mkdtempSync(path.join(os.tmpdir(), "cache-remove-"));
        fs.mkdirSync(path.join(root, "unit", "image-0123456789abcdef"), { recursive: true });
        const done = removeCache(path.join(root, "unit"), 0, true);
        expect(done.status).toBe(0);
        expect(done.dockerCalls.trim()).toBe(`run --rm --network none --user 0 --entrypoint rm --volume ${root}:/vllm-fleet-dir-parent vllm:test -rf -- /vllm-fleet-dir-parent/unit`);
        expect(done.stdout).toContain(`removed the compile cache ${root}/unit (as root, in a container of vllm:test)`);
        const failed = removeCache(path.join(root, "unit"), 125, true);
        expect(failed.status).toBe(1);
        expect(failed.stderr).toContain(`could not remove the compile cache ${root}/unit`);
        expect(failed.stderr).toContain(`sudo rm -rf ${root}/unit`);
        fs.rmSync(root, { recursive: true, force: true });
    });
});
