/**
 * The keys a zod schema takes, as a stack writes them (`gateway.port`, `nodes[i].hostKey`,
 * `services[i].vllm.port`), with the default the schema gives each; and the key tables of a page
 * (`| key | default | what it takes |`) held against them. Pure: what the configuration page's test
 * runs on the stack's schema, and on small schemas of its own to show that it catches what it should.
 */
import { z } from "zod";
import { Table, tables } from "./markdown";

/** A key of the schema: where it is, its default (when the schema gives one), and whether it must be set. */
export interface SchemaKey {
    /** `gateway.port`, `nodes[i].hostKey`, `services[i].vllm.port`, `labels.<name>` for a record. */
    readonly key: string;
    /** The schema's default, when it has one (`{ value }`, so that a default of undefined is one too). */
    readonly default?: { readonly value: unknown };
    /** Neither optional nor defaulted, in its object. */
    readonly required: boolean;
    /** Required, and so is every object and list it lies in: every stack sets it. */
    readonly alwaysRequired: boolean;
}

type Def = {
    type: string;
    innerType?: z.core.$ZodType;
    in?: z.core.$ZodType;
    shape?: Record<string, z.core.$ZodType>;
    element?: z.core.$ZodType;
    options?: readonly z.core.$ZodType[];
    valueType?: z.core.$ZodType;
    left?: z.core.$ZodType;
    right?: z.core.$ZodType;
    getter?: () => z.core.$ZodType;
    defaultValue?: unknown;
};

const defOf = (schema: z.core.$ZodType) => schema._zod.def as unknown as Def;

/** The schema inside defaults, optionals, pipes (transforms: their input) and the like, with what they said. */
function unwrap(schema: z.core.$ZodType): { core: z.core.$ZodType; default?: { value: unknown }; optional: boolean } {
    let current = schema;
    let found: { value: unknown } | undefined;
    let optional = false;
    for (let depth = 0; depth < 20; depth++) {
        const def = defOf(current);
        if ((def.type === "default" || def.type === "prefault") && def.innerType) {
            found ??= { value: def.defaultValue };
            current = def.innerType;
        } else if ((def.type === "optional" || def.type === "nullable") && def.innerType) {
            optional = true;
            current = def.innerType;
        } else if ((def.type === "readonly" || def.type === "catch" || def.type === "nonoptional") && def.innerType) {
            current = def.innerType;
        } else if (def.type === "pipe" && def.in) {
            current = def.in;
        } else if (def.type === "lazy" && def.getter) {
            current = def.getter();
        } else {
            break;
        }
    }
    return { core: current, ...(found ? { default: found } : {}), optional };
}

/** Does a value of this schema hold keys of its own (an object, a record, a union or intersection of them)? */
function holdsKeys(schema: z.core.$ZodType): boolean {
    const def = defOf(unwrap(schema).core);
    switch (def.type) {
        case "object":
        case "record":
            return true;
        case "union":
            return (def.options ?? []).every(holdsKeys);
        case "intersection":
            return holdsKeys(def.left!) && holdsKeys(def.right!);
        default:
            return false;
    }
}

/**
 * Every key of `schema` below `prefix`: each field whose value is not an object of keys (a string, a
 * number, an enum, a list of plain values), and each list of objects itself (`nodes`) besides the
 * keys of its entries (`nodes[i].name`). A record's entries are `<name>`; the options of a union of
 * objects (a discriminated one too) add their keys together. In the schema's order, each key once.
 */
export function schemaKeys(schema: z.core.$ZodType, prefix = ""): SchemaKey[] {
    const keys = new Map<string, SchemaKey>();
    const add = (entry: SchemaKey) => {
        if (!keys.has(entry.key)) {
            keys.set(entry.key, entry);
        }
    };
    const walk = (node: z.core.$ZodType, at: string, always: boolean) => {
        const def = defOf(unwrap(node).core);
        const join = (name: string) => (at === "" ? name : `${at}.${name}`);
        switch (def.type) {
            case "object":
                for (const [name, field] of Object.entries(def.shape ?? {})) {
                    visit(field, join(name), always);
                }
                break;
            case "record":
                visit(def.valueType!, join("<name>"), false);
                break;
            case "union":
                for (const option of def.options ?? []) {
                    walk(option, at, false);
                }
                break;
            case "intersection":
                walk(def.left!, at, always);
                walk(def.right!, at, always);
                break;
        }
    };
    const visit = (field: z.core.$ZodType, key: string, parentAlways: boolean) => {
        const { core, default: found, optional } = unwrap(field);
        const required = !optional && !found;
        const entry: SchemaKey = { key, ...(found ? { default: found } : {}), required, alwaysRequired: required && parentAlways };
        const def = defOf(core);
        if (def.type === "array" && def.element && holdsKeys(def.element)) {
            add(entry);
            walk(def.element, `${key}[i]`, entry.alwaysRequired);
        } else if (holdsKeys(core)) {
            walk(core, key, entry.alwaysRequired);
        } else {
            add(entry);
        }
    };
    walk(schema, prefix, true);
    return [...keys.values()];
}

/** A default as the table writes it: a string as it is (`""` when empty), anything else as JSON. */
export function defaultInWords(value: unknown): string {
    return typeof value === "string" ? (value === "" ? '""' : value) : JSON.stringify(value);
}

/** A row of a key table: the key (its first cell's code span), the default cell, and its line. */
export interface KeyRow {
    readonly key: string;
    readonly defaultCell: string;
    readonly line: number;
}

const KEY_TABLE_HEADER = ["key", "default", "what it takes"];

/** The key tables of a page: those headed `| key | default | what it takes |`. */
export function keyTables(text: string): Table[] {
    return tables(text).filter((table) => table.header.length === 3 && table.header.every((cell, index) => cell.toLowerCase() === KEY_TABLE_HEADER[index]));
}

/** The rows of the page's key tables; a row whose key cell is not one code span is a problem. */
export function keyRows(text: string): { rows: KeyRow[]; problems: string[] } {
    const rows: KeyRow[] = [];
    const problems: string[] = [];
    for (const table of keyTables(text)) {
        for (const row of table.rows) {
            const spans = [...row.cells[0].matchAll(/`([^`]+)`/g)].map((match) => match[1]);
            if (spans.length !== 1 || row.cells.length !== 3) {
                problems.push(`line ${row.line}: a row names one key as code in its first cell, then its default and what it takes (found: ${row.cells[0]})`);
                continue;
            }
            rows.push({ key: spans[0], defaultCell: row.cells[1], line: row.line });
        }
    }
    return { rows, problems };
}

/**
 * The default a cell states: the code span it starts with (`` `a b` ``, `` `[]` ``), else its text up
 * to the first space, `;` or `,` (`21600 (6 h)`: 21600).
 */
function statedDefault(cell: string): string {
    const code = /^`([^`]*)`/.exec(cell.trim());
    return code ? code[1] : cell.trim().split(/[\s;,]/)[0];
}

/** Whether a default cell says the key is required outright ("required", "required;", not "required with ..."). */
function saysRequired(cell: string): boolean {
    return /^required($|[;,.:(])/.test(cell.replace(/`/g, "").trim());
}

/**
 * What is wrong with the key tables of a page against the keys of the schema (and `extra`, keys
 * read outside it, such as secrets): a key without its line, a line for a key the schema lacks, a
 * key on two lines, a default that differs from the schema's, "required" for a key that is not, and
 * a key every stack must set whose line does not say "required". `namespace` prefixes the keys in the messages.
 */
export function keyTableProblems(text: string, keys: readonly SchemaKey[], namespace: string): string[] {
    const { rows, problems } = keyRows(text);
    const known = new Map(keys.map((entry) => [entry.key, entry]));
    const seen = new Map<string, number>();
    const name = (key: string) => `${namespace}:${key}`;
    for (const row of rows) {
        const first = seen.get(row.key);
        if (first !== undefined) {
            problems.push(`line ${row.line}: ${name(row.key)} has a line already (line ${first})`);
            continue;
        }
        seen.set(row.key, row.line);
        const entry = known.get(row.key);
        if (!entry) {
            problems.push(`line ${row.line}: ${name(row.key)} is not a key of the schema`);
            continue;
        }
        if (entry.default) {
            const expected = defaultInWords(entry.default.value);
            const stated = statedDefault(row.defaultCell);
            if (stated !== expected) {
                problems.push(`line ${row.line}: ${name(row.key)}: the default stated is ${JSON.stringify(stated)} (${row.defaultCell}); the schema's is ${expected}`);
            }
        }
        if (saysRequired(row.defaultCell) && !entry.required) {
            problems.push(`line ${row.line}: ${name(row.key)} is said to be required; the schema makes it optional or gives it a default`);
        }
        if (entry.alwaysRequired && !saysRequired(row.defaultCell)) {
            problems.push(`line ${row.line}: ${name(row.key)} is required by the schema; its default cell should say "required" (found: ${row.defaultCell})`);
        }
    }
    for (const entry of keys) {
        if (!seen.has(entry.key)) {
            problems.push(`${name(entry.key)} has no line in the key tables`);
        }
    }
    return problems;
}
