/**
 * The conformance probes where the vLLM stand-in may differ from real vLLM
 * (test/e2e/standInDifferences.ts) are the ones docs/proving-ground.md lists with their reasons.
 */
import * as fs from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { STAND_IN_DIFFERENCES } from "../e2e/standInDifferences";

describe("the stand-in's documented differences from real vLLM", () => {
    it("are the same probes in the code and in docs/proving-ground.md", () => {
        const docs = fs.readFileSync(path.join(__dirname, "../../docs/proving-ground.md"), "utf8");
        const section = docs.split("### The stand-in against real vLLM")[1]?.split(/\n#/)[0] ?? "";
        const listed = [...section.matchAll(/^- `([^`]+)`: /gm)].map((match) => match[1]);
        expect(listed.length).toBeGreaterThan(0);
        expect(listed.sort()).toEqual(Object.keys(STAND_IN_DIFFERENCES).sort());
    });
});
