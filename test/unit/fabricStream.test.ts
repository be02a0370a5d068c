/**
 * components/scripts/fabric-stream.py on this machine (127.0.0.1 stands in for the fabric): the
 * stream arrives whole, a wrong secret gets nothing, a stream cut short reaches the command as a
 * kill (never as an end of input), and a receiver that has the data tells the sender so. The files
 * mode (the weight sync's bulk transfer): files arrive whole with their mode and time, a transfer
 * broken mid-file leaves a part that the next sender continues, and no name leads outside the
 * directory.
 */
import { spawn } from "child_process";
import * as crypto from "crypto";
import * as net from "net";
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

function run(args: string[], secret: string, input?: string): Promise<Ended> {
    return new Promise((resolve) => {
        const child = spawn("python3", ["-c", STREAM, ...args], {
            env: { ...process.env, FLEET_SECRET: secret, FLEET_WAIT_SECONDS: "10", FLEET_PROGRESS_SECONDS: "60" },
            stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
        });
        child.stdin?.end(input);
        let stdout = "";
        let stderr = "";
        child.stdout!.on("data", (chunk) => (stdout += chunk));
        child.stderr!.on("data", (chunk) => (stderr += chunk));
        child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
}

function scratch(): string {
    return fs.mkdtempSync(path.join(os.tmpdir(), "fabric-stream-"));
}

async function waitFor(condition: () => boolean, seconds = 10): Promise<void> {
    const deadline = Date.now() + seconds * 1000;
    while (!condition()) {
        if (Date.now() > deadline) throw new Error("timed out waiting");
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
}

/** A sender of the files mode written here from the protocol, that drops the connection after `upTo` bytes of the file. */
async function brokenSender(port: number, secret: string, name: string, content: Buffer, mtimeNs: bigint, upTo: number): Promise<void> {
    for (let attempt = 0; ; attempt++) {
        try {
            return await brokenSenderOnce(port, secret, name, content, mtimeNs, upTo);
        } catch (error) {
            if (attempt > 50 || (error as NodeJS.ErrnoException).code !== "ECONNREFUSED") throw error;
            await new Promise((resolve) => setTimeout(resolve, 100));
        }
    }
}

function brokenSenderOnce(port: number, secret: string, name: string, content: Buffer, mtimeNs: bigint, upTo: number): Promise<void> {
    const mac = (role: string, nonce: string) => crypto.createHmac("sha256", secret).update(`${role} ${nonce}`).digest("hex");
    return new Promise((resolve, reject) => {
        const socket = net.connect(port, "127.0.0.1");
        let buffered = "";
        let stage = 0;
        const mine = crypto.randomBytes(16).toString("hex");
        socket.on("error", reject);
        socket.on("data", (chunk) => {
            buffered += chunk.toString("latin1");
            for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
                const line = buffered.slice(0, end);
                buffered = buffered.slice(end + 1);
                if (stage === 0) {
                    socket.write(`${mine} ${mac("sender", line.split(" ")[1])}\n`);
                } else if (stage === 1) {
                    expect(line).toBe(`${mac("receiver", mine)} SEND`);
                    socket.write(`FILE ${content.length} ${mtimeNs} 644 ${Buffer.from(name).toString("hex")}\n`);
                } else {
                    expect(line).toBe("FROM 0");
                    socket.write(content.subarray(0, upTo), () => {
                        socket.destroy();
                        resolve();
                    });
                }
                stage++;
            }
        });
    });
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

    it("hands the receiver's note to the sender before the sender's command runs (the layers an image copy target has)", async () => {
        const dir = scratch();
        const port = String(nextPort++);
        const note = "store classic\nimage sha256:aa sha256:bb\n".repeat(2000);
        fs.writeFileSync(`${dir}/note`, note);
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--note", `${dir}/note`, "--", "sh", "-c", `cat > ${dir}/out`], "k");
        // The sender's command streams the note it was handed back: it was there before the command ran.
        const sender = await run(["send", "127.0.0.1", port, "--note-out", `${dir}/got`, "--", "cat", `${dir}/got`], "k");
        expect((await receiver).code).toBe(0);
        expect(sender.code).toBe(0);
        expect(fs.readFileSync(`${dir}/got`, "utf8")).toBe(note);
        expect(fs.readFileSync(`${dir}/out`, "utf8")).toBe(note);
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it("writes an empty note when the receiver gave none", async () => {
        const dir = scratch();
        const port = String(nextPort++);
        fs.writeFileSync(`${dir}/got`, "stale");
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--", "sh", "-c", "cat >/dev/null"], "k");
        const sender = await run(["send", "127.0.0.1", port, "--note-out", `${dir}/got`, "--", "echo", "data"], "k");
        expect((await receiver).code).toBe(0);
        expect(sender.code).toBe(0);
        expect(fs.readFileSync(`${dir}/got`, "utf8")).toBe("");
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it("fails the sender when the receiver's command fails", async () => {
        const port = String(nextPort++);
        const receiver = run(["receive", "127.0.0.1", port, "127.0.0.1", "--", "sh", "-c", "cat >/dev/null; exit 9"], "k");
        const sender = await run(["send", "127.0.0.1", port, "--", "echo", "data"], "k");
        expect((await receiver).code).toBe(9);
        expect(sender.code).toBe(6);
        expect(sender.stderr).toContain("DONE 9");
    });

    describe("files", () => {
        /** A file of `size` random bytes at dir/name; its content. */
        function put(dir: string, name: string, size: number): Buffer {
            const content = crypto.randomBytes(size);
            fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
            fs.writeFileSync(path.join(dir, name), content);
            return content;
        }

        it("sends the named files whole, over several connections, with their mode and time", async () => {
            const [source, target] = [scratch(), scratch()];
            const big = put(source, "model-00001-of-00002.safetensors", 3_000_000);
            put(source, "model-00002-of-00002.safetensors", 2_000_000);
            put(source, "sub dir/config.json", 1234);
            fs.chmodSync(path.join(source, "sub dir/config.json"), 0o640);
            fs.utimesSync(path.join(source, "model-00001-of-00002.safetensors"), 1_700_000_000, 1_700_000_000);
            const port = String(nextPort++);
            const receiver = run(["receive-files", "127.0.0.1", port, "127.0.0.1", target], "k");
            const names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "sub dir/config.json", "no-such-file"];
            const sender = await run(["send-files", "127.0.0.1", port, source, "--streams", "2"], "k", names.join("\n") + "\n");
            const received = await receiver;
            expect(sender.code).toBe(0);
            expect(sender.stdout).toContain("left for later: no-such-file");
            expect(sender.stdout).toMatch(/files-sent files=3 same=0 streams=2 bytes=5001234 /);
            expect(received.code).toBe(0);
            expect(received.stdout).toMatch(/files-received files=3 bytes=5001234 /);
            expect(fs.readFileSync(path.join(target, "model-00001-of-00002.safetensors")).equals(big)).toBe(true);
            expect(fs.statSync(path.join(target, "model-00001-of-00002.safetensors")).mtimeMs).toBe(1_700_000_000_000);
            expect(fs.statSync(path.join(target, "sub dir/config.json")).mode & 0o777).toBe(0o640);
            expect(fs.readdirSync(target).filter((name) => name.endsWith(".fleet-part"))).toEqual([]);
            for (const dir of [source, target]) fs.rmSync(dir, { recursive: true, force: true });
        });

        it("keeps what a broken transfer took as a part, and the next sender continues it", async () => {
            const [source, target] = [scratch(), scratch()];
            const content = put(source, "w.safetensors", 4_000_000);
            const mtimeNs = BigInt(fs.statSync(path.join(source, "w.safetensors"), { bigint: true }).mtimeNs);
            // A stale part (another size of the file) goes when the file is taken again.
            fs.writeFileSync(path.join(target, ".w.safetensors.99-1.fleet-part"), "stale");
            const port = String(nextPort++);
            const receiver = run(["receive-files", "127.0.0.1", port, "127.0.0.1", target], "k");
            // A sender that dies inside the file: 1.5 MB of 4 MB, then the connection drops.
            await brokenSender(Number(port), "k", "w.safetensors", content, mtimeNs, 1_500_000);
            const part = path.join(target, `.w.safetensors.${content.length}-${mtimeNs}.fleet-part`);
            await waitFor(() => fs.existsSync(part) && fs.statSync(part).size === 1_500_000);
            expect(fs.existsSync(path.join(target, "w.safetensors"))).toBe(false);
            const sender = await run(["send-files", "127.0.0.1", port, source], "k", "w.safetensors\n");
            const received = await receiver;
            expect(sender.code).toBe(0);
            expect(sender.stdout).toMatch(/files-sent files=1 same=0 streams=1 bytes=2500000 /);
            expect(received.code).toBe(0);
            expect(received.stderr).toContain("the connection ended inside w.safetensors at 1500000 of 4000000 bytes");
            expect(fs.readFileSync(path.join(target, "w.safetensors")).equals(content)).toBe(true);
            expect(fs.readdirSync(target).filter((name) => name.endsWith(".fleet-part"))).toEqual([]);
            for (const dir of [source, target]) fs.rmSync(dir, { recursive: true, force: true });
        }, 20_000);

        it("refuses a name that leads outside its directory, also through a link, and writes nothing there", async () => {
            const root = scratch();
            const [source, target] = [path.join(root, "source"), path.join(root, "target")];
            fs.mkdirSync(target);
            fs.symlinkSync(root, path.join(target, "out"));
            put(source, "out/x", 10);
            put(root, "x", 10);
            const port = String(nextPort++);
            const receiver = run(["receive-files", "127.0.0.1", port, "127.0.0.1", target], "k");
            const up = await run(["send-files", "127.0.0.1", port, source], "k", "../x\n");
            const viaLink = await run(["send-files", "127.0.0.1", port, source], "k", "out/x\n");
            expect(up.code).toBe(3);
            expect(up.stderr).toContain("the receiver refused ../x");
            expect(viaLink.code).toBe(3);
            expect(viaLink.stderr).toContain("the receiver refused out/x");
            const received = await receiver;
            expect(received.code).toBe(3);
            expect(received.stderr).toContain(`refused the name 'out/x': not a path inside ${fs.realpathSync(target)}`);
            expect(fs.readdirSync(root).sort()).toEqual(["source", "target", "x"]);
            expect(fs.readdirSync(target)).toEqual(["out"]);
            fs.rmSync(root, { recursive: true, force: true });
        }, 30_000);
    });
});
