/**
 * docs/configuration.md holds every key of the stack: its key tables (`| key | default | what it
 * takes |`) are held against the zod schema (infra/core/config/schema.ts and its parts) and the
 * secret keys read beside it. A key added to the schema without its line fails here, as does a line
 * for a key the schema lacks or a default that differs from the schema's.
 */
import * as fs from "fs";
import * as path from "path";
import { z } from "zod";
import { describe, expect, it } from "vitest";
import { CONFIG_KEYS, CONFIG_NAMESPACE, SECRET_CONFIG_KEYS } from "../../infra/core/config";
import { fleetConfigSchema } from "../../infra/core/config/schema";
import { findProjectRoot } from "../../infra/core/project";
import { SchemaKey, keyRows, keyTableProblems, schemaKeys } from "./configKeys";

const ROOT = findProjectRoot(__dirname);
const PAGE = path.join(ROOT, "docs", "configuration.md");

/** The keys of the stack: the schema's (the single-model form names every key), and the secrets. */
function stackKeys(): SchemaKey[] {
    return [...schemaKeys(fleetConfigSchema), ...SECRET_CONFIG_KEYS.map((key) => ({ key, required: false, alwaysRequired: false }))];
}

describe("docs/configuration.md against the schema", () => {
    const text = fs.readFileSync(PAGE, "utf8");

    it("walks every top-level key of the schema, and the keys of services' entries", () => {
        const keys = stackKeys().map((entry) => entry.key);
        for (const key of CONFIG_KEYS) {
            expect(keys.some((found) => found === key || found.startsWith(`${key}.`) || found.startsWith(`${key}[i]`)), key).toBe(true);
        }
        expect(keys).toEqual(expect.arrayContaining(["gateway.port", "gateway.image.source", "nodes", "nodes[i].hostKey", "services", "services[i].vllm.port", "vllm.extraArgs", "hfToken"]));
        expect(keys).not.toContain("gateway");
        expect(keys).not.toContain("services[i].vllm");
    });

    it("has a line for every key and no line for a key the schema lacks, each default the schema's", () => {
        expect(keyTableProblems(text, stackKeys(), CONFIG_NAMESPACE).join("\n")).toBe("");
    });
});

describe("the check of a key table", () => {
    const schema = z.strictObject({
        port: z.number().default(4000),
        mode: z.enum(["a", "b"]).default("a"),
        name: z.string(),
        note: z.string().default(""),
        greeting: z.string().default("hello there"),
        args: z.array(z.string()).default([]),
        hosts: z.array(z.strictObject({ host: z.string(), key: z.string().optional() })).min(1),
        extra: z.strictObject({ on: z.boolean().default(false) }).optional(),
        labels: z.record(z.string(), z.string()).optional(),
        target: z.discriminatedUnion("kind", [z.strictObject({ kind: z.literal("file"), path: z.string() }), z.strictObject({ kind: z.literal("url"), url: z.string() })]).optional(),
        cache: z.strictObject({ dir: z.string().default("/var/cache/x") }).transform((cache) => cache).default({ dir: "/var/cache/x" }),
    });
    const keys = schemaKeys(schema);
    const page = [
        "| key | default | what it takes |",
        "|---|---|---|",
        "| `port` | 4000 | a port |",
        "| `mode` | `a` | `a` or `b` |",
        "| `name` | required | a name |",
        '| `note` | `""` | any text |',
        "| `greeting` | `hello there` | any text |",
        "| `args` | `[]` | more arguments |",
        "| `hosts` | required | a list of hosts |",
        "| `hosts[i].host` | required | a host |",
        "| `hosts[i].key` | none | a key |",
        "| `extra.on` | false (off) | true or false |",
        "| `labels.<name>` | none | a label |",
        "| `target.kind` | none | `file` or `url` |",
        "| `target.path` | none | with `file` |",
        "| `target.url` | none | with `url` |",
        "| `cache.dir` | `/var/cache/x` | a directory |",
        "",
    ].join("\n");

    it("walks defaults, lists of objects, optional objects, records, discriminated unions and transforms", () => {
        expect(keys.map((entry) => entry.key)).toEqual([
            "port", "mode", "name", "note", "greeting", "args", "hosts", "hosts[i].host", "hosts[i].key", "extra.on", "labels.<name>", "target.kind", "target.path", "target.url", "cache.dir",
        ]);
        expect(keys.find((entry) => entry.key === "port")?.default).toEqual({ value: 4000 });
        expect(keys.find((entry) => entry.key === "hosts[i].host")).toMatchObject({ required: true, alwaysRequired: true });
        expect(keys.find((entry) => entry.key === "target.path")).toMatchObject({ required: true, alwaysRequired: false });
    });

    it("passes a table that matches", () => {
        expect(keyTableProblems(page, keys, "x")).toEqual([]);
    });

    it("fails a key without its line", () => {
        expect(keyTableProblems(page.replace("| `extra.on` | false (off) | true or false |\n", ""), keys, "x")).toEqual(["x:extra.on has no line in the key tables"]);
    });

    it("fails a line for a key the schema lacks, and a key on two lines", () => {
        const inTable = page.replace("| `cache.dir` |", "| `extra.off` | false | gone |\n| `port` | 4000 | again |\n| `cache.dir` |");
        expect(keyTableProblems(inTable, keys, "x")).toEqual([
            expect.stringMatching(/x:extra\.off is not a key of the schema/),
            expect.stringMatching(/x:port has a line already/),
        ]);
    });

    it("fails a default that differs from the schema's, and a wrong word on what is required", () => {
        const wrong = page
            .replace("| `port` | 4000 |", "| `port` | 8000 |")
            .replace("| `mode` | `a` |", "| `mode` | required |")
            .replace("| `greeting` | `hello there` |", "| `greeting` | `hello` there |")
            .replace("| `hosts[i].host` | required |", "| `hosts[i].host` | none |");
        expect(keyTableProblems(wrong, keys, "x")).toEqual([
            expect.stringMatching(/x:port: the default stated is "8000" .*the schema's is 4000/),
            expect.stringMatching(/x:mode: the default stated is "required"/),
            expect.stringMatching(/x:mode is said to be required/),
            expect.stringMatching(/x:greeting: the default stated is "hello" .*the schema's is hello there/),
            expect.stringMatching(/x:hosts\[i\]\.host is required by the schema/),
        ]);
    });

    it("fails a row that names no key, or two", () => {
        const { problems } = keyRows(page.replace("| `port` | 4000 |", "| port | 4000 |").replace("| `mode` | `a` |", "| `mode`, `port` | `a` |"));
        expect(problems).toHaveLength(2);
    });
});
