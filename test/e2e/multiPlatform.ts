/**
 * A multi-platform image in the proving ground's registry, made by hand as vLLM's and NVIDIA's
 * published images are made: an OCI index naming one image manifest per platform. Here the index
 * holds a real image's manifest (already in the registry, pushed for the nodes' platform) and a
 * second platform's manifest of a tiny config and one tiny layer (they never run; a node pulling
 * the index for its own platform never fetches them). Through the registry's HTTP API (the
 * distribution registry, plain HTTP). For the image copy of such an image (test/e2e/distribution.test.ts).
 */
import { createHash } from "crypto";
import { gzipSync } from "zlib";

const INDEX = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const MANIFESTS = [OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json"];

const digestOf = (data: Buffer) => `sha256:${createHash("sha256").update(data).digest("hex")}`;

async function registryCall(url: string, init: RequestInit, expected: number): Promise<Response> {
    const response = await fetch(url, init);
    if (response.status !== expected) {
        throw new Error(`${init.method ?? "GET"} ${url}: HTTP ${response.status} (expected ${expected}): ${await response.text()}`);
    }
    return response;
}

/** Uploads a blob (a monolithic upload: POST, then PUT with its digest); its descriptor. */
async function pushBlob(base: string, data: Buffer, mediaType: string): Promise<{ mediaType: string; digest: string; size: number }> {
    const digest = digestOf(data);
    const started = await registryCall(`${base}/blobs/uploads/`, { method: "POST" }, 202);
    const location = new URL(started.headers.get("location")!, base);
    location.searchParams.set("digest", digest);
    await registryCall(location.toString(), { method: "PUT", headers: { "Content-Type": "application/octet-stream" }, body: data }, 201);
    return { mediaType, digest, size: data.length };
}

async function pushManifest(base: string, reference: string, data: Buffer, mediaType: string): Promise<string> {
    await registryCall(`${base}/manifests/${reference}`, { method: "PUT", headers: { "Content-Type": mediaType }, body: data }, 201);
    return digestOf(data);
}

/** A tar of one small file (ustar), the tiny layer's content. */
function tinyTar(name: string, content: string): Buffer {
    const data = Buffer.from(content);
    const header = Buffer.alloc(512);
    header.write(name, 0);
    header.write("0000644\0", 100);
    header.write("0000000\0", 108);
    header.write("0000000\0", 116);
    header.write(data.length.toString(8).padStart(11, "0") + "\0", 124);
    header.write("00000000000\0", 136);
    header.write("        ", 148);
    header.write("0", 156);
    header.write("ustar\0" + "00", 257);
    let sum = 0;
    for (const byte of header) {
        sum += byte;
    }
    header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    const body = Buffer.alloc(Math.ceil(data.length / 512) * 512);
    data.copy(body);
    return Buffer.concat([header, body, Buffer.alloc(1024)]);
}

export interface MultiPlatformImage {
    /** `<registry>/<repo>@<index digest>`. */
    readonly pinned: string;
    readonly indexDigest: string;
    /** The other platform's manifest digest (never pulled by the nodes). */
    readonly otherManifestDigest: string;
}

/**
 * Pushes to `registry` (`host:port`) an index tagged `repository:tag` naming the manifest
 * `manifestDigest` of `repository` (already there) for `platform` (`os/arch`), and a tiny image
 * for `otherPlatform`.
 */
export async function pushMultiPlatformIndex(
    registry: string,
    repository: string,
    tag: string,
    manifestDigest: string,
    platform: string,
    otherPlatform: string,
): Promise<MultiPlatformImage> {
    const base = `http://${registry}/v2/${repository}`;
    const real = await registryCall(`${base}/manifests/${manifestDigest}`, { headers: { Accept: MANIFESTS.join(", ") } }, 200);
    const realBytes = Buffer.from(await real.arrayBuffer());
    const realType = real.headers.get("content-type")!.split(";")[0];
    const [os, architecture] = platform.split("/");
    const [otherOs, otherArchitecture] = otherPlatform.split("/");

    const tar = tinyTar("other-platform.txt", `a layer for ${otherPlatform} only\n`);
    const layer = await pushBlob(base, gzipSync(tar), "application/vnd.oci.image.layer.v1.tar+gzip");
    const configBytes = Buffer.from(
        JSON.stringify({
            architecture: otherArchitecture,
            os: otherOs,
            config: { Cmd: ["/bin/false"] },
            rootfs: { type: "layers", diff_ids: [digestOf(tar)] },
        }),
    );
    const config = await pushBlob(base, configBytes, "application/vnd.oci.image.config.v1+json");
    const otherBytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config, layers: [layer] }));
    const otherManifestDigest = await pushManifest(base, digestOf(otherBytes), otherBytes, OCI_MANIFEST);
    const indexBytes = Buffer.from(
        JSON.stringify({
            schemaVersion: 2,
            mediaType: INDEX,
            manifests: [
                { mediaType: realType, digest: manifestDigest, size: realBytes.length, platform: { architecture, os } },
                { mediaType: OCI_MANIFEST, digest: otherManifestDigest, size: otherBytes.length, platform: { architecture: otherArchitecture, os: otherOs } },
            ],
        }),
    );
    const indexDigest = await pushManifest(base, tag, indexBytes, INDEX);
    return { pinned: `${registry}/${repository}@${indexDigest}`, indexDigest, otherManifestDigest };
}
