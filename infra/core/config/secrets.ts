/**
 * The secrets' own checks (the SSH private key, the API key, the Hub token): never quoting a value.
 * Pure.
 */
import { CONFIG_NAMESPACE, SecretConfigKey } from "./keys";
import { ConfigIssue } from "./issues";

/** The parts of a PEM or OpenSSH private key block. */
const PRIVATE_KEY_BLOCK = /-----BEGIN ((?:OPENSSH |RSA |EC |DSA |ENCRYPTED )?)PRIVATE KEY-----\r?\n([\s\S]*?)-----END \1PRIVATE KEY-----/;

/**
 * Why `text` cannot serve as the SSH private key, or undefined when it looks like one: an OpenSSH
 * (`-----BEGIN OPENSSH PRIVATE KEY-----`) or PEM (`RSA`, `EC`, `DSA` or PKCS#8) block, not protected
 * by a passphrase (the program has none to give). The words never quote the key. Pure.
 */
export function privateKeyProblem(text: string): string | undefined {
    const block = PRIVATE_KEY_BLOCK.exec(text);
    if (!block) {
        const start = text.trimStart();
        if (/^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-|sk-(ssh|ecdsa))/.test(start)) {
            return "a private key, and this is a public key (the .pub file): give the file without .pub";
        }
        if (start.startsWith("PuTTY-User-Key-File")) {
            return "an OpenSSH or PEM private key, and this is a PuTTY key: convert it with `puttygen key.ppk -O private-openssh -o key`";
        }
        if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
            return "a complete private key block, and this one has no matching END line (cut short?)";
        }
        return "an OpenSSH or PEM private key (a block from -----BEGIN OPENSSH PRIVATE KEY----- to -----END OPENSSH PRIVATE KEY-----), and this text holds none";
    }
    const [, kind, body] = block;
    const passphrase = "a private key without a passphrase (vllm-fleet has none to give ssh): remove it with `ssh-keygen -p -f <key>`, or use another key";
    if (kind === "ENCRYPTED " || /^Proc-Type:\s*4,\s*ENCRYPTED/m.test(body)) {
        return passphrase;
    }
    if (kind === "OPENSSH ") {
        // openssh-key-v1: the magic, then the cipher name ("none" when the key has no passphrase). A
        // body that does not decode this way is left to ssh to judge.
        const bytes = Buffer.from(body.replace(/\s+/g, ""), "base64");
        const magic = "openssh-key-v1\0";
        if (bytes.length > magic.length + 4 && bytes.subarray(0, magic.length).toString("latin1") === magic) {
            const length = bytes.readUInt32BE(magic.length);
            const cipher = bytes.subarray(magic.length + 4, magic.length + 4 + length).toString("latin1");
            if (cipher !== "none") {
                return passphrase;
            }
        }
    }
    return undefined;
}

/** What the text of an API key holds that an HTTP header cannot carry or that breaks the exact match. */
function apiKeyProblem(value: string): string | undefined {
    if (value.length === 0) {
        return "an empty key";
    }
    if (/^\s|\s$/.test(value)) {
        return /\n$/.test(value) ? "a key ending in a newline" : "a key beginning or ending in whitespace";
    }
    if (/[\r\n]/.test(value)) {
        return "a key with a line break inside";
    }
    if (/\s/.test(value)) {
        return "a key with whitespace inside";
    }
    if (/[\u0000-\u001f\u007f]/.test(value)) {
        return "a key with a control character";
    }
    if (/[^\u0021-\u007e]/.test(value)) {
        return "a key with characters outside printable ASCII";
    }
    return undefined;
}

/** How to set each secret key, for the message that asks for it as a secret. */
const SET_AS_SECRET: Readonly<Record<SecretConfigKey, string>> = {
    sshPrivateKey: "pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519",
    vllmApiKey: 'pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"',
    hfToken: "pulumi config set --secret hfToken hf_... (a Hugging Face access token that may read the repo)",
};

/**
 * The problem of a secret key set in plain text (`isSecret` false) rather than with `--secret`; none
 * when it is a secret or not set. The value is never quoted. Pure.
 */
export function plainTextSecretIssues(key: SecretConfigKey, value: string | undefined, isSecret: boolean): ConfigIssue[] {
    if (value === undefined || isSecret) {
        return [];
    }
    return [
        {
            key: `${CONFIG_NAMESPACE}:${key}`,
            value: undefined,
            found: "a value in plain text in the stack settings",
            expected: `a secret: run \`${SET_AS_SECRET[key]}\` (and replace the old value, which the stack file holds in plain text)`,
        },
    ];
}

/**
 * The problem of the text of a secret sent as `Authorization: Bearer <value>` (`value` undefined
 * when it is not set): one token of printable ASCII, not empty (a header cannot carry a newline, and
 * the receiver compares it exactly). `noun` names it in the message; `whenEmpty` and `otherwise` are
 * what is expected. The value is never quoted. Pure.
 */
function bearerSecretIssues(key: SecretConfigKey, value: string | undefined, noun: string, whenEmpty: string, otherwise: string): ConfigIssue[] {
    const problem = value === undefined ? undefined : apiKeyProblem(value);
    if (!problem) {
        return [];
    }
    return [
        {
            key: `${CONFIG_NAMESPACE}:${key}`,
            value: undefined,
            found: `got ${problem.replace(/key/g, noun)}`,
            expected: problem === "an empty key" ? whenEmpty : otherwise,
        },
    ];
}

/** The problems of the text of the secret `vllm-fleet:vllmApiKey` (vLLM compares the Bearer token exactly). */
export function apiKeyIssues(value: string | undefined): ConfigIssue[] {
    return bearerSecretIssues(
        "vllmApiKey",
        value,
        "key",
        "a key (without it the stack makes one; to serve without any: pulumi config rm vllmApiKey, and set vllm-fleet:vllm.apiKey to none)",
        "one token of printable ASCII without spaces (vLLM compares the Bearer token exactly; a header cannot carry a newline)",
    );
}

/** The problems of the text of the secret `vllm-fleet:hfToken` (the Hub reads it from a Bearer header). */
export function hfTokenIssues(value: string | undefined): ConfigIssue[] {
    return bearerSecretIssues(
        "hfToken",
        value,
        "token",
        "a Hugging Face access token (for a repo that needs none, remove it: pulumi config rm hfToken)",
        "one token of printable ASCII without spaces (the Hub reads it from an Authorization: Bearer header)",
    );
}

/**
 * The problems of the text of the secret `vllm-fleet:sshPrivateKey` (`value` undefined when it is not
 * set): a private key the program can use ({@link privateKeyProblem}). Never quoted. Pure.
 */
export function sshPrivateKeyIssues(value: string | undefined): ConfigIssue[] {
    const problem = value === undefined ? undefined : privateKeyProblem(value);
    if (value === undefined || !problem) {
        return [];
    }
    return [{ key: `${CONFIG_NAMESPACE}:sshPrivateKey`, value: undefined, found: `got a secret of ${value.length} characters`, expected: problem }];
}
