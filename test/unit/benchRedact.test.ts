import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REDACTED, exportSecrets, redacted } from "../bench/redact";

const SIG = "4dabf18193072939515e22adb298388d";
const secret = (value: unknown) => ({ [SIG]: "1b47061264138c4ac30d75fd1eb44270", plaintext: JSON.stringify(value) });
const KEY_FILE = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACBb0QNkT1gmfKn8m0yS6u2BCxDgqsc1HqI7Jv0uJQ8bdwAAAJi0lXQJtJV0\n-----END OPENSSH PRIVATE KEY-----\n";

describe("the bench's records without the stack's secrets", () => {
    const exported = {
        deployment: {
            resources: [
                { urn: "stack", outputs: { apiKey: secret("92d4980e1766a356c8e8"), endpoint: "http://10.0.0.1:8000/v1" } },
                { urn: "cmd", inputs: { privateKey: secret(KEY_FILE), create: "echo hi" } },
            ],
        },
    };

    it("finds every secret of an export, and cuts them out of it and of the events that quote them", () => {
        expect(exportSecrets(exported)).toEqual(["92d4980e1766a356c8e8", KEY_FILE]);
        const clean = redacted(exported, exportSecrets(exported));
        expect(JSON.stringify(clean)).not.toContain("92d4980e1766a356c8e8");
        const outputs = (clean.deployment.resources[0] as { outputs: Record<string, unknown> }).outputs;
        expect(outputs.apiKey).toEqual({ [SIG]: "1b47061264138c4ac30d75fd1eb44270", plaintext: JSON.stringify(REDACTED) });
        expect(outputs.endpoint).toBe("http://10.0.0.1:8000/v1");
        // An event quotes the API key in a script and the key file with other line breaks.
        const events = [{ steps: { inputs: { script: "SECRET_ENV=('VLLM_API_KEY=92d4980e1766a356c8e8')", key: KEY_FILE.replace(/\n/g, "\r\n") } } }];
        const text = JSON.stringify(redacted(events, exportSecrets(exported)));
        expect(text).toContain(`VLLM_API_KEY=${REDACTED}`);
        expect(text).not.toContain("92d4980e1766a356c8e8");
        expect(text).not.toContain("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ");
    });

    it("leaves no secret in the records committed under docs/benchmark", () => {
        const files: string[] = [];
        const walk = (dir: string): void => {
            for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
                const full = path.join(dir, entry.name);
                if (entry.isDirectory()) {
                    walk(full);
                } else if (/\.(json|jsonl)$/.test(entry.name)) {
                    files.push(full);
                }
            }
        };
        walk(path.join(__dirname, "..", "..", "docs", "benchmark"));
        expect(files.length).toBeGreaterThan(0);
        const leaks = files.filter((file) => {
            const text = fs.readFileSync(file, "utf8");
            // A secret of a state in plain text other than the placeholder, or a private key's first line.
            return /"plaintext":\s*"(?!\\"\[secret\]\\")/.test(text) || text.includes("b3BlbnNzaC1rZXktdjEA") || /VLLM_API_KEY=[0-9a-f]{16}/.test(text);
        });
        expect(leaks).toEqual([]);
    });
});
