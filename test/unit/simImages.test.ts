/**
 * The proving ground's image bookkeeping (test/sim/lib/images.sh): which tags a rebuild prunes. Run
 * in bash under the same strict mode as sim.sh.
 */
import { execFileSync } from "child_process";
import * as path from "path";
import { describe, expect, it } from "vitest";

const IMAGES_SH = path.join(__dirname, "..", "sim", "lib", "images.sh");

/** Feeds `listing` (what `docker images` prints) to sim_stale_images KEEP..., as sim_prune_images does. */
function stale(listing: string[], keep: string[]): string[] {
    const script = `set -euo pipefail; source "$0"; out="$(printf '%s\\n' "$@" | sim_stale_images ${keep.map((k) => `'${k}'`).join(" ")})"; printf '%s' "$out"`;
    const stdout = execFileSync("bash", ["-c", script, IMAGES_SH, ...listing], { encoding: "utf8" });
    return stdout === "" ? [] : stdout.split("\n");
}

describe("sim_stale_images", () => {
    const keep = ["vllm-fleet-sim/node-base:aaa", "vllm-fleet-sim/node:bbb", "vllm-fleet-sim/workload-base:ccc", "vllm-fleet-sim/workload:ddd"];

    it("prints nothing, and does not fail, right after a fresh build (nothing to prune)", () => {
        expect(stale([...keep, "vllm-fleet-sim/node:current", "vllm-fleet-sim/workload:current"], keep)).toEqual([]);
        expect(stale([], keep)).toEqual([]);
    });

    it("names older hash tags of the proving ground's repositories, and nothing else", () => {
        const listing = [...keep, "vllm-fleet-sim/node:current", "vllm-fleet-sim/node:old1", "vllm-fleet-sim/workload-base:old2", "debian:bookworm", "someone/vllm-fleet-sim-node:x"];
        expect(stale(listing, keep)).toEqual(["vllm-fleet-sim/node:old1", "vllm-fleet-sim/workload-base:old2"]);
    });

    it("leaves the images built on their own (real-vLLM, registry, monitoring) to their own recipes", () => {
        const others = ["vllm-fleet-sim/workload-real:eee", "vllm-fleet-sim/registry:fff", "vllm-fleet-sim/monitoring:ggg", "vllm-fleet-sim/monitoring:current"];
        expect(stale([...keep, ...others], keep)).toEqual([]);
    });
});
