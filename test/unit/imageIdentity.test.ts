/**
 * Images identified by content (components/scripts/image-identity.sh, infra/core/image.ts).
 *
 * The script runs with the real docker CLI of this machine twice over: against a stand-in daemon on
 * a unix socket that answers `docker image inspect` and `docker info` with the modelled outputs of
 * Docker's classic and containerd image stores (test/fixtures/docker-*.json), and against this
 * machine's own engine (Debian's Docker 20.10, classic store), where a `docker save` / `docker load`
 * round trip and a re-import of the same files must keep the identity and a changed setting must not.
 */
import { execFile, execFileSync } from "child_process";
import * as fs from "fs";
import * as http from "http";
import * as os from "os";
import * as path from "path";
import { promisify } from "util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readScript } from "../../components/shell";
import { parseImageFacts, parseImageStore } from "../../infra/core/facts";
import { imageDigestProblem, imageStoreWarning, parseImageName, unpinnedImageWarning } from "../../infra/core/image";

const run = promisify(execFile);
const fixture = (name: string) => JSON.parse(fs.readFileSync(path.join(__dirname, "..", "fixtures", name), "utf8"));

/** Runs one function of image-identity.sh with the docker CLI of this machine, against `dockerHost` (default: this machine's engine). */
async function identityScript(call: string, args: string[], dockerHost?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    const env = { ...process.env, ...(dockerHost ? { DOCKER_HOST: dockerHost } : {}) };
    try {
        const { stdout, stderr } = await run("bash", ["-c", `${readScript("image-identity")}\n${call} "$@"`, "_", ...args], { env, encoding: "utf8" });
        return { code: 0, stdout, stderr };
    } catch (error) {
        const failed = error as { code: number; stdout: string; stderr: string };
        return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
}

describe("image-identity.sh against Docker's two image stores (a stand-in daemon answering with modelled outputs)", () => {
    // What the stand-in daemon answers, by the image name the CLI asks for.
    const inspects: Record<string, unknown> = {
        "classic/vllm:26.01": fixture("docker-image-inspect-classic.json")[0],
        "containerd/vllm:26.01": fixture("docker-image-inspect-containerd.json")[0],
        "loaded/vllm:26.01": fixture("docker-image-inspect-containerd-loaded.json")[0],
        "other-platform/vllm:26.01": fixture("docker-image-inspect-containerd-other-platform.json")[0],
    };
    const changed = JSON.parse(JSON.stringify(inspects["classic/vllm:26.01"]));
    changed.Config.Env = [...changed.Config.Env, "VLLM_USE_V1=1", "PYTHONPATH=/opt/extra:/opt/more"];
    inspects["changed/vllm:26.01"] = changed;
    const relayered = JSON.parse(JSON.stringify(inspects["classic/vllm:26.01"]));
    relayered.RootFS.Layers = [...relayered.RootFS.Layers].reverse();
    inspects["relayered/vllm:26.01"] = relayered;
    const infos: Record<string, unknown> = { classic: fixture("docker-info-classic.json"), containerd: fixture("docker-info-containerd.json") };

    let dir = "";
    const servers: http.Server[] = [];
    /** A daemon on its own socket: `info` is the store's `docker info`; images are looked up by `<store>/<name>`. */
    const daemons = new Map<string, Promise<string>>();
    const daemonFor = (store: string): Promise<string> => {
        if (!daemons.has(store)) {
            daemons.set(store, startDaemon(store));
        }
        return daemons.get(store)!;
    };
    const startDaemon = async (store: string): Promise<string> => {
        const socket = path.join(dir, `${store}.sock`);
        const server = http.createServer((request, response) => {
            const url = new URL(request.url ?? "/", "http://daemon");
            const headers = { "Content-Type": "application/json", "Api-Version": "1.52", "Ostype": "linux" };
            if (url.pathname === "/_ping") {
                response.writeHead(200, { ...headers, "Content-Type": "text/plain" }).end(request.method === "HEAD" ? undefined : "OK");
                return;
            }
            const image = /^\/v[0-9.]+\/images\/(.+)\/json$/.exec(url.pathname);
            if (image) {
                const found = inspects[`${store}/${decodeURIComponent(image[1])}`];
                if (found) {
                    response.writeHead(200, headers).end(JSON.stringify(found));
                } else {
                    response.writeHead(404, headers).end(JSON.stringify({ message: `No such image: ${decodeURIComponent(image[1])}` }));
                }
                return;
            }
            if (/^\/v[0-9.]+\/info$/.test(url.pathname) && infos[store]) {
                response.writeHead(200, headers).end(JSON.stringify(infos[store]));
                return;
            }
            response.writeHead(404, headers).end(JSON.stringify({ message: `not modelled: ${request.method} ${url.pathname}` }));
        });
        servers.push(server);
        await new Promise<void>((resolve) => server.listen(socket, resolve));
        return `unix://${socket}`;
    };
    const identity = async (store: string, name = "vllm:26.01") => identityScript("image_identity", [name], await daemonFor(store));

    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "image-identity-"));
    });
    afterAll(async () => {
        await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it("is the same for one image on the classic store (Id: config digest) and the containerd store (Id: index digest)", async () => {
        const classic = await identity("classic");
        const containerd = await identity("containerd");
        expect(classic.code).toBe(0);
        expect(classic.stdout).toMatch(/^sha256:[0-9a-f]{64}\n$/);
        expect(containerd.stdout).toBe(classic.stdout);
        // Docker's ids of the two differ: what the program no longer compares.
        const ids = (await Promise.all(["classic", "containerd"].map(async (store) => identityScript("image_facts", ["vllm:26.01"], await daemonFor(store))))).map(
            (facts) => parseImageFacts(facts.stdout),
        );
        expect(ids[0].imageId).not.toBe(ids[1].imageId);
        expect(ids[0].imageIdentity).toBe(ids[1].imageIdentity);
        expect(ids[0].imageIdentity).toBe(classic.stdout.trim());
        expect(ids[1].imageRepoDigests).toEqual([`nvcr.io/nvidia/vllm@${ids[1].imageId}`]);
    });

    it("is the same after a save on one store and a load on the containerd store, which gives the image another id", async () => {
        const loaded = await identity("loaded");
        expect(loaded.stdout).toBe((await identity("classic")).stdout);
    });

    it("differs when a setting a container takes from the image differs, or the layers' order", async () => {
        const classic = (await identity("classic")).stdout;
        expect((await identity("changed")).stdout).not.toBe(classic);
        expect((await identity("relayered")).stdout).not.toBe(classic);
    });

    it("fails, naming the image, when the node has none, or no layers of it for its platform", async () => {
        const missing = await identity("classic", "vllm:nope");
        expect(missing.code).not.toBe(0);
        expect(missing.stdout).toBe("");
        expect(missing.stderr).toContain("no image vllm:nope on this node");
        const otherPlatform = await identity("other-platform");
        expect(otherPlatform.code).not.toBe(0);
        expect(otherPlatform.stderr).toContain("image vllm:26.01 on this node has no layers for this node's platform");
        // The probe's section is then empty: the image counts as not there.
        expect((await identityScript("image_facts", ["vllm:26.01"], await daemonFor("other-platform"))).stdout).toBe("");
    });

    it("reads the image's own PYTHONPATH from its config (empty when it sets none, or the image is not there)", async () => {
        expect((await identityScript("image_pythonpath", ["vllm:26.01"], await daemonFor("changed"))).stdout).toBe("pythonpath /opt/extra:/opt/more\n");
        expect((await identityScript("image_pythonpath", ["vllm:26.01"], await daemonFor("classic"))).stdout).toBe("pythonpath \n");
        expect((await identityScript("image_pythonpath", ["vllm:nope"], await daemonFor("classic"))).stdout).toBe("pythonpath \n");
    });

    it("reads each node's image store from docker info", async () => {
        const classic = await identityScript("image_store", [], await daemonFor("classic"));
        expect(parseImageStore(classic.stdout.trim())).toEqual({ kind: "classic", driver: "overlay2" });
        const containerd = await identityScript("image_store", [], await daemonFor("containerd"));
        expect(containerd.stdout.trim()).toBe("overlayfs\ndriver-type=io.containerd.snapshotter.v1");
        expect(parseImageStore(containerd.stdout.trim())).toEqual({ kind: "containerd", driver: "overlayfs" });
        // A node whose Docker does not answer: no store known.
        expect(parseImageStore("")).toBeUndefined();
    });
});

describe("image-identity.sh against this machine's engine (classic store)", () => {
    const tag = `vllm-fleet-unit/identity:${process.pid}`;
    const tags = [tag, `${tag}-again`, `${tag}-env`];
    let dir = "";
    const docker = (...args: string[]) => execFileSync("docker", args, { encoding: "utf8" }).trim();

    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "image-identity-engine-"));
        fs.mkdirSync(path.join(dir, "rootfs", "etc"), { recursive: true });
        fs.writeFileSync(path.join(dir, "rootfs", "etc", "greeting"), "hello\n");
        execFileSync("tar", ["-C", path.join(dir, "rootfs"), "-cf", path.join(dir, "rootfs.tar"), "."]);
        const load = (name: string, ...changes: string[]) =>
            execFileSync("docker", ["import", ...changes.flatMap((change) => ["--change", change]), path.join(dir, "rootfs.tar"), name], { encoding: "utf8" });
        load(tag, "ENV A=1", 'ENTRYPOINT ["/bin/true"]', "LABEL purpose=vllm-fleet-unit");
        // The same files and settings imported again: another creation time, so another config digest.
        load(tags[1], "ENV A=1", 'ENTRYPOINT ["/bin/true"]', "LABEL purpose=vllm-fleet-unit");
        load(tags[2], "ENV A=2", 'ENTRYPOINT ["/bin/true"]', "LABEL purpose=vllm-fleet-unit");
    });
    afterAll(() => {
        for (const name of tags) {
            execFileSync("docker", ["image", "rm", "--force", name], { stdio: "ignore" });
        }
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it("keeps the identity across docker save and docker load", async () => {
        const before = await identityScript("image_identity", [tag]);
        expect(before.code).toBe(0);
        const idBefore = docker("image", "inspect", "--format", "{{.Id}}", tag);
        execFileSync("docker", ["save", "--output", path.join(dir, "saved.tar"), tag]);
        docker("image", "rm", "--force", tag);
        expect((await identityScript("image_identity", [tag])).code).not.toBe(0);
        docker("load", "--input", path.join(dir, "saved.tar"));
        const after = await identityScript("image_identity", [tag]);
        expect(after.stdout).toBe(before.stdout);
        expect(docker("image", "inspect", "--format", "{{.Id}}", tag)).toBe(idBefore);
    });

    it("is the same for the same files and settings imported twice (Docker's ids differ), and differs with another setting", async () => {
        const [first, again, env] = await Promise.all(tags.map((name) => identityScript("image_identity", [name])));
        expect(docker("image", "inspect", "--format", "{{.Id}}", tags[1])).not.toBe(docker("image", "inspect", "--format", "{{.Id}}", tag));
        expect(again.stdout).toBe(first.stdout);
        expect(env.stdout).not.toBe(first.stdout);
        expect(env.stdout).toMatch(/^sha256:[0-9a-f]{64}\n$/);
    });

    it("gives the probe's image section: identity, Docker's id, no registry digest for an imported image", async () => {
        const facts = parseImageFacts((await identityScript("image_facts", [tag])).stdout);
        expect(facts).toEqual({
            imageIdentity: (await identityScript("image_identity", [tag])).stdout.trim(),
            imageId: docker("image", "inspect", "--format", "{{.Id}}", tag),
            imageRepoDigests: [],
        });
    });
});

describe("the image scripts, whole", () => {
    // A quote inside `${var:-word}` within double quotes opens a string bash never closes: the
    // script then fails at its first run on a node, whatever path it takes.
    it.each(["image-identity", "image-pull", "image-send", "image-receive", "probe"])("%s.sh parses (bash -n), after image-identity.sh", (name) => {
        const program = `${readScript("image-identity")}\n${readScript(name)}`;
        expect(() => execFileSync("bash", ["-n"], { input: program, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] })).not.toThrow();
    });
});

describe("image names: tags and digest pins", () => {
    const digest = `sha256:${"4".repeat(64)}`;

    it.each([
        ["nvcr.io/nvidia/vllm:26.01-py3", { repository: "nvcr.io/nvidia/vllm", tag: "26.01-py3" }],
        [`nvcr.io/nvidia/vllm@${digest}`, { repository: "nvcr.io/nvidia/vllm", digest }],
        [`nvcr.io/nvidia/vllm:26.01-py3@${digest}`, { repository: "nvcr.io/nvidia/vllm", tag: "26.01-py3", digest }],
        ["localhost:5000/vllm", { repository: "localhost:5000/vllm" }],
        [`localhost:5000/team/vllm:dev@${digest}`, { repository: "localhost:5000/team/vllm", tag: "dev", digest }],
    ])("splits %s", (name, expected) => {
        expect(parseImageName(name)).toEqual(expected);
    });

    it("says what a digest pin looks like when one is malformed", () => {
        expect(imageDigestProblem("vllm:1")).toBeUndefined();
        expect(imageDigestProblem(`vllm@${digest}`)).toBeUndefined();
        for (const bad of ["vllm@sha256:abc", `vllm@sha512:${"4".repeat(64)}`, `vllm@${digest.toUpperCase()}`, "vllm@"]) {
            expect(imageDigestProblem(bad)).toMatch(/^a digest pin as repo@sha256:<64 lowercase hex digits> \(also repo:tag@sha256:\.\.\.\)/);
        }
    });

    it("warns of a tag alone, naming the first node's registry digest to pin, else its content identity", () => {
        const key = "vllm-fleet:image.name";
        const identity = `sha256:${"7".repeat(64)}`;
        expect(
            unpinnedImageWarning({ name: "nvcr.io/nvidia/vllm:26.01-py3", key }, { name: "spark1", facts: { imageIdentity: identity, imageRepoDigests: [`nvcr.io/nvidia/vllm@${digest}`] } }),
        ).toBe(
            `vllm-fleet:image.name nvcr.io/nvidia/vllm:26.01-py3 is a tag, which can move to another build (nightly images do); spark1 has it as nvcr.io/nvidia/vllm:26.01-py3@${digest}: set vllm-fleet:image.name to that to pin this build`,
        );
        expect(unpinnedImageWarning({ name: "vllm:dev", key }, { name: "spark1", facts: { imageIdentity: identity, imageRepoDigests: [] } })).toBe(
            "vllm-fleet:image.name vllm:dev is a tag, which can move to another build (nightly images do); spark1 has it with content identity 777777777777 and no registry digest (built or loaded there, not pulled): push it to a registry and set vllm-fleet:image.name to name@sha256:<its digest> to pin it",
        );
        expect(unpinnedImageWarning({ name: "vllm:dev", key: "vllm-fleet:services[1].image.name" }, { name: "spark3", facts: {} })).toBe(
            "vllm-fleet:services[1].image.name vllm:dev is a tag, which can move to another build (nightly images do); spark3 has no such image yet: pin it by digest (vllm@sha256:...) to say which build the stack means",
        );
        expect(unpinnedImageWarning({ name: `vllm@${digest}`, key }, { name: "spark1", facts: { imageIdentity: identity } })).toBeUndefined();
    });

    it("warns when the nodes keep images in different stores, naming each node's", () => {
        const classic = { imageStore: { kind: "classic" as const, driver: "overlay2" } };
        const containerd = { imageStore: { kind: "containerd" as const, driver: "overlayfs" } };
        expect(imageStoreWarning([{ name: "spark1", facts: classic }, { name: "spark2", facts: classic }])).toBeUndefined();
        expect(imageStoreWarning([{ name: "spark1", facts: classic }, { name: "spark2", facts: {} }])).toBeUndefined();
        expect(imageStoreWarning([{ name: "spark1", facts: classic }, { name: "spark2", facts: containerd }])).toMatch(
            /^the nodes keep images in different Docker image stores: spark1 classic \(overlay2\), spark2 containerd \(overlayfs\); served all the same \(vllm-fleet compares images by content/,
        );
    });
});
