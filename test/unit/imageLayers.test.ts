/**
 * components/scripts/image-layers.py, the image copy's archive rewrite, on real `docker save`
 * archives of a two-layer image (test/fixtures/image-archives: Docker 20.10's legacy layout,
 * `<v1 id>/layer.tar`, Docker 26.1's OCI layout, `blobs/sha256/<digest>`, and the same image pulled
 * from a registry into Docker 26.1's containerd store, its layers gzip blobs named by their
 * compressed digests): a layer the target has under the same chain is left out and nothing else is
 * touched; a target on the containerd store, or one that offers nothing, gets the archive byte for
 * byte; the archive is followed while the save still writes it.
 */
import { ChildProcess, execFileSync, spawn } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as zlib from "zlib";
import { afterAll, describe, expect, it } from "vitest";
import { readScript } from "../../components/shell";

const LAYERS = readScript("image-layers.py");
const FIXTURES = path.join(__dirname, "..", "fixtures", "image-archives");
const layerLists = Object.fromEntries(
    fs
        .readFileSync(path.join(FIXTURES, "layers.txt"), "utf8")
        .split("\n")
        .filter((line) => line && !line.startsWith("#"))
        .map((line) => {
            const [name, ...layers] = line.trim().split(/\s+/);
            return [name, layers];
        }),
) as Record<"app-1" | "app-2", string[]>;
const [BASE, OLD_TOP] = layerLists["app-1"];
const NEW_TOP = layerLists["app-2"][1];
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "image-layers-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

interface Thinned {
    code: number | null;
    archive: Buffer;
    stderr: string;
}

/** Runs the rewrite of `archive` (written by process `saver`, 0: whole) for a target that offered `offer`. */
function thin(archive: string, offer: string, diffIds: readonly string[] = layerLists["app-2"], saver = 0): Promise<Thinned> {
    const offerFile = path.join(scratch, `offer-${crypto.randomUUID()}`);
    fs.writeFileSync(offerFile, offer);
    return new Promise((resolve) => {
        const child = spawn("python3", ["-c", LAYERS, archive, String(saver), offerFile, "--", ...diffIds], { stdio: ["ignore", "pipe", "pipe"] });
        const out: Buffer[] = [];
        let stderr = "";
        child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
        child.stderr.on("data", (chunk) => (stderr += chunk));
        child.on("close", (code) => resolve({ code, archive: Buffer.concat(out), stderr }));
    });
}

/** The members of a tar archive, as GNU tar lists them. */
function members(archive: Buffer): string[] {
    return execFileSync("tar", ["-t"], { input: archive, encoding: "utf8" }).trim().split("\n");
}

/** One member's bytes. */
function member(archive: Buffer, name: string): Buffer {
    return execFileSync("tar", ["-xO", name], { input: archive, maxBuffer: 1 << 26 });
}

const sha256 = (data: Buffer) => `sha256:${crypto.createHash("sha256").update(data).digest("hex")}`;

const isGzip = (data: Buffer) => data.length > 2 && data[0] === 0x1f && data[1] === 0x8b;

/** The layer files of an archive, by the diff id their bytes (uncompressed) hash to. */
function layerFiles(archive: Buffer): Map<string, string> {
    const layers = new Map<string, string>();
    for (const name of members(archive).filter((name) => /(^|\/)layer\.tar$|^blobs\/sha256\/[0-9a-f]{64}$/.test(name))) {
        const bytes = member(archive, name);
        const digest = sha256(isGzip(bytes) ? zlib.gunzipSync(bytes) : bytes);
        if (digest === BASE || digest === OLD_TOP || digest === NEW_TOP) {
            layers.set(digest, name);
        }
    }
    return layers;
}

const classic = (...images: readonly (readonly string[])[]) => ["store classic", ...images.map((layers) => `image ${layers.join(" ")}`)].join("\n") + "\n";

describe.each([
    { layout: "legacy (Docker 20.10)", file: "app-2.docker20.tar" },
    { layout: "OCI (Docker 26.1)", file: "app-2.docker26.tar" },
    { layout: "OCI, pulled into the containerd store (Docker 26.1: gzip layers)", file: "app-2.docker26-pulled.tar" },
])("image-layers.py on a $layout save", ({ file }) => {
    const saved = path.join(FIXTURES, file);
    const original = fs.readFileSync(saved);

    it("is a save of the two-layer image with both layer files in it", () => {
        expect([...layerFiles(original).keys()].sort()).toEqual([BASE, NEW_TOP].sort());
    });

    it("leaves out the bottom layer a target on the classic store has under the same chain, and nothing else", async () => {
        const result = await thin(saved, classic(layerLists["app-1"]));
        expect(result.code).toBe(0);
        const removed = layerFiles(original).get(BASE)!;
        expect(members(result.archive)).toEqual(members(original).filter((name) => name !== removed));
        // The new top layer and every other member are there byte for byte.
        expect(layerFiles(result.archive).get(NEW_TOP)).toBe(layerFiles(original).get(NEW_TOP));
        for (const name of members(result.archive).filter((name) => !name.endsWith("/"))) {
            expect(member(result.archive, name).equals(member(original, name))).toBe(true);
        }
        const left = /layers-left-out count=(\d+) bytes=(\d+) of=(\d+)/.exec(result.stderr);
        expect(left?.slice(1).map(Number)).toEqual([1, member(original, removed).length, 2]);
        expect(result.archive.length).toBeLessThan(original.length - member(original, removed).length + 1024);
    });

    it("leaves out both layers for a target that has the very image (under another tag)", async () => {
        const result = await thin(saved, classic(layerLists["app-1"], layerLists["app-2"]));
        expect(result.code).toBe(0);
        expect(layerFiles(result.archive).size).toBe(0);
        expect(result.stderr).toContain("layers-left-out count=2");
    });

    it.each([
        { target: "on the containerd image store (whole image: its import needs every blob in its content store)", offer: "store containerd\n" },
        { target: "that offered nothing (an older receiver, a failed listing)", offer: "" },
        { target: "without any of the layers", offer: classic(["sha256:" + "1".repeat(64)]) },
        { target: "with the bottom layer only above another one (another chain id)", offer: classic(["sha256:" + "1".repeat(64), BASE]) },
    ])("passes the archive byte for byte to a target $target", async ({ offer }) => {
        const result = await thin(saved, offer);
        expect(result.code).toBe(0);
        expect(result.archive.equals(original)).toBe(true);
        expect(result.stderr).toContain("layers-left-out count=0");
    });

    it("keeps a layer that the image also has at a place whose chain the target lacks", async () => {
        // The same diff id at the bottom (chain on the target) and on top of the new layer (not).
        const result = await thin(saved, classic(layerLists["app-1"]), [BASE, NEW_TOP, BASE]);
        expect(result.archive.equals(original)).toBe(true);
    });

    it("follows the archive while the save still writes it, and ends when the saver does", async () => {
        const growing = path.join(scratch, `growing-${file}`);
        fs.writeFileSync(growing, "");
        // A process standing in for `docker save`: alive while the file grows.
        const saver: ChildProcess = spawn("sleep", ["60"]);
        const result = thin(growing, classic(layerLists["app-1"]), layerLists["app-2"], saver.pid);
        for (let start = 0; start < original.length; start += 5000) {
            await new Promise((resolve) => setTimeout(resolve, 100));
            fs.appendFileSync(growing, original.subarray(start, start + 5000));
        }
        saver.kill();
        const followed = await result;
        const whole = await thin(saved, classic(layerLists["app-1"]));
        expect(followed.code).toBe(0);
        expect(followed.archive.equals(whole.archive)).toBe(true);
        expect(followed.archive.length).toBeLessThan(original.length);
    });
});

describe("image-layers.py on compressed layers (an image pulled into the containerd store)", () => {
    const saved = path.join(FIXTURES, "app-2.docker26-pulled.tar");
    const original = fs.readFileSync(saved);

    it("is a save whose layer blobs are gzip, named by their compressed digests, not by their diff ids", () => {
        const layers = layerFiles(original);
        expect([...layers.keys()].sort()).toEqual([BASE, NEW_TOP].sort());
        for (const [diffId, name] of layers) {
            expect(isGzip(member(original, name))).toBe(true);
            expect(name).toBe(`blobs/sha256/${sha256(member(original, name)).slice(7)}`);
            expect(name).not.toContain(diffId.slice(7));
        }
    });

    it("sends a blob that is not a diff id and does not decompress (another compression, a broken gzip)", async () => {
        const archive = path.join(scratch, "undecodable.tar");
        const gzipLayer = member(original, layerFiles(original).get(BASE)!);
        const zstdLike = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), zlib.gunzipSync(gzipLayer)]);
        const brokenGzip = Buffer.concat([gzipLayer.subarray(0, 20), Buffer.alloc(64, 0xff)]);
        execFileSync("python3", [
            "-c",
            `import hashlib, io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as out:
    for data in (bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])):
        info = tarfile.TarInfo("blobs/sha256/" + hashlib.sha256(data).hexdigest()); info.size = len(data)
        out.addfile(info, io.BytesIO(data))`,
            archive,
            zstdLike.toString("hex"),
            brokenGzip.toString("hex"),
        ]);
        const result = await thin(archive, classic(layerLists["app-1"]));
        expect(result.code).toBe(0);
        expect(result.archive.equals(fs.readFileSync(archive))).toBe(true);
        expect(result.stderr).toContain("layers-left-out count=0");
    });
});

describe("image-layers.py on archives with extended headers", () => {
    it("leaves out a layer with the pax header before it, and keeps a member whose long name needs one", async () => {
        // Written by Python's tarfile in the pax format (Go's archive/tar, Docker's, writes pax
        // headers for long or non-ASCII names): a pax header on the layer left out, a long name kept.
        const archive = path.join(scratch, "pax.tar");
        const layer = Buffer.from("layer bytes of the bottom layer\n");
        const digest = sha256(layer);
        const longName = `${"d".repeat(120)}/kept.json`;
        execFileSync("python3", [
            "-c",
            `import io, sys, tarfile
layer, name, long_name = sys.stdin.buffer.read(), sys.argv[2], sys.argv[3]
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as out:
    info = tarfile.TarInfo(name); info.size = len(layer); info.pax_headers = {"comment": "forces a pax header"}
    out.addfile(info, io.BytesIO(layer))
    info = tarfile.TarInfo(long_name); info.size = 2
    out.addfile(info, io.BytesIO(b"{}"))`,
            archive,
            `blobs/sha256/${digest.slice(7)}`,
            longName,
        ], { input: layer });
        const result = await thin(archive, classic([digest]), [digest]);
        expect(result.code).toBe(0);
        expect(members(result.archive)).toEqual([longName]);
        expect(member(result.archive, longName).toString()).toBe("{}");
        // The layer's pax header went with it (else it would apply to the member after).
        expect(result.archive.includes("forces a pax header")).toBe(false);
        expect(result.archive.includes(longName)).toBe(true);
        expect(result.stderr).toContain("layers-left-out count=1");
    });
});
