/**
 * End to end on simulated Sparks: what preflight catches before any container starts (a node whose
 * image differs or is missing, a node missing a weight file, a model that cannot fit), and what
 * fixes the first two: the image copied node to node over the fabric, to every node that lacks it at
 * once (a broken copy leaves no image and the next up retries it; an update moves only the layers a
 * node on the classic store lacks; an image removed by hand from a node is delivered there again by
 * the next up, its containers kept), and the weights over the fabric (the big files in plain streams,
 * continuing a part a broken run left; rsync for the rest); and image.source pull from the proving
 * ground's registry, by digest and by tag (a pinned image removed from a node is pulled there
 * again). The third node keeps its images in Docker's containerd image store, the others in the
 * classic one: one image has other Docker ids there, the same content identity, and the copy goes
 * both ways; the pull by digest works on both. Last, an image the containerd node pulled (gzip
 * layers; an index of two platforms) is copied from it to the classic nodes as only the layers they
 * lack, after the refusal of a pull that skipped the blobs of layers it found unpacked. Real SSH,
 * Docker, rsync and registry (Debian's docker-registry); the GPU, the fabric link and vLLM are
 * stand-ins.
 */
import { execFile, execFileSync, execSync } from "child_process";
import { createHash } from "crypto";
import { promisify } from "util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineEvent, Stack } from "@pulumi/pulumi/automation";
import { readScript, shQuote } from "../../components/shell";
import { parseImageName } from "../../infra/core/image";
import { openStack } from "../automation";
import { updateTopLayer } from "./imageUpdate";
import { pushMultiPlatformIndex } from "./multiPlatform";
import { SimCluster, SimNode, complete, failureOf, interfaceBytes, onNode, putTinyModel, simPush, simStackConfig, simUp, tearDown, tempWorkspace } from "./simCluster";

const MODEL_DIR = "/home/spark/models/tiny-moe";

function imageId(cluster: SimCluster, index: number): string {
    return onNode(cluster.nodes[index], `docker image inspect --format '{{.Id}}' ${cluster.workloadImage}`).trim();
}

/** The image's content identity on a node, as the program computes it (components/scripts/image-identity.sh). */
function imageIdentity(cluster: SimCluster, index: number, image = cluster.workloadImage): string {
    return onNode(cluster.nodes[index], `${readScript("image-identity")}\nimage_identity ${image}`).trim();
}

/**
 * The node's image saved, its config's creation time changed, and loaded again: the same layers and
 * settings under another Docker id, which is what one image is on a node of the other image store
 * (or after a save/load between stores). The containers keep running their image (the tag moves).
 */
const REDATE = `set -euo pipefail
image="$1"; dir="$(mktemp -d)"; mkdir "$dir/x"
docker save "$image" | tar -x -C "$dir/x"
python3 - "$dir/x" <<'PY'
import hashlib, json, os, sys
root = sys.argv[1]
manifest = json.load(open(os.path.join(root, "manifest.json")))
old = manifest[0]["Config"]
config = json.load(open(os.path.join(root, old)))
config["created"] = "2020-01-01T00:00:00Z"
data = json.dumps(config).encode()
new = hashlib.sha256(data).hexdigest() + ".json"
os.remove(os.path.join(root, old))
open(os.path.join(root, new), "wb").write(data)
manifest[0]["Config"] = new
json.dump(manifest, open(os.path.join(root, "manifest.json"), "w"))
PY
docker image rm --force "$image" >/dev/null
tar -C "$dir/x" -c . | docker load >/dev/null
rm -rf "$dir"`;

/** Records when each resource's step began and ended during an operation (by resource name). */
function stepRecorder(): { onEvent: (event: EngineEvent) => void; spans: Map<string, { start: number; end: number }> } {
    const spans = new Map<string, { start: number; end: number }>();
    const onEvent = (event: EngineEvent) => {
        const urn = event.resourcePreEvent?.metadata.urn ?? event.resOutputsEvent?.metadata.urn;
        if (!urn) {
            return;
        }
        const resource = urn.split("::").pop()!;
        const span = spans.get(resource) ?? { start: Date.now(), end: Date.now() };
        if (event.resOutputsEvent) {
            span.end = Date.now();
        }
        spans.set(resource, span);
    };
    return { onEvent, spans };
}

function noContainers(cluster: SimCluster): void {
    for (const node of cluster.nodes) {
        expect(onNode(node, "docker ps -aq").trim()).toBe("");
    }
}

/** Runs a command in a simulated node without blocking the event loop (the inline program runs in this process). */
async function onNodeAsync(node: SimNode, command: string): Promise<string> {
    const { stdout } = await promisify(execFile)("docker", ["exec", node.name, "bash", "-c", command], { encoding: "utf8", timeout: 60_000 });
    return stdout;
}

/** The standard output of a step (a command resource) as the stack's state keeps it (secret or not). */
function stdoutOf(exported: { deployment: { resources: { urn: string; outputs?: Record<string, unknown> }[] } }, resource: string): string {
    const value = exported.deployment.resources.find((candidate) => candidate.urn.endsWith(`::${resource}`))?.outputs?.stdout;
    if (typeof value === "string") {
        return value;
    }
    const plaintext = (value as { plaintext?: unknown } | undefined)?.plaintext;
    return typeof plaintext === "string" ? (JSON.parse(plaintext) as string) : "";
}

/** The requests the cluster's registry has answered since it started (its access log): client address, method, path. */
function registryRequests(cluster: SimCluster): { ip: string; method: string; path: string }[] {
    const log = execFileSync("docker", ["logs", `${cluster.cluster}-registry`], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    return [...log.matchAll(/^(\S+) - \S+ \[[^\]]*\] "(\w+) (\S+) HTTP\/[\d.]+"/gm)].map(([, ip, method, path]) => ({ ip, method, path }));
}

/** The preview's warnings. */
async function previewWarnings(stack: Stack): Promise<string> {
    const warnings: string[] = [];
    await stack.preview({
        onEvent: (event) => {
            if (event.diagnosticEvent?.severity === "warning") {
                warnings.push(event.diagnosticEvent.message);
            }
        },
    });
    return warnings.join("\n");
}

/** The ids of the running containers on each node. */
function running(cluster: SimCluster): string[] {
    return cluster.nodes.map((node) => onNode(node, "docker ps --quiet --no-trunc | sort").trim());
}

/** Docker's image store on a node, as `docker info` reports it. */
function storeOf(node: SimNode): string {
    return onNode(node, "docker info --format '{{.Driver}} {{range .DriverStatus}}{{index . 0}}={{index . 1}} {{end}}'").trim();
}

describe("preflight, and the image copy node to node over the fabric, on 3 simulated Sparks (the third on the containerd image store)", () => {
    const name = "e2e-dist13";
    let cluster: SimCluster;
    let workspace: { dir: string; envVars: Record<string, string> };
    const stacks: Stack[] = [];

    beforeAll(async () => {
        cluster = await simUp(name, 3, { stores: ["classic", "classic", "containerd"], registry: true });
        expect(storeOf(cluster.nodes[0])).toMatch(/^overlay2 /);
        expect(storeOf(cluster.nodes[2])).toMatch(/^overlayfs .*driver-type=io\.containerd\.snapshotter\.v1/);
        putTinyModel(cluster, MODEL_DIR);
        workspace = tempWorkspace(`vllm-fleet-${name}-`);
    });

    afterAll(async () => {
        await tearDown({ stacks, cluster: name, workDir: workspace?.dir });
    });

    it("refuses differing images, then copies to 2 nodes at once over the fabric; a broken copy leaves no image and the next up retries it", async () => {
        const [source, drifted, empty] = cluster.nodes;
        // Same tag, another image sharing no layer with the first node's (the copy sends it whole):
        // what a node that pulled a moving tag long ago has. The original goes, untagged too.
        onNode(
            drifted,
            `old=$(docker image inspect --format '{{.Id}}' ${cluster.workloadImage}) && docker run --name drift --entrypoint sh ${cluster.workloadImage} -c 'echo drift > /drift' && ` +
                `docker export drift | docker import - ${cluster.workloadImage} >/dev/null && docker rm drift >/dev/null && docker image rm "$old" >/dev/null`,
        );
        // On the containerd store: the copy sends it the whole image whatever it keeps (image-layers.py).
        onNode(empty, `docker image rm ${cluster.workloadImage} >/dev/null`);
        const original = imageId(cluster, 0);
        expect(imageId(cluster, 1)).not.toBe(original);

        const stack = await openStack(`${name}-image`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, MODEL_DIR) });
        stacks.push(stack);
        const message = await failureOf(stack.up());
        expect(message).toContain(`image ${cluster.workloadImage} differs across nodes by content`);
        expect(message).toContain(`spark1 (classic store) have ${imageIdentity(cluster, 0).slice(7, 19)}`);
        noContainers(cluster);

        await stack.setConfig("vllm-fleet:image", { value: JSON.stringify({ name: cluster.workloadImage, source: "copy" }) });
        const before = { mgmt: interfaceBytes(source, cluster.mgmtIface).tx, fabric: interfaceBytes(source, source.fabricIface).tx };
        // While the up runs: both receivers load at the same time; once the third node has taken in
        // 20 MB, its sender on the first node is killed (by pid), mid-stream.
        // One `docker save` on the first node serves both.
        let bothAtOnce = false;
        let killed = "";
        let polling = true;
        let saves = 0;
        const poll = (async () => {
            const loading = "pid=$(pgrep -x -f 'docker load' | head -n 1); [ -n \"$pid\" ] && awk '/^rchar/ {print $2}' /proc/$pid/io || echo 0";
            while (polling && !killed) {
                const [second, third, saving] = await Promise.all([
                    onNodeAsync(drifted, loading),
                    onNodeAsync(empty, loading),
                    onNodeAsync(source, `pgrep -c -x -f 'docker save ${cluster.workloadImage}' || true`),
                ]);
                saves = Math.max(saves, Number(saving));
                bothAtOnce ||= Number(second) > 0 && Number(third) > 0;
                if (Number(third) > 20e6) {
                    killed = await onNodeAsync(source, `pid=$(pgrep -f 'send ${empty.fabricIp} 28731' | head -n 1); [ -n "$pid" ] && pkill -9 -P "$pid"; kill -9 "$pid" && echo "$pid"`);
                }
                await new Promise((resolve) => setTimeout(resolve, 100));
            }
        })();
        const broken = await failureOf(stack.up());
        polling = false;
        await poll;
        expect(killed.trim()).toMatch(/^\d+$/);
        expect(bothAtOnce).toBe(true);
        expect(saves).toBe(1);
        expect(broken).toMatch(/spark3|stream/);
        // No wrong image, no half-loaded one: the tag is absent on the node whose copy broke (the
        // containerd store's) ...
        expect(() => imageId(cluster, 2)).toThrow();
        // ... while the other copy, running beside it, completed.
        expect(imageId(cluster, 1)).toBe(original);
        // Nothing went through this machine: the first node sent the image (twice, in part) on its
        // fabric interface and next to nothing on the management one that carries every SSH session.
        const imageBytes = Number(onNode(source, `docker image inspect --format '{{.Size}}' ${cluster.workloadImage}`).trim());
        const sent = { mgmt: interfaceBytes(source, cluster.mgmtIface).tx - before.mgmt, fabric: interfaceBytes(source, source.fabricIface).tx - before.fabric };
        console.log(`image ${(imageBytes / 2 ** 20).toFixed(0)} MiB; the first node sent ${(sent.fabric / 2 ** 20).toFixed(0)} MiB on the fabric, ${(sent.mgmt / 2 ** 20).toFixed(2)} MiB on the management network`);
        expect(sent.fabric).toBeGreaterThan(imageBytes);
        expect(sent.mgmt).toBeLessThan(imageBytes / 50);

        // The next up copies again where it broke, and only there: a classic store's save loaded into
        // the containerd store, the same content under another Docker id.
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        expect([imageId(cluster, 0), imageId(cluster, 1)]).toEqual([original, original]);
        expect(imageId(cluster, 2)).not.toBe(original);
        expect(cluster.nodes.map((_, index) => imageIdentity(cluster, index))).toEqual(Array(3).fill(cluster.workloadImageIdentity));
        // The last sender out removed the save.
        expect(onNode(source, "find /var/tmp -path '*vllm-fleet-images-*' -name '*.tar'").trim()).toBe("");
        const state = JSON.stringify(await stack.exportStack());
        const copied = /image-copied [^"\\]+ bytes=(\d+) millis=(\d+)/.exec(state);
        expect(copied).not.toBeNull();
        const [bytes, millis] = [Number(copied![1]), Number(copied![2])];
        console.log(`image copy: ${(bytes / 2 ** 20).toFixed(0)} MiB in ${(millis / 1000).toFixed(1)} s = ${(bytes / 2 ** 20 / (millis / 1000)).toFixed(1)} MiB/s`);
        expect(up.summary.resourceChanges?.create).toBeGreaterThan(0);

        // A copy to a node that has the id already loads nothing: the receiver tells the sender.
        const urn = (await stack.exportStack()).deployment.resources.find((resource: { urn: string }) => resource.urn.endsWith("::spark2-image")).urn;
        const again = await stack.up({ replace: [urn] });
        expect(again.summary.result).toBe("succeeded");
        const replaced = JSON.stringify(await stack.exportStack());
        expect(replaced).toMatch(new RegExp(`image-present ${cluster.workloadImage.replace(/[/.]/g, "\\$&")} ${imageIdentity(cluster, 0)}`));
        expect(replaced).toContain("spark1: stream-skipped");

        // The same image under another Docker id on spark2 (as on a node of the containerd store):
        // compared by content, it is the same image; the next up copies nothing and serves.
        onNode(cluster.nodes[1], `bash -c ${shQuote(REDATE)} _ ${cluster.workloadImage}`);
        expect(imageId(cluster, 1)).not.toBe(original);
        expect(imageIdentity(cluster, 1)).toBe(imageIdentity(cluster, 0));
        const same = await stack.up();
        expect(same.summary.result).toBe("succeeded");
        expect(imageId(cluster, 1)).not.toBe(original);
        await stack.destroy();
    });

    it("serves one image on both stores (preview names each node's store), and copies it from a containerd first node to a classic one", async () => {
        // After the copies above every node has the first node's image, the third in the containerd store.
        expect(cluster.nodes.map((_, index) => imageIdentity(cluster, index))).toEqual(Array(3).fill(cluster.workloadImageIdentity));
        const stack = await openStack(`${name}-stores`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, MODEL_DIR) });
        stacks.push(stack);
        const preview = await stack.preview();
        expect(preview.stdout).toMatch(
            /the nodes keep images in different Docker image stores: spark1 classic \(overlay2\), spark2 classic \(overlay2\), spark3 containerd \(overlayfs\); served all the same/,
        );
        // Preflight passes: the same content on both stores (Docker's ids differ).
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        await stack.destroy();

        // The other way: the containerd node first (its `docker save` exports this platform only),
        // a classic node that lacks the image second.
        const [classic, , containerd] = cluster.nodes;
        onNode(classic, `docker image rm ${cluster.workloadImage} >/dev/null`);
        const reversed = simStackConfig({ ...cluster, nodes: [containerd, classic] }, MODEL_DIR, { image: { name: cluster.workloadImage, source: "copy" } });
        const copy = await openStack(`${name}-fromcontainerd`, { workDir: workspace.dir, envVars: workspace.envVars, config: reversed });
        stacks.push(copy);
        const copied = await copy.up();
        expect(copied.summary.result).toBe("succeeded");
        expect(JSON.stringify(await copy.exportStack())).toMatch(/image-copied [^"\\]+ bytes=\d+ millis=\d+/);
        expect(imageIdentity(cluster, 0)).toBe(cluster.workloadImageIdentity);
        expect(imageId(cluster, 0)).not.toBe(imageId(cluster, 2));
        await copy.destroy();
    });

    it("copies an update whose top layer changed as about that layer's bytes to a classic node with the old image, the whole image to the containerd one, and serves it", async () => {
        const [source, classic, containerd] = cluster.nodes;
        // Every node has the image (a fresh cluster's, or the tests' copies above): a new build of it
        // on the first node, its top layer 8 MiB more.
        const newLayerBytes = updateTopLayer(source, cluster.workloadImage, 8 * 2 ** 20);
        const imageBytes = Number(onNode(source, `docker image inspect --format '{{.Size}}' ${cluster.workloadImage}`).trim());
        expect(imageIdentity(cluster, 1)).not.toBe(imageIdentity(cluster, 0));
        const stack = await openStack(`${name}-update`, {
            workDir: workspace.dir,
            envVars: workspace.envVars,
            config: simStackConfig(cluster, MODEL_DIR, { image: { name: cluster.workloadImage, source: "copy" } }),
        });
        stacks.push(stack);
        const fabricBefore = interfaceBytes(source, source.fabricIface).tx;
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const fabricSent = interfaceBytes(source, source.fabricIface).tx - fabricBefore;
        expect(cluster.nodes.map((_, index) => imageIdentity(cluster, index))).toEqual(cluster.nodes.map(() => imageIdentity(cluster, 0)));
        const exported = await stack.exportStack();
        const copiedTo = (node: SimNode) => {
            const output = stdoutOf(exported, `spark${node.index + 1}-image`);
            const bytes = Number(/image-copied \S+ \S+ bytes=(\d+)/.exec(output)?.[1]);
            console.log(
                `image update to spark${node.index + 1}: ${(bytes / 2 ** 20).toFixed(2)} MiB over the fabric for a new layer of ${(newLayerBytes / 2 ** 20).toFixed(2)} MiB ` +
                    `(${(bytes / newLayerBytes).toFixed(3)}x; the image is ${(imageBytes / 2 ** 20).toFixed(0)} MiB)`,
            );
            return { output, bytes };
        };
        // The classic node: the new layer, the config and the archive's small files; not the base layer.
        const toClassic = copiedTo(classic);
        expect(toClassic.output).toMatch(/layers-left-out count=1 bytes=\d+ of=2/);
        expect(toClassic.bytes).toBeGreaterThanOrEqual(newLayerBytes);
        expect(toClassic.bytes).toBeLessThanOrEqual(1.1 * newLayerBytes);
        // The containerd node: the whole image (its load needs every blob in its content store).
        const toContainerd = copiedTo(containerd);
        expect(toContainerd.output).toContain("layers-left-out count=0");
        expect(toContainerd.bytes).toBeGreaterThan(0.9 * imageBytes);
        // The interface's count, framing and TCP included: one image and about one new layer.
        expect(fabricSent).toBeLessThan(toContainerd.bytes + 1.1 * newLayerBytes + 4 * 2 ** 20);
        // It serves, every node's rank answering, on the new image.
        const body = await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value);
        for (const node of cluster.nodes) {
            expect(body.choices[0].text).toContain(node.fabricIp);
        }

        // The image removed by hand from the classic node while its containers run: preview says
        // why, and the next up copies it there again, to that node only; the containers stay.
        const containers = running(cluster);
        onNode(classic, `docker rmi -f ${cluster.workloadImage} >/dev/null`);
        expect(() => imageId(cluster, 1)).toThrow();
        expect(await previewWarnings(stack)).toContain(`node spark2: image ${cluster.workloadImage} is not there any more; up copies it again there from spark1`);
        const redelivered = await stack.up();
        expect(redelivered.summary.result).toBe("succeeded");
        expect(redelivered.summary.resourceChanges).toMatchObject({ replace: 1 });
        expect(Object.keys(redelivered.summary.resourceChanges ?? {}).sort()).toEqual(["replace", "same"]);
        const after = await stack.exportStack();
        expect(stdoutOf(after, "spark2-image")).toMatch(/image-copied \S+ \S+ bytes=\d+/);
        expect(stdoutOf(after, "spark3-image")).toBe(toContainerd.output);
        expect(imageIdentity(cluster, 1)).toBe(imageIdentity(cluster, 0));
        expect(running(cluster)).toEqual(containers);
        expect((await complete(redelivered.outputs.endpoint.value, "tiny-moe", redelivered.outputs.apiKey.value)).choices[0].text).toContain(classic.fabricIp);
        expect(Object.keys((await stack.preview()).changeSummary)).toEqual(["same"]);
        await stack.destroy();
    });

    it("refuses a node missing weight files, naming the first, then fixes both over the fabric, at once, in parallel streams; a later change continues a part and deletes what went", async () => {
        onNode(cluster.nodes[1], `rm ${MODEL_DIR}/model-00001-of-00001.safetensors`);
        // Something worth timing: 4 × 64 MiB that only the first node has (disjoint sets, one per stream).
        onNode(
            cluster.nodes[0],
            `for i in 1 2 3 4; do head -c 67108864 /dev/urandom > ${MODEL_DIR}/weights-extra-$i.safetensors; done && chown spark ${MODEL_DIR}/weights-extra-*`,
        );
        const stack = await openStack(`${name}-weights`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, MODEL_DIR) });
        stacks.push(stack);
        const message = await failureOf(stack.up());
        expect(message).toContain(`node spark2: model directory ${MODEL_DIR} differs from spark1's: model-00001-of-00001.safetensors is missing`);
        noContainers(cluster);

        await stack.setConfig("vllm-fleet:model", { value: JSON.stringify({ path: MODEL_DIR, servedName: "tiny-moe", sync: "rsync" }) });
        const steps = stepRecorder();
        const up = await stack.up({ onEvent: steps.onEvent });
        expect(up.summary.result).toBe("succeeded");
        const listing = (index: number) => onNode(cluster.nodes[index], `cd ${MODEL_DIR} && find . -type f -printf '%s %f\\n' | sort`);
        expect(listing(1)).toBe(listing(0));
        expect(listing(2)).toBe(listing(0));
        // The fabric carried it: the daemon on each receiving node listened on its fabric address only.
        const state = JSON.stringify(await stack.exportStack());
        for (const node of cluster.nodes.slice(1)) {
            expect(state).toContain(`receiving into ${MODEL_DIR} on ${node.fabricIp}:28730 (rsync) and ${node.fabricIp}:28732 (bulk)`);
            expect(state).toMatch(new RegExp(`weights-synced to ${node.fabricIp.replace(/\./g, "\\.")} millis=\\d+ streams=4 bytes=\\d+`));
        }
        // The files of 1 MiB or more went in the plain streams, to each node: the 4 new ones and the
        // model file (spark2 lacked it; spark3's was written at another time, which the quick check sees).
        const exported = await stack.exportStack();
        for (const node of ["spark2", "spark3"]) {
            expect(stdoutOf(exported, `${node}-weights-send`)).toMatch(/files-sent files=5 same=0 streams=4 bytes=269484032 /);
            expect(stdoutOf(exported, `${node}-weights-close`)).toMatch(/files-received files=5 bytes=269484032 /);
        }
        const synced = new RegExp(`weights-synced to ${cluster.nodes[1].fabricIp.replace(/\./g, "\\.")} millis=(\\d+) streams=(\\d+) bytes=(\\d+)`).exec(state);
        const bytes = Number(synced![3]);
        expect(bytes).toBeGreaterThan(256 * 1024 ** 2);
        const seconds = Math.max(1, Number(synced![1])) / 1000;
        console.log(`weight sync: ${(bytes / 1024 ** 2).toFixed(0)} MiB in ${seconds.toFixed(2)} s = ${(bytes / 1024 ** 2 / seconds).toFixed(1)} MiB/s in ${synced![2]} streams`);
        // The two receiving nodes were served at once: each one's send overlapped the other's.
        const spans = ["spark2-weights-send", "spark3-weights-send"].map((resource) => steps.spans.get(resource)!);
        expect(spans.every((span) => span !== undefined)).toBe(true);
        expect(spans[0].start < spans[1].end && spans[1].start < spans[0].end).toBe(true);
        // A second up changes nothing and copies nothing.
        const again = await stack.up({ expectNoChanges: true });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);

        // The first node's directory changes: a new 32 MiB file, a small one and a link to it; one file goes.
        // On spark2 a broken earlier run left the first 8 MiB of the new file (its part is named by
        // the file's size and time), a part of a file that is gone, and a file the first node never had.
        onNode(
            cluster.nodes[0],
            `cd ${MODEL_DIR} && head -c 33554432 /dev/urandom > weights-new.safetensors && echo '{}' > extra.json && ln -s extra.json link.json && rm weights-extra-4.safetensors && chown -h spark weights-new.safetensors extra.json link.json`,
        );
        const [size, mtimeNs] = onNode(cluster.nodes[0], `python3 -c 'import os; s = os.stat("${MODEL_DIR}/weights-new.safetensors"); print(s.st_size, s.st_mtime_ns)'`).trim().split(" ");
        const part = `${MODEL_DIR}/.weights-new.safetensors.${size}-${mtimeNs}.fleet-part`;
        execSync(`docker exec ${cluster.nodes[0].name} head -c 8388608 ${MODEL_DIR}/weights-new.safetensors | docker exec -i ${cluster.nodes[1].name} sh -c 'cat > ${part}'`);
        onNode(
            cluster.nodes[1],
            `cd ${MODEL_DIR} && echo old > .weights-gone.safetensors.5-1.fleet-part && echo stray > stray.bin && chown spark .*.fleet-part stray.bin`,
        );
        const changed = await stack.up();
        expect(changed.summary.result).toBe("succeeded");
        const tree = (index: number) =>
            onNode(cluster.nodes[index], `cd ${MODEL_DIR} && find -L . -mindepth 1 \\( -type f -printf '%y %s %P\\n' \\) -o \\( ! -type f -printf '%y %P\\n' \\) | sort`);
        expect(tree(1)).toBe(tree(0));
        expect(tree(2)).toBe(tree(0));
        // A link is followed: the other nodes get what it points to.
        expect(tree(1)).toContain("f 3 link.json");
        expect(onNode(cluster.nodes[1], `find ${MODEL_DIR} -type l`).trim()).toBe("");
        expect(tree(1)).not.toMatch(/fleet-part|stray\.bin|weights-extra-4/);
        const same = (index: number) => onNode(cluster.nodes[index], `sha256sum ${MODEL_DIR}/weights-new.safetensors | cut -d' ' -f1`);
        expect(same(1)).toBe(same(0));
        const later = await stack.exportStack();
        // spark2 took only the 24 MiB it lacked; spark3 the whole file.
        expect(stdoutOf(later, "spark2-weights-send")).toMatch(/files-sent files=1 same=4 streams=1 bytes=25165824 /);
        expect(stdoutOf(later, "spark3-weights-send")).toMatch(/files-sent files=1 same=4 streams=1 bytes=33554432 /);
        expect(stdoutOf(later, "spark2-weights-close")).toMatch(/files-received files=1 bytes=25165824 .* stale-parts-removed=1/);
        await stack.destroy();
    });

    it("refuses a model that cannot fit, with the numbers, before any container, and again at preview", async () => {
        const bigDir = "/home/spark/models/too-big";
        putTinyModel(cluster, bigDir);
        // A sparse 200 GB weight file: the size is what the planner reads, no disk is used.
        for (const node of cluster.nodes) {
            onNode(node, `truncate -s 200G ${bigDir}/model-00001-of-00001.safetensors`);
        }
        const stack = await openStack(`${name}-fit`, { workDir: workspace.dir, envVars: workspace.envVars, config: simStackConfig(cluster, bigDir) });
        stacks.push(stack);
        const message = await failureOf(stack.up());
        expect(message).toMatch(/needs \d+\.\d GiB per rank \(\d+\.\d GiB of weights \+ \d+\.\d GiB runtime overhead\), spark1 has \d+\.\d GiB usable/);
        noContainers(cluster);
        // The probes' facts are in the state now: preview refuses with the same numbers.
        expect(await failureOf(stack.preview())).toMatch(/needs \d+\.\d GiB per rank/);
    });

    it("refuses an image without Ray under the ray executor, before any container, naming the image and suggesting mp", async () => {
        // The stand-in image with Ray uninstalled: what vLLM's own images are since about 0.19.
        const noRay = "vllm-fleet-sim-noray:1";
        const [first] = cluster.nodes;
        onNode(
            first,
            `docker run --name noray --entrypoint sh ${cluster.workloadImage} -c 'pip uninstall -y --break-system-packages ray >/dev/null 2>&1 || pip uninstall -y ray >/dev/null' && docker commit noray ${noRay} >/dev/null && docker rm noray >/dev/null`,
        );
        try {
            // One node: the check runs on the first node, before Ray or vLLM starts anywhere.
            const config = simStackConfig({ ...cluster, nodes: [first] }, MODEL_DIR, { image: { name: noRay, source: "present" }, executor: "ray" });
            const stack = await openStack(`${name}-noray`, { workDir: workspace.dir, envVars: workspace.envVars, config });
            stacks.push(stack);
            const message = await failureOf(stack.up());
            expect(message).toContain(`the image ${noRay} has no Ray`);
            expect(message).toContain("set vllm-fleet:executor to mp");
            noContainers(cluster);
        } finally {
            onNode(first, `docker image rm ${noRay} >/dev/null 2>&1 || true`);
        }
    });

    it("pulls an image pinned by digest from the registry on every node and serves it; a second up pulls nothing; a digest the registry lacks is refused; a tag alone is warned about with the first node's digest", async () => {
        const pinned = await simPush(name, cluster.workloadImage, "vllm-fleet/workload:e2e");
        const { repository, digest } = parseImageName(pinned);
        expect(repository).toBe(`${cluster.registry}/vllm-fleet/workload`);
        expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
        // No node knows the image by the registry's name yet: what arrives there is the pull's doing.
        for (const node of cluster.nodes) {
            expect(onNode(node, `docker images --digests --format '{{.Repository}}@{{.Digest}}'`)).not.toContain(repository);
        }
        const config = (image: string) => simStackConfig(cluster, MODEL_DIR, { image: { name: image, source: "pull" } });
        const manifest = `/v2/vllm-fleet/workload/manifests/${digest}`;
        const served = registryRequests(cluster).length;

        const stack = await openStack(`${name}-pull`, { workDir: workspace.dir, envVars: workspace.envVars, config: config(pinned) });
        stacks.push(stack);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        // Every node fetched the manifest by its digest from the registry, and knows the image by it.
        const fetched = registryRequests(cluster)
            .slice(served)
            .filter((request) => request.method === "GET" && request.path === manifest);
        expect([...new Set(fetched.map((request) => request.ip))].sort()).toEqual(cluster.nodes.map((node) => node.mgmtIp).sort());
        const identity = imageIdentity(cluster, 0);
        const exported = await stack.exportStack();
        for (const node of cluster.nodes) {
            expect(onNode(node, `docker image inspect --format '{{join .RepoDigests " "}}' ${pinned}`).trim().split(" ")).toContain(pinned);
            expect(stdoutOf(exported, `spark${node.index + 1}-image`).trim()).toBe(`image-pulled ${pinned} ${identity}`);
        }
        // The containerd store (spark3) pulled it by digest too: its Docker id is the manifest's digest
        // there, the config's on the classic store; one content identity on both.
        const dockerId = (index: number) => onNode(cluster.nodes[index], `docker image inspect --format '{{.Id}}' ${pinned}`).trim();
        expect(dockerId(2)).toBe(digest);
        expect(dockerId(0)).not.toBe(digest);
        const text = (await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value)).choices[0].text;
        expect(text).toMatch(/^ranks: /);

        // A second up changes nothing and asks the registry nothing.
        const asked = registryRequests(cluster).length;
        const again = await stack.up({ expectNoChanges: true });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        expect(registryRequests(cluster).slice(asked)).toEqual([]);

        // The image removed by hand from spark2 while its containers run: the next up pulls it
        // there again, there only; the containers stay; the preview after it shows nothing to do.
        const containers = running(cluster);
        onNode(cluster.nodes[1], `docker rmi -f ${pinned} >/dev/null`);
        const before = registryRequests(cluster).length;
        const repulled = await stack.up();
        expect(repulled.summary.resourceChanges).toMatchObject({ replace: 1 });
        // Only spark2 pulled: it alone reached the registry (the image's content still there under
        // the running containers, its Docker asked for nothing more than the API's root).
        const asking = registryRequests(cluster).slice(before);
        expect([...new Set(asking.map((request) => request.ip))], JSON.stringify(asking)).toEqual([cluster.nodes[1].mgmtIp]);
        expect(onNode(cluster.nodes[1], `docker image inspect --format '{{join .RepoDigests " "}}' ${pinned}`).trim().split(" ")).toContain(pinned);
        expect(running(cluster)).toEqual(containers);
        expect((await complete(repulled.outputs.endpoint.value, "tiny-moe", repulled.outputs.apiKey.value)).choices[0].text).toMatch(/^ranks: /);
        expect(Object.keys((await stack.preview()).changeSummary)).toEqual(["same"]);
        await stack.destroy();

        // A digest the registry does not have: refused, naming the image and the node, before any container.
        const missing = `${repository}@sha256:${createHash("sha256").update("never pushed").digest("hex")}`;
        const absent = await openStack(`${name}-absent`, { workDir: workspace.dir, envVars: workspace.envVars, config: config(missing) });
        stacks.push(absent);
        const refused = await failureOf(absent.up());
        // Each node's pull fails alike; the engine starts no step after the first failure, so a node
        // whose pull had not started yet is not named.
        const named = cluster.nodes.filter((node) => refused.includes(`spark${node.index + 1}-image (create) on node spark${node.index + 1} (spark@${node.sshHost}:${node.sshPort}): docker pull ${missing} failed:`));
        expect(named.length, refused).toBeGreaterThan(0);
        // and every node whose image step failed failed so.
        expect(new Set([...refused.matchAll(/spark(\d)-image \(create\) on node/g)].map((match) => match[1])).size, refused).toBe(named.length);
        expect(refused).toContain(`; ${cluster.registry} has no manifest for that digest: push the image there, or correct vllm-fleet:image.name`);
        noContainers(cluster);

        // The same registry under a name the nodes' Docker does not trust for plain HTTP (as a Spark
        // whose daemon.json lacks it): Docker tries HTTPS, and the refusal says where the fix is.
        const [registryIp, port] = cluster.registry!.split(":");
        const alias = `registry.sim:${port}`;
        for (const node of cluster.nodes) {
            onNode(node, `echo '${registryIp} registry.sim' >> /etc/hosts`);
        }
        try {
            const untrusted = await openStack(`${name}-untrusted`, { workDir: workspace.dir, envVars: workspace.envVars, config: config(pinned.replace(cluster.registry!, alias)) });
            stacks.push(untrusted);
            const https = await failureOf(untrusted.up());
            expect(https).toContain(`http: server gave HTTP response to HTTPS client; ${alias} serves plain HTTP, which this node's Docker does not trust`);
            expect(https).toContain(`the fix is on the node: add "insecure-registries": ["${alias}"] to /etc/docker/daemon.json`);
            noContainers(cluster);
        } finally {
            for (const node of cluster.nodes) {
                // /etc/hosts is Docker's bind mount: rewritten in place, not replaced.
                onNode(node, "grep -v ' registry.sim$' /etc/hosts > /tmp/hosts && cat /tmp/hosts > /etc/hosts && rm /tmp/hosts");
            }
        }

        // A tag alone: warned about at preview; once pulled, the warning names the digest spark1 has.
        const tagged = `${repository}:e2e`;
        const byTag = await openStack(`${name}-tag`, { workDir: workspace.dir, envVars: workspace.envVars, config: config(tagged) });
        stacks.push(byTag);
        const lead = `vllm-fleet:image.name ${tagged} is a tag, which can move to another build (nightly images do); spark1`;
        expect(await previewWarnings(byTag)).toContain(`${lead} has no such image yet: pin it by digest (${repository}@sha256:...)`);
        expect((await byTag.up()).summary.result).toBe("succeeded");
        const suggested = `${tagged}@${digest}`;
        expect(await previewWarnings(byTag)).toContain(`${lead} has it as ${suggested}: set vllm-fleet:image.name to that to pin this build`);
        // Pinned as the warning says (tag and digest): no warning, and it serves.
        await byTag.setConfig("vllm-fleet:image", { value: JSON.stringify({ name: suggested, source: "pull" }) });
        expect(await previewWarnings(byTag)).not.toContain("is a tag");
        const repinned = await byTag.up();
        expect(repinned.summary.result).toBe("succeeded");
        expect((await complete(repinned.outputs.endpoint.value, "tiny-moe", repinned.outputs.apiKey.value)).choices[0].text).toMatch(/^ranks: /);
        await byTag.destroy();
    });

    it("copies from a containerd first node an image it pulled (gzip layers, an index of two platforms): classic nodes get only the layers they lack", async () => {
        const [classic, older, containerd] = cluster.nodes;
        // A new build of the image on spark1 (its top layer 2 MiB more), pushed to the registry from
        // that classic node (so the registry has its layers gzip-compressed); spark2 and spark3 keep
        // the build before.
        const newLayerBytes = updateTopLayer(classic, cluster.workloadImage, 2 * 2 ** 20);
        onNode(classic, `docker tag ${cluster.workloadImage} vllm-fleet-update:2`);
        const pushed = parseImageName(await simPush(name, "vllm-fleet-update:2", "vllm-fleet/workload:update"));
        // Published as vLLM's images are: an index naming the manifest for the nodes' platform and one
        // for another platform (a tiny stand-in image that never runs).
        const platform = onNode(containerd, "docker version --format '{{.Server.Os}}/{{.Server.Arch}}'").trim();
        const other = platform === "linux/arm64" ? "linux/amd64" : "linux/arm64";
        const index = await pushMultiPlatformIndex(cluster.registry!, "vllm-fleet/workload", "multi", pushed.digest!, platform, other);
        const image = `${cluster.registry}/vllm-fleet/workload:multi`;
        const served = registryRequests(cluster).length;
        // The containerd node pulls it by digest: its own platform's manifest, config and layers only
        // (the registry's gzip blobs), under the index's digest.
        onNode(containerd, `docker pull --quiet ${index.pinned} >/dev/null && docker tag ${index.pinned} ${image}`);
        expect(onNode(containerd, `docker image inspect --format '{{.Id}}' ${image}`).trim()).toBe(index.indexDigest);
        const fetched = registryRequests(cluster)
            .slice(served)
            .filter((request) => request.ip === containerd.mgmtIp)
            .map((request) => request.path);
        expect(fetched).toContain(`/v2/vllm-fleet/workload/manifests/${pushed.digest}`);
        expect(fetched.join(" ")).not.toContain(index.otherManifestDigest);
        const identity = imageIdentity(cluster, 2, image);
        expect(identity).toBe(imageIdentity(cluster, 0));

        // The containerd node first: spark1 has every layer (under another tag), spark2 all but the new top one.
        const config = simStackConfig({ ...cluster, nodes: [containerd, classic, older] }, MODEL_DIR, { image: { name: image, source: "copy" } });
        const stack = await openStack(`${name}-pulled`, { workDir: workspace.dir, envVars: workspace.envVars, config });
        stacks.push(stack);
        // The pull found the base layer unpacked already (the build before) and did not fetch its
        // blob: Docker 26.1 does not list the image and would save no layer of it. Refused, saying so.
        expect(onNode(containerd, "docker image ls --all --quiet --no-trunc")).not.toContain(index.indexDigest);
        const refused = await failureOf(stack.up());
        expect(refused).toContain(`on node spark3`);
        expect(refused).toContain(`${image} here lacks blobs (docker image ls omits it; its docker save would hold no layers)`);
        expect(refused).toContain("the fix is on this node: remove");
        // It names the images sharing the bottom layer that Docker lists (the loaded build before);
        // containerd's own list (as root) has the pinned image the case before pulled there too, unlisted by Docker.
        expect(refused).toMatch(/those here: [^;]*vllm-fleet-sim\/workload:\S+ .*sudo ctr -n moby images ls lists them/);
        const bottom = (ref: string) => onNode(containerd, `docker image inspect --format '{{index .RootFS.Layers 0}}' ${ref}`).trim();
        const imageBottom = bottom(image);
        const sharing = onNode(containerd, "ctr --address /var/run/docker/containerd/containerd.sock --namespace moby images ls --quiet")
            .split("\n")
            .filter((ref) => ref !== "" && bottom(ref) === imageBottom);
        expect(sharing.filter((ref) => ref.startsWith(`${cluster.registry}/vllm-fleet/workload`) && ref !== image && ref !== index.pinned)).not.toEqual([]);
        // Done as it says: those removed, the pull again fetches every blob. containerd collects the
        // removed images' content and snapshots in the background: a pull that comes first still
        // finds the layer unpacked and is unlisted again, so the pull is repeated (after a removal of
        // what it pulled) until Docker lists it, as a user would.
        onNode(containerd, `docker image rm --force ${sharing.join(" ")} >/dev/null`);
        onNode(
            containerd,
            `for try in $(seq 10); do docker pull --quiet ${index.pinned} >/dev/null && docker tag ${index.pinned} ${image} && ` +
                `if docker image ls --all --quiet --no-trunc | grep -qx '${index.indexDigest}'; then exit 0; fi; ` +
                `docker image rm --force ${index.pinned} ${image} >/dev/null; sleep 2; done; exit 1`,
        );
        expect(onNode(containerd, "docker image ls --all --quiet --no-trunc")).toContain(index.indexDigest);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        expect(cluster.nodes.map((_, index) => imageIdentity(cluster, index, image))).toEqual([identity, identity, identity]);
        const exported = await stack.exportStack();
        const toClassic = stdoutOf(exported, "spark1-image");
        const toOlder = stdoutOf(exported, "spark2-image");
        expect(toClassic).toMatch(/layers-left-out count=2 bytes=\d+ of=2/);
        expect(toOlder).toMatch(/layers-left-out count=1 bytes=\d+ of=2/);
        // The new top layer went as the registry compressed it (random bytes: about their size).
        const bytes = Number(/image-copied \S+ \S+ bytes=(\d+)/.exec(toOlder)?.[1]);
        console.log(`pulled image copied to spark2: ${(bytes / 2 ** 20).toFixed(2)} MiB over the fabric for a new layer of ${(newLayerBytes / 2 ** 20).toFixed(2)} MiB`);
        expect(bytes).toBeGreaterThan(0.5 * newLayerBytes);
        expect(bytes).toBeLessThanOrEqual(1.1 * newLayerBytes);
        expect(Number(/image-copied \S+ \S+ bytes=(\d+)/.exec(toClassic)?.[1])).toBeLessThan(2 ** 20);
        // It serves, every node's rank answering.
        const body = await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value);
        for (const node of cluster.nodes) {
            expect(body.choices[0].text).toContain(node.fabricIp);
        }
        await stack.destroy();
    });
});
