/**
 * The program's reading of the stack config (infra/program.ts readStackConfig), under Pulumi's mocks:
 * keys set in the stack but unknown, secrets given in plain text, secrets whose text cannot work, all
 * refused at once before any host is read.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it, vi } from "vitest";
import { runProgram } from "./mocks";
import { sparkDuo } from "./stacks";

const duo = sparkDuo;
const MOCK_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----";

/** A probe that records being called: a config that fails must never reach it. */
function untouchedHosts() {
    return vi.fn((node: string): string => {
        throw new Error(`node ${node} was read`);
    });
}

/** The message a run of the program with this config and these secrets fails with. */
async function failureOf(config: Record<string, unknown>, secrets: Record<string, string> = { sshPrivateKey: MOCK_KEY }): Promise<string> {
    const probe = untouchedHosts();
    let message: string | undefined;
    try {
        await runProgram(config, probe, secrets);
    } catch (error) {
        message = (error as Error).message;
    }
    expect(probe).not.toHaveBeenCalled();
    expect(message).toBeDefined();
    expect(message).toMatch(/^invalid stack configuration \(\d+ problems?\); nothing was run on any host:\n/);
    return message!;
}

/** An openssh-key-v1 key with this cipher ("none": no passphrase). */
function opensshKey(cipher: string): string {
    const name = Buffer.from(cipher, "latin1");
    const length = Buffer.alloc(4);
    length.writeUInt32BE(name.length);
    const body = Buffer.concat([Buffer.from("openssh-key-v1\0", "latin1"), length, name, Buffer.alloc(48, 7)]).toString("base64");
    return `-----BEGIN OPENSSH PRIVATE KEY-----\n${body}\n-----END OPENSSH PRIVATE KEY-----\n`;
}

describe("the program reads the whole vllm-fleet namespace", () => {
    it("refuses a misspelled or unknown top-level key, suggesting the nearest known key, never quoting its value", async () => {
        const message = await failureOf({ ...duo, tensorParalel: 2, openaiToken: "sk-do-not-print" });
        expect(message.split("\n").slice(1)).toEqual([
            "  - vllm-fleet:tensorParalel: unknown key; expected a key vllm-fleet reads; did you mean vllm-fleet:parallelism.tensor? (set with `pulumi config set --path parallelism.tensor <value>`)",
            "  - vllm-fleet:openaiToken: unknown key; expected a key vllm-fleet reads: nodes, ssh, fabric, services, image, containerDriver, commandRunner, swap, executor, model, parallelism, vllm, ray, container, timeouts, supervision, security, hostChecks, hostPrep, cache, gateway, monitoring, sshPrivateKey, vllmApiKey, hfToken",
        ]);
        expect(message).not.toContain("do-not-print");
    });
});

describe("the API key", () => {
    it("is refused in plain text, with the command that sets it as a secret, and not quoted", async () => {
        const message = await failureOf({ ...duo, vllmApiKey: "sk-plain-value" });
        expect(message).toContain(
            '  - vllm-fleet:vllmApiKey: a value in plain text in the stack settings; expected a secret: run `pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"`',
        );
        expect(message).not.toContain("sk-plain-value");
    });

    it("is refused as a secret ending in a newline (a header cannot carry it)", async () => {
        const message = await failureOf(duo, { sshPrivateKey: MOCK_KEY, vllmApiKey: "sk-secret-value\n" });
        expect(message.split("\n").slice(1)).toEqual([
            "  - vllm-fleet:vllmApiKey: got a key ending in a newline; expected one token of printable ASCII without spaces (vLLM compares the Bearer token exactly; a header cannot carry a newline)",
        ]);
        expect(message).not.toContain("sk-secret-value");
    });
});

describe("the SSH private key", () => {
    it("is refused when the secret holds a public key, without quoting it", async () => {
        const publicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDoNotPrintThis user@host";
        const message = await failureOf(duo, { sshPrivateKey: publicKey });
        expect(message).toContain(`  - vllm-fleet:sshPrivateKey: got a secret of ${publicKey.length} characters; expected a private key, and this is a public key`);
        expect(message).not.toContain("DoNotPrintThis");
    });

    it("is refused in plain text", async () => {
        const message = await failureOf({ ...duo, sshPrivateKey: MOCK_KEY }, {});
        expect(message).toContain("  - vllm-fleet:sshPrivateKey: a value in plain text in the stack settings; expected a secret: run `pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519`");
        expect(message).not.toContain("mock");
    });

    it("is refused from a key file that needs a passphrase, naming the file", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-key-"));
        const keyFile = path.join(dir, "id_ed25519");
        fs.writeFileSync(keyFile, opensshKey("aes256-ctr"), { mode: 0o600 });
        try {
            const message = await failureOf({ ...duo, ssh: { user: "aurora", privateKeyPath: keyFile } }, {});
            expect(message.split("\n").slice(1)).toEqual([
                `  - vllm-fleet:ssh.privateKeyPath: got ${JSON.stringify(keyFile)}; expected a file holding a private key without a passphrase (vllm-fleet has none to give ssh): remove it with \`ssh-keygen -p -f <key>\`, or use another key`,
            ]);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("is refused from a file that is not a private key", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-key-"));
        const keyFile = path.join(dir, "id_ed25519.pub");
        fs.writeFileSync(keyFile, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEY user@host\n");
        try {
            const message = await failureOf({ ...duo, ssh: { user: "aurora", privateKeyPath: keyFile } }, {});
            expect(message).toContain(`  - vllm-fleet:ssh.privateKeyPath: got ${JSON.stringify(keyFile)}; expected a file holding a private key, and this is a public key`);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("every problem at once", () => {
    it("one line each, settings and secrets together", async () => {
        const message = await failureOf(
            { ...duo, model: { path: "/" }, vllm: { port: 22, extraArgs: ["--tensor_parallel_size=4"] }, tensorParalel: 2, vllmApiKey: "sk-plain-value" },
            { sshPrivateKey: "not a key" },
        );
        expect(message.split("\n")).toEqual([
            "invalid stack configuration (6 problems); nothing was run on any host:",
            "  - vllm-fleet:model.path: got \"/\"; expected a model directory, not the root directory (it is mounted into every serving container)",
            "  - vllm-fleet:vllm.extraArgs[0]: got \"--tensor_parallel_size=4\"; expected a flag vllm-fleet does not set itself: vLLM reads it as --tensor-parallel-size, which comes from vllm-fleet:parallelism.tensor",
            "  - vllm-fleet:tensorParalel: unknown key; expected a key vllm-fleet reads; did you mean vllm-fleet:parallelism.tensor? (set with `pulumi config set --path parallelism.tensor <value>`)",
            "  - vllm-fleet:vllm.port: got 22; expected a port other than the SSH port of spark1, spark2 (the serving containers use the host's network)",
            "  - vllm-fleet:sshPrivateKey: got a secret of 9 characters; expected an OpenSSH or PEM private key (a block from -----BEGIN OPENSSH PRIVATE KEY----- to -----END OPENSSH PRIVATE KEY-----), and this text holds none",
            '  - vllm-fleet:vllmApiKey: a value in plain text in the stack settings; expected a secret: run `pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"` (and replace the old value, which the stack file holds in plain text)',
        ]);
    });
});
