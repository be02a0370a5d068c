/**
 * The house in layers, read from the imports: the pure layer (infra/core) at the bottom imports
 * nothing above it and nothing of Pulumi; the components above it; the composition root (infra/*.ts:
 * the CLI entry, the program, reading the stack's config) on top; the tools beside the root, never
 * inside it. No import runs back up a layer, no files import one another in a circle, and no file of
 * the program is longer than about 400 lines, but for the node-side programs that must travel whole.
 */
import * as fs from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { findProjectRoot } from "../../infra/core/project";

const ROOT = findProjectRoot(__dirname);

/** Every .ts file under `dir` (relative to the project), recursively. */
function sources(dir: string): string[] {
    const full = path.join(ROOT, dir);
    return fs.readdirSync(full, { withFileTypes: true }).flatMap((entry) => {
        const relative = path.posix.join(dir, entry.name);
        if (entry.isDirectory()) {
            return entry.name === "scripts" ? [] : sources(relative);
        }
        return entry.name.endsWith(".ts") ? [relative] : [];
    });
}

/** The modules a file imports (type-only imports too): project files as paths, packages by name. */
function importsOf(file: string): string[] {
    const text = fs.readFileSync(path.join(ROOT, file), "utf8");
    const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)|require\(\s*"([^"]+)"\s*\)/g)].map((match) => match[1] ?? match[2] ?? match[3]);
    return specifiers.map((specifier) => {
        if (!specifier.startsWith(".")) {
            return specifier;
        }
        const base = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
        for (const candidate of [`${base}.ts`, `${base}/index.ts`]) {
            if (fs.existsSync(path.join(ROOT, candidate))) {
                return candidate;
            }
        }
        return base;
    });
}

type Layer = "core" | "components" | "root" | "tools";

/** The layer of a project file; undefined outside the program and its tools (tests, harnesses). */
function layerOf(file: string): Layer | undefined {
    if (file.startsWith("infra/core/")) {
        return "core";
    }
    if (file.startsWith("infra/")) {
        return "root";
    }
    if (file.startsWith("components/")) {
        return "components";
    }
    if (file.startsWith("tools/")) {
        return "tools";
    }
    return undefined;
}

/** What each layer may import: itself and the layers below it (the tools: the two below the root). */
const MAY_IMPORT: Readonly<Record<Layer, readonly Layer[]>> = {
    core: ["core"],
    components: ["core", "components"],
    root: ["core", "components", "root"],
    tools: ["core", "components", "tools"],
};

const files = [...sources("infra"), ...sources("components"), ...sources("tools")];
const graph = new Map(files.map((file) => [file, importsOf(file)]));

describe("the layers", () => {
    it("finds the program's files and their imports", () => {
        expect(files).toEqual(expect.arrayContaining(["infra/index.ts", "infra/program.ts", "infra/core/plan/fleet.ts", "components/vllmService.ts", "tools/status.ts"]));
        expect(graph.get("infra/program.ts")).toEqual(expect.arrayContaining(["components/vllmService.ts", "infra/core/plan/index.ts"]));
    });

    it.each(files)("%s imports only from its own layer and those below it", (file) => {
        const layer = layerOf(file)!;
        const upward = graph
            .get(file)!
            .filter((target) => layerOf(target) !== undefined && !MAY_IMPORT[layer].includes(layerOf(target)!))
            .map((target) => `${target} (${layerOf(target)})`);
        expect(upward).toEqual([]);
    });

    it("keeps the pure layer free of Pulumi and of the hosts' programs", () => {
        const impure = files
            .filter((file) => layerOf(file) === "core")
            .flatMap((file) => graph.get(file)!.filter((target) => target.startsWith("@pulumi/") || target.startsWith("components/")).map((target) => `${file} -> ${target}`));
        expect(impure).toEqual([]);
    });

    it("has no circle of imports", () => {
        // Tarjan's strongly connected components over the project's files.
        const index = new Map<string, number>();
        const low = new Map<string, number>();
        const stack: string[] = [];
        const onStack = new Set<string>();
        const circles: string[][] = [];
        let counter = 0;
        const visit = (file: string) => {
            index.set(file, counter);
            low.set(file, counter);
            counter++;
            stack.push(file);
            onStack.add(file);
            for (const target of graph.get(file) ?? []) {
                if (!graph.has(target)) {
                    continue;
                }
                if (!index.has(target)) {
                    visit(target);
                    low.set(file, Math.min(low.get(file)!, low.get(target)!));
                } else if (onStack.has(target)) {
                    low.set(file, Math.min(low.get(file)!, index.get(target)!));
                }
            }
            if (low.get(file) === index.get(file)) {
                const component: string[] = [];
                let member: string;
                do {
                    member = stack.pop()!;
                    onStack.delete(member);
                    component.push(member);
                } while (member !== file);
                if (component.length > 1 || (graph.get(file) ?? []).includes(file)) {
                    circles.push(component.sort());
                }
            }
        };
        for (const file of files) {
            if (!index.has(file)) {
                visit(file);
            }
        }
        expect(circles).toEqual([]);
    });
});

describe("files by concern", () => {
    const LIMIT = 400;
    const lines = (file: string) => fs.readFileSync(path.join(ROOT, file), "utf8").split("\n").length;

    it.each(files)("%s is at most about 400 lines", (file) => {
        expect(lines(file)).toBeLessThanOrEqual(LIMIT);
    });

    it("lets a node-side program run longer only when it says it must travel whole", () => {
        const scripts = fs
            .readdirSync(path.join(ROOT, "components/scripts"), { withFileTypes: true })
            .filter((entry) => entry.isFile())
            .map((entry) => `components/scripts/${entry.name}`);
        const long = scripts.filter((file) => lines(file) > LIMIT);
        for (const file of long) {
            const head = fs.readFileSync(path.join(ROOT, file), "utf8").split("\n").slice(0, 40).join("\n");
            expect(head, file).toMatch(/travels whole/);
        }
    });
});
