/**
 * The bench's records without the stack's secrets. `exportStack()` of the Automation API gives the
 * secrets in plain text (`{"4dabf18193072939515e22adb298388d": ..., "plaintext": ...}`), and the
 * engine's events quote them inside the commands' inputs (the SSH key, the API key in a script):
 * the records the bench writes, which the README's benchmark pages link to, carry neither.
 */
import fs from "node:fs";
import path from "node:path";

/** Pulumi's signature key of a secret value in a state file. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";
export const REDACTED = "[secret]";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The plain-text secrets of a stack export: each secret's text (a string, or the JSON of another value). */
export function exportSecrets(exported: unknown): string[] {
    const found: string[] = [];
    const walk = (value: unknown): void => {
        if (Array.isArray(value)) {
            value.forEach(walk);
        } else if (value !== null && typeof value === "object") {
            const record = value as Record<string, unknown>;
            if (SECRET_SIG in record && typeof record.plaintext === "string") {
                const inner: unknown = JSON.parse(record.plaintext);
                found.push(typeof inner === "string" ? inner : record.plaintext);
                return;
            }
            Object.values(record).forEach(walk);
        }
    };
    walk(exported);
    return [...new Set(found.filter((secret) => secret.trim().length > 0))];
}

/**
 * The pieces of text to cut out for `secrets`: each secret whole, and each line of a secret of
 * several lines that could identify it (a key file's base64 lines), longest first, so that a
 * secret quoted with other line breaks or escapes is still cut line by line.
 */
function needles(secrets: readonly string[]): string[] {
    const pieces = secrets.flatMap((secret) => [secret, ...secret.split("\n").map((line) => line.trim()).filter((line) => line.length >= 16)]);
    return [...new Set(pieces)].sort((a, b) => b.length - a.length);
}

/** `value` with every secret object of a state replaced and every occurrence of `secrets` in its text cut out. */
export function redacted<T>(value: T, secrets: readonly string[]): T {
    const cut = needles(secrets);
    const walk = (item: Json): Json => {
        if (typeof item === "string") {
            return cut.reduce((text, needle) => text.split(needle).join(REDACTED), item);
        }
        if (Array.isArray(item)) {
            return item.map(walk);
        }
        if (item !== null && typeof item === "object") {
            if (SECRET_SIG in item && "plaintext" in item) {
                return { [SECRET_SIG]: item[SECRET_SIG], plaintext: JSON.stringify(REDACTED) };
            }
            return Object.fromEntries(Object.entries(item).map(([key, inner]) => [key, walk(inner)]));
        }
        return item;
    };
    return walk(value as Json) as T;
}

/** Writes one up's engine events (`events-BASE.jsonl`) and its stack export (`export-BASE.json`), without its secrets. */
export function writeUpRecord(outDir: string, base: string, up: { readonly events: readonly unknown[]; readonly exported: unknown }): void {
    const secrets = exportSecrets(up.exported);
    const events = redacted(up.events as Json[], secrets);
    fs.writeFileSync(path.join(outDir, `events-${base}.jsonl`), events.map((event) => JSON.stringify(event)).join("\n") + "\n");
    fs.writeFileSync(path.join(outDir, `export-${base}.json`), JSON.stringify(redacted(up.exported, secrets), null, 2));
}
