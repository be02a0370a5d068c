/**
 * Nothing on the nodes answers strangers, for both executors, on simulated Sparks:
 * - the API refuses a completion without the key the stack made (401) and serves one with it; so does
 *   every other route vLLM serves (/invocations, /tokenize, /metrics, ...: test/fixtures/vllm-routes.json),
 *   but the probes /health and /ping; no foreign web origin gets an allow-origin;
 * - with the ray executor, a Ray client on the management network without the cluster's token is
 *   refused by the GCS (real Ray 2.53 token authentication), while the nodes' own drivers use it;
 * - no secret (API key, Ray token, SSH private key) appears in any process's command line on any
 *   node while `up` runs, in a log of the containers, in the stack's state in plain text, or in
 *   `pulumi up`'s output.
 * - security.firewall (ray): Ray's ports refuse the management network and still serve the fabric;
 *   rules lost (a reboot) are put back by the next up; turned off, nothing of them is left.
 * Prints what listens where on each node (`ss -ltn`), for the table in docs/security.md.
 */
import { execFile, execFileSync } from "child_process";
import * as fs from "fs";
import * as net from "net";
import * as path from "path";
import { promisify } from "util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { RAY_CONTAINER, VLLM_CONTAINER } from "../../infra/core/names";
import { firewallChain, firewallMarker } from "../../infra/core/plan";
import { OPEN_ROUTES, answeredWithoutKey, statusOf } from "./keyProbes";
import { SimCluster, SimNode, complete, onNode, simDeployment, tearDown } from "./simCluster";

/** Where each node's command lines are sampled while `up` runs. */
const PS_LOG = "/tmp/vllm-fleet-ps.log";

/** A TCP connect from this machine (on the management network): connected, refused, or timeout. */
function tcpConnect(host: string, port: number): Promise<string> {
    return new Promise((resolve) => {
        const socket = net.connect({ host, port, timeout: 5000 });
        socket.on("connect", () => {
            socket.destroy();
            resolve("connected");
        });
        socket.on("timeout", () => {
            socket.destroy();
            resolve("timeout");
        });
        socket.on("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED" || error.code === "ECONNRESET" ? "refused" : (error.code ?? "error")));
    });
}

/** How many lines of `file` on `node` (default: the sampled command lines) hold one of `strings` (given on stdin: never in a command line). */
function linesWith(node: SimNode, strings: readonly string[], file = PS_LOG): string {
    return execFileSync("docker", ["exec", "-i", node.name, "sh", "-c", `grep -c -F -f - ${file} || true`], {
        input: strings.join("\n") + "\n",
        encoding: "utf8",
        timeout: 60_000,
    }).trim();
}

describe.each([
    { executor: "ray", name: "e2e-sec-ray" },
    { executor: "mp", name: "e2e-sec-mp" },
])("security with the $executor executor", ({ executor, name }) => {
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;
    let upOutput = "";
    let endpoint = "";
    let apiKey = "";
    const serving = executor === "ray" ? RAY_CONTAINER : VLLM_CONTAINER;

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, 2, { executor }));
        // Every command line on every node (the node's own processes and its containers'), five
        // times a second, for as long as `up` runs.
        for (const node of cluster.nodes) {
            onNode(node, `rm -f ${PS_LOG}; nohup sh -c 'while :; do ps -eww -o args >> ${PS_LOG}; sleep 0.2; done' >/dev/null 2>&1 & echo $! > /tmp/vllm-fleet-ps.pid`);
        }
        const up = await stack.up({ onOutput: (text) => (upOutput += text) });
        for (const node of cluster.nodes) {
            onNode(node, "kill $(cat /tmp/vllm-fleet-ps.pid)");
        }
        endpoint = up.outputs.endpoint.value;
        apiKey = up.outputs.apiKey.value;
    });

    afterAll(async () => {
        await tearDown({ stacks: [stack], cluster: name, workDir });
    });

    it("makes an API key and serves only with it: 401 without on every route vLLM serves, the probes aside", async () => {
        expect(apiKey).toMatch(/^[0-9a-f]{64}$/);
        await expect(complete(endpoint, "tiny-moe")).rejects.toThrow(/HTTP 401/);
        await expect(complete(endpoint, "tiny-moe", "not-the-key")).rejects.toThrow(/HTTP 401/);
        const body = await complete(endpoint, "tiny-moe", apiKey);
        expect(body.choices[0].text).toContain(cluster.nodes[1].fabricIp);
        // Not only /v1: every route of every supported vLLM version (vLLM's own check guards /v1 only).
        const root = endpoint.replace(/\/v1$/, "");
        expect(await answeredWithoutKey(root)).toEqual([]);
        for (const route of OPEN_ROUTES) {
            expect(await statusOf(`${root}${route}`), route).toBe(200);
        }
        // With the key, what vLLM serves outside /v1 answers: a completion through /invocations.
        const keyed = { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` };
        const invocation = await fetch(`${root}/invocations`, { method: "POST", headers: keyed, body: JSON.stringify({ model: "tiny-moe", prompt: "Hello", max_tokens: 4 }) });
        expect(invocation.status).toBe(200);
        expect(((await invocation.json()) as { choices: unknown[] }).choices).toHaveLength(1);
        expect(await statusOf(`${root}/tokenize`, { method: "POST", headers: keyed, body: JSON.stringify({ model: "tiny-moe", prompt: "Hello" }) })).toBe(200);
        // No web page of another origin may use it: no allow-origin, for a preflight or a request.
        const preflight = await fetch(`${endpoint}/completions`, { method: "OPTIONS", headers: { Origin: "https://evil.example", "Access-Control-Request-Method": "POST" } });
        await preflight.text();
        expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
        const fromPage = await fetch(`${endpoint}/models`, { headers: { Authorization: `Bearer ${apiKey}`, Origin: "https://evil.example" } });
        await fromPage.text();
        expect(fromPage.headers.get("access-control-allow-origin")).toBeNull();
    });

    it.runIf(executor === "ray")("refuses a Ray client without the cluster's token, from the management network", async () => {
        const head = cluster.nodes[0];
        const attempt = async (env: string[]) => {
            const args = ["run", "--rm", "--network", `${name}-mgmt`, ...env.flatMap((e) => ["-e", e]), "--entrypoint", "timeout", cluster.workloadImage];
            const script = `import ray; ray.init(address="${head.mgmtIp}:6379", logging_level="ERROR"); print("CONNECTED", len(ray.nodes()))`;
            const result = await promisify(execFile)("docker", [...args, "40", "python3", "-c", script], { encoding: "utf8", timeout: 90_000 }).then(
                ({ stdout, stderr }) => stdout + stderr,
                (error: Error & { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
            );
            return result;
        };
        // Both at once: a refused client retries for a while before it gives up.
        const [stranger, guesser] = await Promise.all([
            attempt([]),
            attempt(["RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN=0000000000000000000000000000000000000000000000000000000000000000"]),
        ]);
        expect(stranger).not.toContain("CONNECTED");
        expect(stranger).toMatch(/Unauthenticated.*InvalidAuthToken/);
        expect(guesser).not.toContain("CONNECTED");
        expect(guesser).toMatch(/InvalidAuthToken/);
        // The nodes themselves use the token: the head lists both nodes to a driver run there.
        const inside = onNode(head, `docker exec ${RAY_CONTAINER} python3 -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(sum(1 for n in ray.nodes() if n["Alive"]))' 2>/dev/null`);
        expect(inside.trim().split("\n").pop()).toBe("2");
    });

    it("shows no secret in a command line on any node during up, in a log, in the state, or in up's output", async () => {
        const secrets: [string, string][] = [["the API key", apiKey]];
        if (executor === "ray") {
            const token = onNode(cluster.nodes[0], `docker exec ${RAY_CONTAINER} printenv RAY_AUTH_TOKEN`).trim();
            expect(token).toMatch(/^[0-9a-f]{64}$/);
            expect(onNode(cluster.nodes[1], `docker exec ${RAY_CONTAINER} printenv RAY_AUTH_TOKEN`).trim()).toBe(token);
            secrets.push(["the Ray token", token]);
        }
        // A line from the middle of the private key's body.
        const keyLines = fs.readFileSync(cluster.sshPrivateKeyPath, "utf8").trim().split("\n");
        secrets.push(["the SSH private key", keyLines[Math.floor(keyLines.length / 2)]]);

        // The state as the backend keeps it (the stack, its backups and history), not `stack export`,
        // which decrypts secrets for whoever holds the passphrase.
        const stateFiles: string[] = [];
        const walk = (dir: string) => {
            for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
                const file = path.join(dir, entry.name);
                entry.isDirectory() ? walk(file) : stateFiles.push(file);
            }
        };
        walk(path.join(workDir, "state"));
        expect(stateFiles.some((file) => file.endsWith(`${name}.json`))).toBe(true);
        const state = stateFiles.map((file) => fs.readFileSync(file, "utf8")).join("\n");
        // The secrets are there, encrypted: the stack's state holds ciphertext for each of them.
        expect(state).toMatch(/"ciphertext"/);
        for (const node of cluster.nodes) {
            // The sampler saw the deployment happen: the serving container's program ran here.
            expect(Number(linesWith(node, [executor === "ray" ? "ray start" : "vllm serve"]))).toBeGreaterThan(0);
            for (const [what, value] of secrets) {
                expect(linesWith(node, [value]), `${what} in a command line on ${node.name}`).toBe("0");
            }
        }
        // Nor in a log: the serving containers', `vllm serve`'s (ray) and the watchdog's.
        for (const node of cluster.nodes) {
            const logs = "/tmp/vllm-fleet-logs.txt";
            onNode(
                node,
                `{ docker logs ${serving}; docker logs vllm-fleet-watchdog; docker exec ${serving} cat /tmp/vllm-fleet-serve.log; } > ${logs} 2>&1 || true`,
            );
            expect(Number(onNode(node, `wc -l < ${logs}`).trim())).toBeGreaterThan(0);
            for (const [what, value] of secrets) {
                expect(linesWith(node, [value], logs), `${what} in a log on ${node.name}`).toBe("0");
            }
        }
        for (const [what, value] of secrets) {
            expect(state.includes(value), `${what} in the state in plain text`).toBe(false);
            expect(upOutput.includes(value), `${what} in up's output`).toBe(false);
        }
        expect(upOutput).toMatch(/apiKey\s*:\s*\[secret\]/);
    });

    it.runIf(executor === "ray")("with security.firewall, keeps Ray's ports to the fabric, serves on, puts lost rules back, and removes them when turned off", async () => {
        const head = cluster.nodes[0];
        const chain = firewallChain(name);
        expect(await tcpConnect(head.mgmtIp, 6379)).toBe("connected");
        await stack.setConfig("vllm-fleet:security", { value: JSON.stringify({ firewall: true }) });
        const on = await stack.up();
        // Each node's firewall: its component and the step that applies its rules.
        expect(on.summary.resourceChanges).toMatchObject({ create: 4 });
        // From the management network: Ray's GCS and worker ports are reset, SSH and the API answer.
        expect(await tcpConnect(head.mgmtIp, 6379)).toBe("refused");
        expect(await tcpConnect(head.mgmtIp, 10002)).toBe("refused");
        expect(await tcpConnect(head.mgmtIp, 22)).toBe("connected");
        expect((await complete(endpoint, "tiny-moe", apiKey)).choices[0].text).toContain(cluster.nodes[1].fabricIp);
        // Over the fabric, Ray is reachable: the worker node reaches the head's GCS.
        expect(onNode(cluster.nodes[1], `timeout 5 bash -c 'echo > /dev/tcp/${head.fabricIp}/6379' && echo connected`).trim()).toBe("connected");
        // Rules lost (as after a reboot): the next up puts them back, and changes nothing else.
        onNode(head, `iptables -w -D INPUT -j ${chain} && rm ${firewallMarker(name)}`);
        expect(await tcpConnect(head.mgmtIp, 6379)).toBe("connected");
        const back = await stack.up();
        expect(back.summary.resourceChanges).toMatchObject({ replace: 1 });
        expect(await tcpConnect(head.mgmtIp, 6379)).toBe("refused");
        await stack.up({ expectNoChanges: true });
        // Turned off: no rule of the stack is left on any node.
        await stack.setConfig("vllm-fleet:security", { value: JSON.stringify({ firewall: false }) });
        await stack.up();
        for (const node of cluster.nodes) {
            expect(onNode(node, "iptables -w -S")).not.toContain(chain);
        }
        expect(await tcpConnect(head.mgmtIp, 6379)).toBe("connected");
    });

    it("lists what listens where on each node", () => {
        for (const node of cluster.nodes) {
            const listening = onNode(node, "ss -ltnH | awk '{print $4}' | sort -u").trim().split("\n");
            console.log(`listening on ${node.name} (${executor}; management ${node.mgmtIp}, fabric ${node.fabricIp}): ${listening.join(" ")}`);
            // vLLM's API on every address of the first node; the serving container is there.
            if (node.index === 0) {
                expect(listening).toContain("0.0.0.0:8000");
            }
            expect(onNode(node, `docker inspect --format '{{.State.Running}}' ${serving}`).trim()).toBe("true");
        }
    });
});

