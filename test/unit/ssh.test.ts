/**
 * The shared SSH connection of each node (components/ssh.ts): where its socket lives and what names
 * it, and the read of the nodes going once more on a connection of its own when the shared one
 * failed, run against a fake `ssh` that records its arguments.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { observeOverSsh } from "../../components/observer";
import { sharedConnectionFailed, sshShareOptions } from "../../components/ssh";
import { parseFleetConfig } from "../../infra/core/config";
import { DEFAULT_CONTAINERS } from "../../infra/core/names";
import { sparkProbeOutput } from "./mocks";
import { sparkDuo } from "./stacks";

const target = { user: "aurora", host: "10.1.230.180", port: 22, connectTimeoutSeconds: 20 };
const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----\n";

let dir: string;
let savedTmpdir: string | undefined;
let savedPath: string | undefined;
let savedCache: string | undefined;
function restore(name: string, value: string | undefined): void {
    if (value === undefined) {
        delete process.env[name];
    } else {
        process.env[name] = value;
    }
}
beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "ssh-share-"));
    savedTmpdir = process.env.TMPDIR;
    savedPath = process.env.PATH;
    savedCache = process.env.XDG_CACHE_HOME;
    // The sockets and the ssh files of the read go under this test's directory.
    process.env.TMPDIR = dir;
    process.env.XDG_CACHE_HOME = dir;
});
afterEach(() => {
    restore("TMPDIR", savedTmpdir);
    restore("PATH", savedPath);
    restore("XDG_CACHE_HOME", savedCache);
    fs.rmSync(dir, { recursive: true, force: true });
});

const controlPath = (options: string[]) => options.find((option) => option.startsWith("ControlPath="))?.slice("ControlPath=".length);

describe("sshShareOptions: one connection per node, named by all it was made with", () => {
    it("puts the socket in a directory of this user's alone, and names it alike for alike connections", () => {
        const shared = sshShareOptions(target, KEY);
        expect(shared.options).toEqual(["-o", "ControlMaster=auto", "-o", expect.stringMatching(/^ControlPath=/), "-o", "ControlPersist=30"]);
        const socket = controlPath(shared.options)!;
        const socketDir = path.join(dir, `vllm-fleet-ssh-${process.getuid!()}`);
        expect(path.dirname(socket)).toBe(socketDir);
        expect(fs.statSync(socketDir).mode & 0o777).toBe(0o700);
        expect(shared.existing).toBe(false);
        expect(controlPath(sshShareOptions(target, KEY).options)).toBe(socket);
        fs.writeFileSync(socket, "");
        expect(sshShareOptions(target, KEY).existing).toBe(true);
    });

    it("gives another key, host key, port, user or host a connection of its own", () => {
        const socket = controlPath(sshShareOptions(target, KEY).options);
        const others = [
            sshShareOptions(target, KEY.replace("mock", "other")),
            sshShareOptions({ ...target, hostKey: "ssh-ed25519 AAAA" }, KEY),
            sshShareOptions({ ...target, port: 2222 }, KEY),
            sshShareOptions({ ...target, user: "root" }, KEY),
            sshShareOptions({ ...target, host: "10.1.230.181" }, KEY),
        ].map((shared) => controlPath(shared.options));
        expect(new Set([socket, ...others]).size).toBe(6);
    });

    it("puts the socket under /tmp when $TMPDIR is too long for a socket's path (macOS's is long)", () => {
        process.env.TMPDIR = path.join(dir, "a-long-temporary-directory-as-macos-gives-each-user".repeat(2));
        const socket = controlPath(sshShareOptions(target, KEY).options)!;
        expect(socket.startsWith(`/tmp/vllm-fleet-ssh-${process.getuid!()}/`)).toBe(true);
        // ssh adds 17 bytes while it makes the socket; 104 is the least room any system gives.
        expect(socket.length + 17).toBeLessThanOrEqual(100);
    });

    it("shares nothing when the directory is open to others or is not a directory", () => {
        const socketDir = path.join(dir, `vllm-fleet-ssh-${process.getuid!()}`);
        fs.mkdirSync(socketDir, { mode: 0o755 });
        fs.chmodSync(socketDir, 0o755);
        expect(sshShareOptions(target, KEY)).toEqual({ options: [], existing: false });
        fs.rmdirSync(socketDir);
        fs.symlinkSync(dir, socketDir);
        expect(sshShareOptions(target, KEY)).toEqual({ options: [], existing: false });
    });

    it("takes a silent 255 through an existing shared connection for the connection's failure, nothing else", () => {
        expect(sharedConnectionFailed({ existing: true }, 255, "")).toBe(true);
        expect(sharedConnectionFailed({ existing: false }, 255, "")).toBe(false);
        expect(sharedConnectionFailed({ existing: true }, 255, "### hostname\n")).toBe(false);
        expect(sharedConnectionFailed({ existing: true }, 1, "")).toBe(false);
    });
});

describe("the read of the nodes over shared connections", () => {
    /** A fake `ssh`: logs its arguments; `failShared` makes a session through a ControlPath socket fail as a dead connection does. */
    function fakeSsh(failShared: boolean): string {
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        const output = path.join(dir, "probe-output");
        fs.writeFileSync(output, sparkProbeOutput("192.168.200.12", "10.1.230.180"));
        fs.writeFileSync(
            path.join(bin, "ssh"),
            [
                "#!/bin/bash",
                `printf '%s\\n' "$*" >> ${JSON.stringify(path.join(dir, "calls"))}`,
                "cat > /dev/null",
                failShared ? 'case "$*" in *ControlMaster=auto*) echo "mux_client_request_session: read from master failed: Broken pipe" >&2; exit 255 ;; esac' : "",
                `cat ${JSON.stringify(output)}`,
            ].join("\n") + "\n",
            { mode: 0o755 },
        );
        process.env.PATH = `${bin}:${savedPath}`;
        return path.join(dir, "calls");
    }
    const config = parseFleetConfig({ ...sparkDuo, nodes: [sparkDuo.nodes[0]], parallelism: { tensor: 1 } });
    const secrets = { privateKey: KEY, privateKeyPath: undefined, containers: DEFAULT_CONTAINERS, stack: "unit" };

    it("reads over the shared connection when it works", async () => {
        const calls = fakeSsh(false);
        const [observation] = await observeOverSsh(config, secrets);
        expect(observation.facts.gpus).toHaveLength(1);
        const lines = fs.readFileSync(calls, "utf8").trim().split("\n");
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain("ControlMaster=auto");
    });

    it("reads once more on a connection of its own when an existing shared one failed", async () => {
        const calls = fakeSsh(true);
        fs.writeFileSync(controlPath(sshShareOptions({ ...target, port: 22 }, KEY).options)!, "");
        const [observation] = await observeOverSsh(config, secrets);
        expect(observation.facts.gpus).toHaveLength(1);
        const lines = fs.readFileSync(calls, "utf8").trim().split("\n");
        expect(lines).toHaveLength(2);
        expect(lines[1]).toContain("ControlPath=none");
        expect(lines[1]).not.toContain("ControlMaster=auto");
    });

    it("does not try again when no shared connection was there: the failure is the node's", async () => {
        fakeSsh(true);
        await expect(observeOverSsh(config, secrets)).rejects.toThrow(/node spark1 \(aurora@10\.1\.230\.180:22\): ssh failed \(connection or authentication\): mux_client/);
    });
});
