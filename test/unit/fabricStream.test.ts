/**
 * components/scripts/fabric-stream.py on this machine (127.0.0.1 stands in for the fabric): the
 * stream arrives whole, a wrong secret gets nothing, a stream cut short reaches the command as a
 * kill (never as an end of input), and a receiver that has the data tells the sender so.
 */
import { spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { readScript } from "../../components/shell";

const STREAM = readScript("fabric-stream.py");
let nextPort = 29400 + Math.floor(Math.random() * 500);

interface Ended {
    code: number | null;
    stdout: string;
    stderr: string;
}

function run(args: string[], secret: string): Promise<Ended> {
    return new Promise((resolve) => {
        const child = spawn("python3", ["-c", STREAM, ...args], {
            env: { ...process.env, FLEET_SECRET: secret, FLEET_WAIT_SECONDS: "10", FLEET_PROGRESS_SECONDS: "60" },
            stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (chunk) => (stdout += chunk));
        child.stderr.on("data", (chunk) => (stderr += chunk));
        child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
}

function scratch(): string {
    return fs.mkdtempSync(path.join(os.tmpdir(), "fabric-stream-"));
}

describe("fabric-stream.py", () => {
    it("streams a command's output into another command, authenticated both ways", async () => {
        const dir = scratch();
        const port = String(nextPort++);
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--", "sh", "-c", `cat > ${dir}/out`], "s3cret");
        const sender = await run(["send", "127.0.0.1", port, "--", "head", "-c", "5000000", "/dev/urandom"], "s3cret");
        const received = await receiver;
        expect(sender.code).toBe(0);
        expect(received.code).toBe(0);
        expect(sender.stdout).toMatch(/stream-sent bytes=5000000 millis=\d+/);
        expect(received.stdout).toMatch(/stream-received bytes=5000000 millis=\d+/);
        expect(fs.statSync(`${dir}/out`).size).toBe(5000000);
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it("gives a sender without the secret nothing, and the command never starts", async () => {
        const dir = scratch();
        const port = String(nextPort++);
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--", "sh", "-c", `cat > ${dir}/out`], "right");
        const sender = await run(["send", "127.0.0.1", port, "--", "echo", "data"], "wrong");
        expect(sender.code).not.toBe(0);
        expect(sender.stderr).toContain("handshake");
        const received = await receiver;
        expect(received.code).toBe(4);
        expect(received.stderr).toContain("the sender does not know the secret");
        expect(fs.existsSync(`${dir}/out`)).toBe(false);
        fs.rmSync(dir, { recursive: true, force: true });
    }, 20_000);

    it("kills the command when the stream ends without its end mark (the sender's command failed)", async () => {
        const dir = scratch();
        const port = String(nextPort++);
        // The command would leave `complete` only after an end of input.
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--", "sh", "-c", `cat > ${dir}/out && touch ${dir}/complete`], "k");
        const sender = await run(["send", "127.0.0.1", port, "--", "sh", "-c", "head -c 3000000 /dev/zero; exit 7"], "k");
        const received = await receiver;
        expect(sender.code).toBe(7);
        expect(received.code).toBe(3);
        expect(received.stderr).toContain("stream broken");
        expect(fs.existsSync(`${dir}/complete`)).toBe(false);
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it("tells the sender when it has the data already, and nothing is sent", async () => {
        const port = String(nextPort++);
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--have"], "k");
        const sender = await run(["send", "127.0.0.1", port, "--", "sh", "-c", "echo ran >&2; echo data"], "k");
        const received = await receiver;
        expect(sender.code).toBe(0);
        expect(received.code).toBe(0);
        expect(sender.stdout).toContain("stream-skipped");
        expect(sender.stderr).not.toContain("ran");
    });

    it("fails the sender when the receiver's command fails", async () => {
        const port = String(nextPort++);
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--", "sh", "-c", "cat >/dev/null; exit 9"], "k");
        const sender = await run(["send", "127.0.0.1", port, "--", "echo", "data"], "k");
        expect((await receiver).code).toBe(9);
        expect(sender.code).toBe(6);
        expect(sender.stderr).toContain("DONE 9");
    });
});
