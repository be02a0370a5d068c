/**
 * The shared SSH connection of each node (components/ssh.ts): where its socket lives and what names
 * it, how a node that stops answering is noticed and named (the options, and what OpenSSH prints,
 * as OpenSSH 9.2 printed it against an sshd whose packets were dropped), and the read of the nodes
 * going once more on a connection of its own when the shared one failed, run against a fake `ssh`
 * that records its arguments.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { observeOverSsh } from "../../components/observer";
import { SSH_KEEPALIVE, noAnswerMessage, sharedConnectionFailed, sshClientOptions, sshShareOptions } from "../../components/ssh";
import { sshConnectTimedOut } from "../../components/stepFailure";
import { parseFleetConfig } from "../../infra/core/config";
import { DEFAULT_CONTAINERS, serviceContainers } from "../../infra/core/names";
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
});

// What OpenSSH 9.2 printed (LogLevel=ERROR) in each case; \r as it prints it.
const MUX_BROKEN = "mux_client_request_session: read from master failed: Broken pipe\r\n";
const CONNECT_TIMED_OUT = "ssh: connect to host 10.1.230.181 port 22: Connection timed out\r\n";

describe("a node that stops answering is noticed in seconds and named", () => {
    it("gives one connection attempt of ConnectTimeout, and keepalives that close a silent connection after 12 s", () => {
        const options = sshClientOptions({ ...target, connectTimeoutSeconds: 20 }, "/k", "/kh");
        const option = (name: string) => options.find((o) => o.startsWith(`${name}=`))?.slice(name.length + 1);
        expect(option("ConnectTimeout")).toBe("20");
        expect(option("ConnectionAttempts")).toBe("1");
        expect(option("ServerAliveInterval")).toBe(String(SSH_KEEPALIVE.intervalSeconds));
        expect(option("ServerAliveCountMax")).toBe(String(SSH_KEEPALIVE.countMax));
        // ssh closes a connection after countMax unanswered keepalives, one interval apart, the
        // first one interval after the node's last packet; a session on it then tries a fresh
        // connection of ConnectTimeout: the node is named within ConnectTimeout + this.
        expect((SSH_KEEPALIVE.countMax + 1) * SSH_KEEPALIVE.intervalSeconds).toBeLessThanOrEqual(12);
        // Not so eager that a node busy for a moment loses its sessions.
        expect(SSH_KEEPALIVE.countMax * SSH_KEEPALIVE.intervalSeconds).toBeGreaterThanOrEqual(9);
    });

    it.each([
        ["a fresh connection's connect timeout", CONNECT_TIMED_OUT, true],
        ["the same on macOS", "ssh: connect to host 10.1.230.181 port 22: Operation timed out\r\n", true],
        ["a shared connection gone silent, then ssh's own fresh connection", MUX_BROKEN + CONNECT_TIMED_OUT, true],
        ["sshd accepting but never sending its banner (sshd stopped)", "Connection timed out during banner exchange\r\n", true],
        ["sshd down: refused", "ssh: connect to host 10.1.230.181 port 22: Connection refused\r\n", false],
        ["the key revoked", "spark@10.1.230.181: Permission denied (publickey).\r\n", false],
        ["another host key", "Host key verification failed.\r\n", false],
        ["a shared connection that failed at once (the node rebooted since): ssh's fresh one then works", MUX_BROKEN, false],
        ["a program's own words", "curl: (28) Connection timed out after 5001 milliseconds\n", false],
        ["no word: a connection the keepalives closed, or silence during the login", "", false],
    ])("tells that ssh gave up waiting for the node: %s", (_case, stderr, timedOut) => {
        expect(sshConnectTimedOut(stderr)).toBe(timedOut);
        expect(noAnswerMessage("node spark2 (spark@10.1.230.181:22)", stderr, 20)).toBe(
            timedOut ? "node spark2 (spark@10.1.230.181:22) does not answer on SSH (no reply within 20 s)" : undefined,
        );
    });

    it.each([
        ["a silent 255 through an existing shared connection", true, 255, "", MUX_BROKEN, true],
        ["the same with no word at all (the connection ended after the session opened)", true, 255, "", "", true],
        ["no shared connection was there: the failure is the node's", false, 255, "", MUX_BROKEN, false],
        ["the session had printed: the program ran", true, 255, "### hostname\n", "", false],
        ["the program failed", true, 1, "", "", false],
        ["ssh's own fresh connection timed out already: another would wait as long", true, 255, "", MUX_BROKEN + CONNECT_TIMED_OUT, false],
    ])("runs once more on a connection of its own: %s -> %s", (_case, existing, code, stdout, stderr, again) => {
        expect(sharedConnectionFailed({ existing }, { code, stdout, stderr })).toBe(again);
    });
});

describe("the read of the nodes over shared connections", () => {
    /**
     * A fake `ssh`: logs its arguments, then answers as `node` says. `works`: prints the probe's
     * output. `connection ended`: a session through a shared connection ends as one the
     * keepalives closed after it opened (255, no word); on a connection of its own it works.
     * `silent`: the node does not answer, as OpenSSH 9.2 printed it (through a shared connection,
     * ssh's own fresh connection times out after the shared one failed).
     */
    function fakeSsh(node: "works" | "connection ended" | "silent"): string {
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        const output = path.join(dir, "probe-output");
        // What read-views.sh prints for two views of the node.
        const probe = sparkProbeOutput("192.168.200.12", "10.1.230.180");
        fs.writeFileSync(output, `@@ vllm-fleet view 0\n${probe}\n@@ vllm-fleet view 1\n${probe}\n`);
        const answer = {
            works: "",
            "connection ended": 'case "$*" in *ControlMaster=auto*) exit 255 ;; esac',
            silent: [
                'case "$*" in *ControlMaster=auto*) printf "mux_client_request_session: read from master failed: Broken pipe\\r\\n" >&2 ;; esac',
                'printf "ssh: connect to host 10.1.230.180 port 22: Connection timed out\\r\\n" >&2; exit 255',
            ].join("\n"),
        }[node];
        fs.writeFileSync(
            path.join(bin, "ssh"),
            ["#!/bin/bash", `printf '%s\\n' "$*" >> ${JSON.stringify(path.join(dir, "calls"))}`, `cat > ${JSON.stringify(path.join(dir, "input"))}`, answer, `cat ${JSON.stringify(output)}`].join("\n") + "\n",
            { mode: 0o755 },
        );
        process.env.PATH = `${bin}:${savedPath}`;
        return path.join(dir, "calls");
    }
    const config = parseFleetConfig({ ...sparkDuo, nodes: [sparkDuo.nodes[0]], parallelism: { tensor: 1 } });
    const views = [{ config, containers: DEFAULT_CONTAINERS }];
    const secrets = { privateKey: KEY, privateKeyPath: undefined, stack: "unit" };
    const callsIn = (calls: string) => fs.readFileSync(calls, "utf8").trim().split("\n");
    const existingSharedConnection = () => fs.writeFileSync(controlPath(sshShareOptions({ ...target, port: 22 }, KEY).options)!, "");

    it("reads over the shared connection when it works", async () => {
        const calls = fakeSsh("works");
        const [[observation]] = await observeOverSsh(views, secrets);
        expect(observation.facts.gpus).toHaveLength(1);
        const lines = callsIn(calls);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain("ControlMaster=auto");
        expect(lines[0]).toContain("ConnectTimeout=20");
        expect(lines[0]).toContain("ServerAliveInterval=3");
    });

    it("reads a node two services share in one session, each service's program in it, and answers each service's view", async () => {
        const calls = fakeSsh("works");
        const other = { config: { ...config, image: { ...config.image, name: "other:1" } }, containers: serviceContainers("coder") };
        const [[first], [second]] = await observeOverSsh([...views, other], secrets);
        expect(callsIn(calls)).toHaveLength(1);
        expect([first.node, second.node]).toEqual(["spark1", "spark1"]);
        expect(second.facts.gpus).toHaveLength(1);
        const input = fs.readFileSync(path.join(dir, "input"), "utf8");
        expect(input).toContain(DEFAULT_CONTAINERS.watchdog);
        expect(input).toContain(serviceContainers("coder").watchdog);
    });

    it("reads once more on a connection of its own when an existing shared one ended", async () => {
        const calls = fakeSsh("connection ended");
        existingSharedConnection();
        const [[observation]] = await observeOverSsh(views, secrets);
        expect(observation.facts.gpus).toHaveLength(1);
        const lines = callsIn(calls);
        expect(lines).toHaveLength(2);
        expect(lines[1]).toContain("ControlPath=none");
        expect(lines[1]).not.toContain("ControlMaster=auto");
    });

    it("does not try again when no shared connection was there: the failure is the node's", async () => {
        fakeSsh("connection ended");
        await expect(observeOverSsh(views, secrets)).rejects.toThrow(/^node spark1 \(aurora@10\.1\.230\.180:22\): ssh failed \(connection or authentication\): no answer$/);
    });

    it.each([
        ["with no shared connection", false],
        ["through an existing shared connection (ssh's own fresh connection timed out: no second one)", true],
    ])("names a node that does not answer, %s", async (_case, existing) => {
        const calls = fakeSsh("silent");
        if (existing) {
            existingSharedConnection();
        }
        await expect(observeOverSsh(views, secrets)).rejects.toThrow(/^node spark1 \(aurora@10\.1\.230\.180:22\) does not answer on SSH \(no reply within 20 s\)$/);
        expect(callsIn(calls)).toHaveLength(1);
    });
});
