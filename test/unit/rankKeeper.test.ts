/**
 * The keeper of a vLLM rank (components/scripts/vllm-rank.py), run by python3 with a shell program
 * in vLLM's place and, for a headless rank, a fake rank 0's /health served by this process: what it
 * makes of the ways real vLLM ends (status 0 when a rank of its group died; a status of its own; a
 * stop asked for) and of a rank 0 that goes away under a headless rank: its connections closed, or
 * its /health silent.
 */
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as http from "http";
import * as net from "net";
import { AddressInfo } from "net";
import * as os from "os";
import * as path from "path";
import { afterEach, describe, expect, it } from "vitest";

const KEEPER = path.join(__dirname, "../../components/scripts/vllm-rank.py");

interface Outcome {
    readonly code: number | null;
    readonly stderr: string;
}

const running: ChildProcess[] = [];
const servers: http.Server[] = [];
const dirs: string[] = [];

afterEach(async () => {
    running.splice(0).forEach((child) => child.exitCode === null && child.kill("SIGKILL"));
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
    dirs.splice(0).forEach((dir) => fs.rmSync(dir, { recursive: true, force: true }));
});

/** Starts the keeper over `sh -c program`; `ended` resolves with its exit. */
function keep(program: string, env: Record<string, string> = {}): { child: ChildProcess; ended: Promise<Outcome> } {
    const child = spawn("python3", [KEEPER, "sh", "-c", program], { env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1", ...env }, stdio: ["ignore", "ignore", "pipe"] });
    running.push(child);
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const ended = new Promise<Outcome>((resolve) => child.on("exit", (code) => resolve({ code, stderr })));
    return { child, ended };
}

/** A fake rank 0: /health answers 200 while `state.up`, else the port is closed. */
async function fakeRank0(): Promise<{ url: string; stop: () => Promise<void> }> {
    const server = http.createServer((req, res) => {
        res.writeHead(req.url === "/health" ? 200 : 404);
        res.end();
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
    return {
        url,
        stop: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    };
}

function tempDir(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rank-keeper-"));
    dirs.push(dir);
    return dir;
}

/** Whether `pid` still runs (a zombie, killed and not yet reaped by whoever inherited it, does not). */
function alive(pid: number): boolean {
    try {
        return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
        return false;
    }
}

describe("the keeper of a vLLM rank", () => {
    it("turns vLLM's exit 0 by itself (a rank of its group died) into 1, which Docker's on-failure policy restarts, and says why", async () => {
        const { code, stderr } = await keep("sleep 0.3; exit 0").ended;
        expect(code).toBe(1);
        expect(stderr).toMatch(/vllm-fleet rank: vLLM exited 0 by itself .*exiting 1/);
    });

    it("keeps a status vLLM chose, and gives 128 + the signal that killed it", async () => {
        expect((await keep("exit 3").ended).code).toBe(3);
        expect((await keep("kill -9 $$").ended).code).toBe(137);
    });

    it("passes a stop asked for (SIGTERM) to vLLM, whose exit 0 then stays 0: not restarted", async () => {
        const dir = tempDir();
        const { child, ended } = keep(`trap 'echo stopped > ${dir}/vllm; exit 0' TERM; touch ${dir}/started; while :; do sleep 0.1; done`);
        while (!fs.existsSync(path.join(dir, "started"))) {
            await new Promise((resolve) => setTimeout(resolve, 50));
        }
        child.kill("SIGTERM");
        expect((await ended).code).toBe(0);
        expect(fs.readFileSync(path.join(dir, "vllm"), "utf8").trim()).toBe("stopped");
    });

    it("ends a headless rank, and every process of it, once vLLM's connections to rank 0 are closed after it joined", async () => {
        // Rank 0's rendezvous port: the connection vLLM holds while it is in the group.
        const sockets: net.Socket[] = [];
        const store = net.createServer((socket) => sockets.push(socket));
        await new Promise<void>((resolve) => store.listen(0, "127.0.0.1", resolve));
        const port = (store.address() as AddressInfo).port;
        const dir = tempDir();
        // vLLM's stand-in: a worker that holds a connection to rank 0 and then stays silent forever,
        // as a real headless rank does when rank 0 goes away (its socket in CLOSE-WAIT).
        const worker = `import socket, time; s = socket.create_connection(("127.0.0.1", ${port})); time.sleep(1000)`;
        const { ended } = keep(`python3 -c '${worker}' & echo $! > ${dir}/worker; wait`, {
            VLLM_FLEET_RANK0_ADDRESS: "127.0.0.1",
            VLLM_FLEET_RANK0_INTERVAL: "0.2",
            VLLM_FLEET_RANK0_FAILURES: "3",
        });
        while (sockets.length === 0) {
            await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await new Promise((resolve) => setTimeout(resolve, 800));
        sockets.forEach((socket) => socket.destroy());
        store.close();
        const { code, stderr } = await ended;
        expect(code).toBe(1);
        expect(stderr).toContain("joined rank 0 at 127.0.0.1");
        expect(stderr).toMatch(/vLLM holds no connection to rank 0 at 127\.0\.0\.1 any more \(3 looks in a row\): rank 0 is gone: ending this rank/);
        const pid = Number(fs.readFileSync(path.join(dir, "worker"), "utf8"));
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(alive(pid)).toBe(false);
    });

    it("ends a headless rank whose group broke before the keeper looked: its connection to rank 0 lingers in CLOSE-WAIT", async () => {
        // Rank 0 accepts and closes at once: vLLM never closes its end (as a stuck headless rank does).
        const store = net.createServer((socket) => socket.destroy());
        await new Promise<void>((resolve) => store.listen(0, "127.0.0.1", resolve));
        const port = (store.address() as AddressInfo).port;
        const worker = `import socket, time; s = socket.create_connection(("127.0.0.1", ${port})); time.sleep(1000)`;
        const { code, stderr } = await keep(`python3 -c '${worker}'`, {
            VLLM_FLEET_RANK0_ADDRESS: "127.0.0.1",
            VLLM_FLEET_RANK0_INTERVAL: "0.5",
            VLLM_FLEET_RANK0_FAILURES: "2",
        }).ended;
        store.close();
        expect(code).toBe(1);
        expect(stderr).not.toContain("joined rank 0");
        expect(stderr).toContain("vLLM holds no connection to rank 0 at 127.0.0.1 any more (2 looks in a row): rank 0 is gone");
    });

    it("ends a headless rank whose rank 0 served and then refuses connections (its node restarted: nothing closed vLLM's connections)", async () => {
        const rank0 = await fakeRank0();
        const { ended } = keep("sleep 1000", {
            VLLM_FLEET_RANK0_ADDRESS: "127.0.0.2",
            VLLM_FLEET_RANK0_HEALTH: rank0.url,
            VLLM_FLEET_RANK0_INTERVAL: "0.2",
            VLLM_FLEET_RANK0_FAILURES: "3",
            VLLM_FLEET_RANK0_SILENCE: "60",
        });
        await new Promise((resolve) => setTimeout(resolve, 700));
        await rank0.stop();
        const { code, stderr } = await ended;
        expect(code).toBe(1);
        expect(stderr).toContain(`rank 0 serves (${rank0.url})`);
        expect(stderr).toContain(`rank 0's API refuses connections (${rank0.url}: 3 looks in a row): rank 0 is gone: ending this rank`);
    });

    it("ends a headless rank whose rank 0 served and then has not answered /health at all for the silence allowed", async () => {
        // Rank 0's port accepts, then leaves every request unanswered (a node gone, or stalled).
        let answering = true;
        const server = http.createServer((req, res) => {
            if (answering) {
                res.writeHead(200);
                res.end();
            }
        });
        servers.push(server);
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
        const { ended } = keep("sleep 1000", {
            VLLM_FLEET_RANK0_ADDRESS: "127.0.0.2",
            VLLM_FLEET_RANK0_HEALTH: url,
            VLLM_FLEET_RANK0_INTERVAL: "0.2",
            VLLM_FLEET_RANK0_FAILURES: "3",
            VLLM_FLEET_RANK0_SILENCE: "1.5",
        });
        await new Promise((resolve) => setTimeout(resolve, 700));
        answering = false;
        const silentSince = Date.now();
        const { code, stderr } = await ended;
        server.closeAllConnections();
        expect(code).toBe(1);
        expect(stderr).toMatch(/rank 0 has not answered .* for [12] s: ending this rank/);
        // Not before the silence allowed (less the last answer's look).
        expect(Date.now() - silentSince).toBeGreaterThanOrEqual(1200);
    });

    it("leaves a headless rank alone while its group is still starting: not joined, rank 0 not serving yet", async () => {
        const rank0 = await fakeRank0();
        await rank0.stop(); // a closed port: rank 0 opens its API only once every rank has joined
        const { code, stderr } = await keep("sleep 1.5; exit 7", {
            VLLM_FLEET_RANK0_ADDRESS: "127.0.0.1",
            VLLM_FLEET_RANK0_HEALTH: rank0.url,
            VLLM_FLEET_RANK0_INTERVAL: "0.1",
            VLLM_FLEET_RANK0_FAILURES: "2",
            VLLM_FLEET_RANK0_SILENCE: "0.2",
        }).ended;
        expect(code).toBe(7);
        expect(stderr).not.toContain("rank 0");
    });

    it("refuses a setting that is no number, and an address that is no IPv4 one, naming them", async () => {
        const interval = await keep("exit 0", { VLLM_FLEET_RANK0_INTERVAL: "soon" }).ended;
        expect(interval.code).toBe(2);
        expect(interval.stderr).toContain("VLLM_FLEET_RANK0_INTERVAL='soon': expected a number of at least 0.1");
        const address = await keep("exit 0", { VLLM_FLEET_RANK0_ADDRESS: "spark1" }).ended;
        expect(address.code).toBe(2);
        expect(address.stderr).toContain("VLLM_FLEET_RANK0_ADDRESS='spark1': expected an IPv4 address");
    });
});
