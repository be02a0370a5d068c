/**
 * The progress lines of a step (components/stepProgress.ts), as the builtin runner relays them
 * from a step's standard error while it runs.
 */
import { describe, expect, it } from "vitest";
import { PROGRESS_PREFIX, progressRelay } from "../../components/stepProgress";

describe("the builtin runner's relay of progress lines", () => {
    it("hands on each progress line once it is whole, named by its resource, and nothing else", () => {
        const shown: string[] = [];
        const relay = progressRelay("vllm-serve", (line) => shown.push(line));
        relay("started: vllm serve /models/m\nprogress: loading weights: sha");
        expect(shown).toEqual([]);
        relay("rd 3/8\nsome other line\n");
        expect(shown).toEqual(["vllm-serve: loading weights: shard 3/8"]);
        relay("progress: still loading weights: shard 3/8 (30s)\r\nnot progress: x\n  progress: indented\nprogress: API server up");
        expect(shown).toEqual(["vllm-serve: loading weights: shard 3/8", "vllm-serve: still loading weights: shard 3/8 (30s)"]);
        relay("\n");
        expect(shown.at(-1)).toBe("vllm-serve: API server up");
        expect(shown).toHaveLength(3);
    });

    it("reads the prefix the readiness gate writes", async () => {
        const { readScript } = await import("../../components/shell");
        expect(readScript("vllm-ready")).toContain(`echo "${PROGRESS_PREFIX}$phase" >&2`);
        expect(readScript("vllm-ready")).toContain(`echo "${PROGRESS_PREFIX}still $phase`);
    });
});
