/** The bench's `--image-update` (test/bench/imageUpdate.ts): its command line and its verdict (pure). */
import { describe, expect, it } from "vitest";
import { parseBenchArgs } from "../bench/args";
import { ImageCopySample, ImageUpdateRecord, imageUpdateReport, imageUpdateTargets } from "../bench/imageUpdate";

const MiB = 2 ** 20;
const update = (newLayer: number, fabric: number): ImageCopySample => ({
    newLayerBytes: newLayer * MiB,
    fabricBytes: fabric * MiB,
    streamBytes: newLayer * MiB,
    seconds: 1,
    leftOut: "count=1 bytes=1 of=2",
});

describe("the bench's --image-update", () => {
    it("runs on 2 nodes and alone", () => {
        expect(parseBenchArgs(["--image-update", "--runs", "1"])).toMatchObject({ imageUpdate: true, nodeCounts: [2], runs: 1 });
        expect(() => parseBenchArgs(["--image-update", "--fleet"])).toThrow("give one");
        expect(() => parseBenchArgs(["--image-update", "--nodes", "4"])).toThrow("copies between 2 nodes");
    });

    it.each([
        { fabric: [66, 67, 80], passed: true, value: 67 / 64 },
        { fabric: [71, 72, 300], passed: false, value: 72 / 64 },
    ])("judges the median of bytes over the fabric per new-layer byte against 1.1 ($value)", ({ fabric, passed, value }) => {
        const record: ImageUpdateRecord = { startedAt: "t", docker: "26.1.5+dfsg1, storage driver overlay2", imageBytes: 600 * MiB, updates: fabric.map((bytes) => update(64, bytes)), whole: update(0, 620) };
        const [result] = imageUpdateTargets(record);
        expect(result).toMatchObject({ passed, limit: 1.1 });
        expect(result.value).toBeCloseTo(value, 6);
        expect(result.detail).toContain("the whole image copied: 620.0 MiB over the fabric");
        expect(imageUpdateReport(record)).toContain(passed ? "| pass |" : "| FAIL |");
        expect(imageUpdateReport(record)).toContain("Two simulated Sparks (their Docker: 26.1.5+dfsg1, storage driver overlay2)");
    });

    it("fails when no update was measured, and says so", () => {
        const record: ImageUpdateRecord = { startedAt: "t", docker: "26.1.5+dfsg1, storage driver overlay2", imageBytes: 0, updates: [], failure: "simUp failed" };
        expect(imageUpdateTargets(record)).toMatchObject([{ passed: false, detail: "no update was measured" }]);
        expect(imageUpdateReport(record)).toContain("FAILED: simUp failed");
    });
});
