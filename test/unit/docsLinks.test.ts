/**
 * The project's pages hold together: every relative link of README.md, of every page under docs/
 * and of the sim's manual reaches a file or directory of the repository, and every anchor
 * (`#section` on the page itself, `page.md#section` on another) is a heading of its target as GitHub
 * names it. A path of the repository quoted as code (`components/scripts/watchdog.py`) exists too.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { findProjectRoot } from "../../infra/core/project";
import { anchors, codeSpans, githubSlug, links } from "./markdown";

const ROOT = findProjectRoot(__dirname);

/** The Markdown files under `dir` (relative to the root), recursively. */
function markdownUnder(dir: string): string[] {
    return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
        const relative = path.posix.join(dir, entry.name);
        return entry.isDirectory() ? markdownUnder(relative) : entry.name.endsWith(".md") ? [relative] : [];
    });
}

const PAGES = ["README.md", ...markdownUnder("docs"), "test/sim/README.md"].sort();

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
    let found = anchorCache.get(file);
    if (!found) {
        found = anchors(fs.readFileSync(path.join(ROOT, file), "utf8"));
        anchorCache.set(file, found);
    }
    return found;
}

/**
 * What is wrong with the link `target` on `page` (both relative to the root), or undefined when it
 * resolves. Links with a scheme (https:, mailto:) are left to the web.
 */
function linkProblem(page: string, target: string, root = ROOT): string | undefined {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) {
        return undefined;
    }
    const hash = target.indexOf("#");
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const file = pathPart === "" ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), pathPart));
    if (file.startsWith("../") || path.posix.isAbsolute(file)) {
        return `${target}: outside the repository`;
    }
    const full = path.join(root, file);
    if (!fs.existsSync(full)) {
        return `${target}: no file ${file}`;
    }
    if (anchor === undefined) {
        return undefined;
    }
    if (fs.statSync(full).isDirectory()) {
        return `${target}: an anchor on a directory`;
    }
    if (!file.endsWith(".md")) {
        // A source file: GitHub's line anchors only.
        return /^L\d+(-L\d+)?$/.test(anchor) ? undefined : `${target}: ${file} is not a Markdown page; only line anchors (#L10) reach into it`;
    }
    const known = root === ROOT ? anchorsOf(file) : anchors(fs.readFileSync(full, "utf8"));
    return known.has(anchor) ? undefined : `${target}: no heading of ${file} has the anchor #${anchor}`;
}

// A path of the repository quoted as code in prose: under one of its top-level directories.
const REPO_PATH = /^(infra|components|tools|stacks|test|docs)\/[A-Za-z0-9_./-]*$/;

describe("the project's pages", () => {
    it("are README.md, the pages of docs/ and the sim's manual", () => {
        expect(PAGES).toContain("README.md");
        expect(PAGES).toContain("docs/configuration.md");
        expect(PAGES).toContain("test/sim/README.md");
    });

    it.each(PAGES)("%s: every relative link reaches a file, every anchor a heading", (page) => {
        const text = fs.readFileSync(path.join(ROOT, page), "utf8");
        const problems = links(text).flatMap(({ target, line }) => {
            const problem = linkProblem(page, target);
            return problem ? [`${page}:${line}: ${problem}`] : [];
        });
        expect(problems.join("\n")).toBe("");
    });

    it.each(PAGES)("%s: every repository path quoted as code exists", (page) => {
        const text = fs.readFileSync(path.join(ROOT, page), "utf8");
        const problems = codeSpans(text)
            .filter(({ code }) => REPO_PATH.test(code))
            .filter(({ code }) => !fs.existsSync(path.join(ROOT, code)))
            .map(({ code, line }) => `${page}:${line}: ${code} does not exist`);
        expect(problems.join("\n")).toBe("");
    });
});

describe("GitHub's anchors, as the link check computes them", () => {
    it.each([
        ["Status (`npm run status`)", "status-npm-run-status"],
        ["Requirements and steps (the `spark-duo` stack)", "requirements-and-steps-the-spark-duo-stack"],
        ["vLLM's arguments (`vllm.*`)", "vllms-arguments-vllm"],
        ["Will it fit?", "will-it-fit"],
        ["Getting the image onto the nodes (`image.source`)", "getting-the-image-onto-the-nodes-imagesource"],
        ["Keep snake_case and dashes-in-words", "keep-snake_case-and-dashes-in-words"],
        ["Two  spaces – and a dash", "two--spaces--and-a-dash"],
        ["A [linked](other.md) heading", "a-linked-heading"],
    ])("%s -> #%s", (heading, slug) => {
        expect(githubSlug(heading)).toBe(slug);
    });

    it("numbers a repeated heading -1, -2", () => {
        expect([...anchors("# Notes\n## Notes\n```\n# not a heading\n```\n### Notes\n")]).toEqual(["notes", "notes-1", "notes-2"]);
    });

    it("finds a broken link and a missing anchor, and lets a good one pass", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-links-"));
        try {
            fs.mkdirSync(path.join(dir, "docs"));
            fs.writeFileSync(path.join(dir, "README.md"), "# Top\n## The two commands\n");
            fs.writeFileSync(path.join(dir, "docs", "page.md"), "# Page\n");
            expect(linkProblem("docs/page.md", "../README.md#the-two-commands", dir)).toBeUndefined();
            expect(linkProblem("docs/page.md", "#page", dir)).toBeUndefined();
            expect(linkProblem("docs/page.md", "../README.md#the-three-commands", dir)).toMatch(/no heading of README.md has the anchor #the-three-commands/);
            expect(linkProblem("docs/page.md", "gone.md", dir)).toMatch(/no file docs\/gone.md/);
            expect(linkProblem("README.md", "docs/page.md#nowhere", dir)).toMatch(/no heading/);
            expect(linkProblem("README.md", "https://example.com/x#y", dir)).toBeUndefined();
            expect(linkProblem("README.md", "../outside.md", dir)).toMatch(/outside the repository/);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("reads links, not what code spans or code blocks hold", () => {
        const page = "See [a](a.md) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d]: d.md\n![e](e.svg \"title\")\n";
        expect(links(page).map((link) => link.target)).toEqual(["a.md", "d.md", "e.svg"]);
    });
});
