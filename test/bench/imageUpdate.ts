/**
 * `npm run bench -- --image-update`: an update moves only what changed (issue 24). On 2 simulated
 * Sparks, K times: a new build of the workload image on the first node, its top layer changed (the
 * old top layer's files and 64 MiB more: test/e2e/imageUpdate.ts), copied to the second node, which
 * has the build before, with the product's scripts (image-receive.sh + image-send.sh as the runner
 * starts them). It reports the bytes that went over the fabric (the first node's fabric interface,
 * TCP/IP included) against the new layer's size (target ≤ 1.1×), and for contrast one whole copy of
 * the same image to the node once it has none of it. Writes DIR/image-update.md and .json.
 */
import { execFileSync } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as path from "path";
import { readScript, scriptProgram } from "../../components/shell";
import { IMAGE_COPY_PORT } from "../../infra/core/names";
import { updateTopLayer } from "../e2e/imageUpdate";
import { SimCluster, onNode, simDown, simUp } from "../e2e/simCluster";
import { BenchOptions } from "./args";
import { log } from "./log";
import { overSsh } from "./ssh";
import { TargetResult, median } from "./targets";

/** Bytes added to the top layer of each new build. */
const EXTRA_BYTES = 64 * 2 ** 20;
/** The most bytes over the fabric per byte of the new layer (issue 24). */
const UPDATE_TARGET = 1.1;

/** One copy of an image from the first node to the second. */
export interface ImageCopySample {
    /** The size of the new top layer's file in the archive (0 for the whole copy). */
    readonly newLayerBytes: number;
    /** Bytes the first node sent on its fabric interface during the copy (TCP/IP headers included). */
    readonly fabricBytes: number;
    /** The stream's payload as the receiver counted it (`image-copied ... bytes=`). */
    readonly streamBytes: number;
    readonly seconds: number;
    /** The sender's `layers-left-out count=K bytes=N of=L`. */
    readonly leftOut: string;
}

/** What the image-update bench measured. */
export interface ImageUpdateRecord {
    readonly startedAt: string;
    /** The nodes' Docker engine and image store, as the first node reports them. */
    readonly docker: string;
    /** The image's size (`docker image inspect .Size`). */
    readonly imageBytes: number;
    readonly updates: readonly ImageCopySample[];
    /** The same image copied to a node that has none of it. */
    readonly whole?: ImageCopySample;
    readonly failure?: string;
}

/** The target: bytes over the fabric per byte of the new layer, the median of the updates, at most 1.1. */
export function imageUpdateTargets(record: ImageUpdateRecord): TargetResult[] {
    if (record.updates.length === 0) {
        return [{ target: "image update: bytes over the fabric / new layer (at most)", limit: UPDATE_TARGET, passed: false, detail: "no update was measured" }];
    }
    const ratios = record.updates.map((sample) => sample.fabricBytes / sample.newLayerBytes);
    const value = median(ratios);
    const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
    const middle = record.updates[ratios.indexOf(value)] ?? record.updates[0];
    return [
        {
            target: "image update: bytes over the fabric / new layer (at most)",
            value,
            limit: UPDATE_TARGET,
            passed: value <= UPDATE_TARGET,
            detail:
                `${mib(middle.fabricBytes)} MiB over the fabric (stream ${mib(middle.streamBytes)} MiB) for a new layer of ${mib(middle.newLayerBytes)} MiB in a ${mib(record.imageBytes)} MiB image; ` +
                `${ratios.length} updates: ${ratios.map((ratio) => ratio.toFixed(3)).join(", ")}` +
                (record.whole ? `; the whole image copied: ${mib(record.whole.fabricBytes)} MiB over the fabric` : ""),
        },
    ];
}

/** image-update.md. */
export function imageUpdateReport(record: ImageUpdateRecord): string {
    const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
    const row = (label: string, sample: ImageCopySample) =>
        `| ${label} | ${sample.newLayerBytes ? mib(sample.newLayerBytes) : "–"} | ${mib(sample.streamBytes)} | ${mib(sample.fabricBytes)} | ${sample.newLayerBytes ? (sample.fabricBytes / sample.newLayerBytes).toFixed(3) : "–"} | ${sample.seconds.toFixed(2)} | ${sample.leftOut || "–"} |`;
    const lines = [
        "# Image update: an update moves only what changed",
        "",
        `Run ${record.startedAt}. Two simulated Sparks (their Docker: ${record.docker}); the workload image (${mib(record.imageBytes)} MiB, two layers) rebuilt on the first node with its top layer changed ` +
            `(the old top layer's files and ${mib(EXTRA_BYTES)} MiB more), copied to the second node, which has the build before, by image-receive.sh + image-send.sh. ` +
            "Bytes over the fabric: what the first node's fabric interface sent during the copy (TCP/IP headers and the stream's framing included).",
        "",
        "| copy | new layer MiB | stream MiB | over the fabric MiB | fabric / new layer | seconds | left out |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        ...record.updates.map((sample, index) => row(`update ${index + 1}`, sample)),
        ...(record.whole ? [row("whole image (node without it)", record.whole)] : []),
        "",
        "| target | value | limit | verdict | detail |",
        "| --- | --- | --- | --- | --- |",
        ...imageUpdateTargets(record).map((result) => `| ${result.target} | ${result.value?.toFixed(3) ?? "–"} | ${result.limit} | ${result.passed ? "pass" : "FAIL"} | ${result.detail} |`),
        ...(record.failure ? ["", `FAILED: ${record.failure}`] : []),
        "",
    ];
    return lines.join("\n");
}

function txBytes(cluster: SimCluster, iface: string): number {
    return Number(execFileSync("docker", ["exec", cluster.nodes[0].name, "cat", `/sys/class/net/${iface}/statistics/tx_bytes`], { encoding: "utf8" }).trim());
}

/** The content identity of the image on a node (components/scripts/image-identity.sh). */
function identityOn(cluster: SimCluster, index: number): string {
    return onNode(cluster.nodes[index], `${readScript("image-identity")}\nimage_identity ${cluster.workloadImage}`).trim();
}

/** One copy of the workload image from node 0 to node 1 with the product's scripts. */
async function copyOnce(cluster: SimCluster, newLayerBytes: number): Promise<ImageCopySample> {
    const [source, target] = cluster.nodes;
    const secret = crypto.randomBytes(16).toString("hex");
    const common = { IMAGE: cluster.workloadImage, WANT_IDENTITY: identityOn(cluster, 0), PORT: IMAGE_COPY_PORT, SECRET: secret, FABRIC_STREAM: readScript("fabric-stream.py") };
    const before = txBytes(cluster, source.fabricIface);
    const start = Date.now();
    const [received, sent] = await Promise.all([
        // The receiver leaves its delivery mark as in a stack (image-mark.sh), under a name of the bench's own.
        overSsh(cluster, 1, scriptProgram(["image-identity", "image-mark", "image-receive"], { ...common, BIND_IP: target.fabricIp, SENDER_IP: source.fabricIp, MARK: ".vllm-fleet/bench/image-update", REVISION: "bench" })),
        overSsh(cluster, 0, scriptProgram(["image-identity", "image-send"], { ...common, TARGET_IP: target.fabricIp, IMAGE_LAYERS: readScript("image-layers.py") })),
    ]);
    const seconds = (Date.now() - start) / 1000;
    const fabricBytes = txBytes(cluster, source.fabricIface) - before;
    if (received.code !== 0 || sent.code !== 0) {
        throw new Error(`image copy failed: receiver ${received.code} ${received.stderr}; sender ${sent.code} ${sent.stderr}`);
    }
    if (identityOn(cluster, 1) !== common.WANT_IDENTITY) {
        throw new Error("after the copy the second node's image is not the first node's (content identity)");
    }
    const streamBytes = Number(/image-copied \S+ \S+ bytes=(\d+)/.exec(received.stdout)?.[1] ?? NaN);
    const leftOut = /layers-left-out (count=\d+ bytes=\d+ of=\d+)/.exec(sent.stdout)?.[1] ?? "";
    log(`image copy: ${(fabricBytes / 2 ** 20).toFixed(1)} MiB over the fabric in ${seconds.toFixed(2)} s (${leftOut || "nothing left out"})`);
    return { newLayerBytes, fabricBytes, streamBytes, seconds, leftOut };
}

/** Runs the image-update bench; false when it failed. */
export async function runImageUpdateBench(options: BenchOptions): Promise<boolean> {
    const startedAt = new Date().toISOString();
    const clusterName = "imgupd2";
    let clusterUp = false;
    let cleaning: Promise<void> | undefined;
    const cleanUp = () =>
        (cleaning ??= (async () => {
            if (clusterUp) {
                try {
                    log(`removing simulated cluster ${clusterName}`);
                    await simDown(clusterName);
                } catch (error) {
                    log(`could not remove ${clusterName}: ${(error as Error).message}`);
                }
            }
        })());
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
        process.once(signal, () => {
            log(`${signal}: cleaning up`);
            void cleanUp().finally(() => process.exit(130));
        });
    }
    const updates: ImageCopySample[] = [];
    let whole: ImageCopySample | undefined;
    let imageBytes = 0;
    let docker = "not read";
    let failure: string | undefined;
    try {
        log(`bringing up simulated cluster ${clusterName} (2 nodes)`);
        clusterUp = true;
        const cluster = await simUp(clusterName, 2);
        docker = onNode(cluster.nodes[0], "docker info --format '{{.ServerVersion}}, storage driver {{.Driver}}'").trim();
        for (let run = 1; run <= options.runs; run++) {
            log(`image update ${run} of ${options.runs}: a new build on the first node, its top layer changed`);
            const newLayerBytes = updateTopLayer(cluster.nodes[0], cluster.workloadImage, EXTRA_BYTES);
            updates.push(await copyOnce(cluster, newLayerBytes));
        }
        imageBytes = Number(onNode(cluster.nodes[0], `docker image inspect --format '{{.Size}}' ${cluster.workloadImage}`).trim());
        log("the whole image, to the second node once it has none of it");
        onNode(cluster.nodes[1], "docker image ls --all --quiet | xargs -r docker image rm --force >/dev/null");
        whole = await copyOnce(cluster, 0);
    } catch (error) {
        failure = (error as Error).message;
        log(`FAILED: ${(error as Error).stack ?? failure}`);
    } finally {
        await cleanUp();
    }
    const record: ImageUpdateRecord = { startedAt, docker, imageBytes, updates, whole, failure };
    fs.mkdirSync(options.outDir, { recursive: true });
    fs.writeFileSync(path.join(options.outDir, "image-update.json"), JSON.stringify({ ...record, targets: imageUpdateTargets(record) }, null, 2));
    const report = imageUpdateReport(record);
    fs.writeFileSync(path.join(options.outDir, "image-update.md"), report);
    console.log(report);
    log(`report: ${path.join(options.outDir, "image-update.md")}`);
    return failure === undefined;
}
