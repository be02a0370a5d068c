// The project file as the Pulumi CLI reads it: the program's TypeScript options.
import * as fs from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "../..");

/** A top-level or nested scalar of Pulumi.yaml (`key: value`, the first one found). */
function yamlValue(text: string, key: string): string {
    const match = new RegExp(`^\\s*${key}:\\s*(\\S+)\\s*$`, "m").exec(text);
    if (!match) {
        throw new Error(`Pulumi.yaml has no ${key}`);
    }
    return match[1];
}

describe("Pulumi.yaml: the program as `pulumi up` runs it", () => {
    const project = fs.readFileSync(path.join(ROOT, "Pulumi.yaml"), "utf8");

    it("runs the program with a tsconfig that skips type checking, found from the program's directory", () => {
        // The Node.js runtime runs the program in the directory of `main` and reads the tsconfig
        // option relative to it; its compilerOptions (not those it extends) decide ts-node's
        // transpileOnly (@pulumi/pulumi cmd/run/run.js).
        const main = yamlValue(project, "main");
        const tsconfigPath = path.resolve(ROOT, path.dirname(main), yamlValue(project, "tsconfig"));
        expect(fs.existsSync(path.join(ROOT, main))).toBe(true);
        expect(fs.existsSync(tsconfigPath)).toBe(true);
        const tsconfig = JSON.parse(fs.readFileSync(tsconfigPath, "utf8"));
        expect(tsconfig.compilerOptions.noCheck).toBe(true);
        expect(path.resolve(path.dirname(tsconfigPath), tsconfig.extends)).toBe(path.join(ROOT, "tsconfig.json"));
    });

    it("leaves type checking on for `npm run typecheck` (tsconfig.json)", () => {
        const tsconfig = JSON.parse(fs.readFileSync(path.join(ROOT, "tsconfig.json"), "utf8"));
        expect(tsconfig.compilerOptions.noCheck).toBeUndefined();
        expect(tsconfig.compilerOptions.strict).toBe(true);
    });
});
