/**
 * It stays serving: faults on simulated Sparks, for both executors, through the real engine.
 *
 * - A host that preflight refuses (fabric down, another image, no model, no GPU, no Docker) is
 *   refused by name, and once fixed a plain `up` converges: facts are read on every run.
 * - Supervision on the hosts (Docker's restart policy, vLLM failing as a group, the watchdog)
 *   brings the endpoint back by itself after a killed worker or rank, a killed head or rank 0,
 *   a killed `vllm serve` (ray), a restarted node; the next `up` then has nothing to do.
 * - What supervision cannot fix (a container removed) a plain `up` replaces, and only it; what it
 *   leaves alone (a head or rank 0 stopped or paused by hand) and an engine restart on the first
 *   node never wedge `up`: a plain one (and, for ray, refresh + up) serves again.
 * - A serving container replaced with a warm compile cache (mp) starts at least the stand-in's
 *   compile time sooner than one replaced with a cold cache; both times are printed.
 * - A node that stops answering on SSH (ray) is named by `preview` and `up` within the SSH connect
 *   timeout + 15 s.
 * - `destroy` with a node's sshd down fails in bounded time naming the node; a later one leaves
 *   nothing; so does a destroy with containers stopped or paused by hand, or after an engine restart.
 * Each recovery is timed; the table is printed at the end.
 */
import { execFileSync } from "child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { RAY_CONTAINER, VLLM_CONTAINER, WATCHDOG_CONTAINER } from "../../infra/core/names";
import { SimCluster, SimNode, TINY_MODEL_DIR as MODEL_DIR, complete, onNode, simDeployment, tearDown } from "./simCluster";
/** Within this a simulated cluster must serve again on its own. */
const SELF_HEAL_SECONDS = 120;

interface Row {
    fault: string;
    executor: string;
    byItself?: number;
    viaUp?: number;
    restarted: string;
}
const table: Row[] = [];

/** The endpoint and the API key the stack made. */
interface Api {
    endpoint: string;
    key: string;
}

/** Seconds until a completion names every fabric address again, polling; fails after `limit`. */
async function servingAgain(cluster: SimCluster, api: Api, since: number, limit = SELF_HEAL_SECONDS): Promise<number> {
    for (;;) {
        const elapsed = (Date.now() - since) / 1000;
        try {
            const text = (await complete(api.endpoint, "tiny-moe", api.key)).choices[0].text;
            if (cluster.nodes.every((node) => text.includes(node.fabricIp))) {
                return elapsed;
            }
        } catch {
            // not yet
        }
        if (elapsed > limit) {
            throw new Error(`not serving again ${limit}s after the fault`);
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
    }
}

/**
 * Waits until a fault shows, so that a completion served before it took effect is not taken for a
 * recovery: `changed()` (a serving container restarted or went away) or a completion that fails.
 */
async function faultShows(api: Api, changed: () => boolean, limit = 30): Promise<void> {
    const since = Date.now();
    for (;;) {
        if (changed()) {
            return;
        }
        try {
            await complete(api.endpoint, "tiny-moe", api.key);
        } catch {
            return;
        }
        if ((Date.now() - since) / 1000 > limit) {
            throw new Error(`the fault did not show within ${limit}s: no container restarted and every completion answered`);
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
    }
}

/**
 * Restarts the node's Docker engine as `systemctl restart docker` does (test/sim/node/sim-node-init
 * starts an engine that exits again) and waits until it answers: containers stop with their stop
 * signal and come back by their restart policies, as at boot.
 */
function restartDocker(node: SimNode): void {
    onNode(node, "old=$(pidof dockerd); kill -TERM $old; while kill -0 $old 2>/dev/null; do sleep 0.2; done; for _ in $(seq 1 150); do docker info >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1");
}

/** id, start time and restart count of a container on a node ("" when there is none). */
function containerState(node: SimNode, name: string): string {
    return onNode(node, `docker inspect --format '{{.Id}} {{.State.StartedAt}} {{.RestartCount}}' ${name} 2>/dev/null || true`).trim();
}

describe.each([
    { executor: "ray", name: "e2e-faults-ray" },
    { executor: "mp", name: "e2e-faults-mp" },
])("faults with the $executor executor", ({ executor, name }) => {
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;
    const api: Api = { endpoint: "", key: "" };
    const serving = executor === "ray" ? RAY_CONTAINER : VLLM_CONTAINER;
    const head = () => cluster.nodes[0];
    const worker = () => cluster.nodes[1];
    /** The serving containers' state on every node, to tell what a recovery restarted. */
    const states = () => cluster.nodes.map((node) => containerState(node, serving));
    const restarted = (before: string[]) =>
        cluster.nodes.flatMap((_, index) => (states()[index] !== before[index] ? [`spark${index + 1}:${serving}`] : [])).join(", ") || "nothing";

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, 2, {
            executor,
            // Short probes for the simulated cluster; the default is every 10 s, 3 failures.
            supervision: { probeIntervalSeconds: 3, failuresBeforeRestart: 2, maxRestarts: 10, restartWindowSeconds: 3600 },
        }));
    });

    afterAll(async () => {
        // sshd may have been left down, or its packets dropped, by a failed test.
        for (const node of cluster?.nodes ?? []) {
            onNode(node, "pgrep -x sshd >/dev/null || /usr/sbin/sshd -E /var/log/sshd.log");
            onNode(node, "while iptables -D INPUT -p tcp --dport 22 -j DROP 2>/dev/null; do :; done");
        }
        await tearDown({ stacks: [stack], cluster: name, workDir });
        console.log(`fault table (${executor}): ${JSON.stringify(table.filter((row) => row.executor === executor))}`);
    });

    const imageOf = () => onNode(worker(), `docker image inspect --format '{{.Id}}' ${cluster.workloadImage}`).trim();
    let originalImage = "";
    const refusals: [string, () => void, RegExp, () => void][] = [
        ["its fabric interface is down", () => onNode(worker(), `ip link set ${worker().fabricIface} down`), /node spark2: .*is down/, () => onNode(worker(), `ip link set ${worker().fabricIface} up`)],
        [
            "its image differs",
            () => {
                originalImage = imageOf();
                onNode(worker(), `docker run --name drift --entrypoint sh ${cluster.workloadImage} -c 'echo drift > /drift' && docker commit drift ${cluster.workloadImage} >/dev/null && docker rm drift >/dev/null`);
            },
            /image .* differs across nodes by content .*: .*spark2/,
            () => onNode(worker(), `docker tag ${originalImage} ${cluster.workloadImage}`),
        ],
        ["its model directory is missing", () => onNode(worker(), `mv ${MODEL_DIR} ${MODEL_DIR}.away`), /spark2.*model/i, () => onNode(worker(), `mv ${MODEL_DIR}.away ${MODEL_DIR}`)],
        ["it has no GPU", () => onNode(worker(), "echo 0 > /etc/sim/gpus"), /needs 2 GPUs but the nodes have 1 \(spark1: 1, spark2: 0\)/, () => onNode(worker(), "echo 1 > /etc/sim/gpus")],
        ["its Docker does not answer", () => onNode(worker(), "mv /var/run/docker.sock /var/run/docker.sock.away"), /node spark2: Docker does not answer/, () => onNode(worker(), "mv /var/run/docker.sock.away /var/run/docker.sock")],
    ];

    it.each(refusals)("refuses a node when %s, naming it, and converges after the fix with a plain up", async (_what, breakIt, message, fix) => {
        breakIt();
        try {
            const failure = await stack.up().then(
                () => undefined,
                (error: Error) => error,
            );
            expect(failure?.message).toMatch(message);
            expect(failure?.message).not.toContain("error serializing property");
            // Nothing started on any host.
            for (const node of cluster.nodes) {
                expect(onNode(node, `docker ps -aq --filter label=vllm-fleet.stack=${name} 2>/dev/null || true`).trim()).toBe("");
            }
        } finally {
            fix();
        }
    });

    it("comes up once every host is fixed, with no --replace", async () => {
        const start = Date.now();
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        api.endpoint = up.outputs.endpoint.value;
        api.key = up.outputs.apiKey.value;
        await servingAgain(cluster, api, start, 5);
        expect(onNode(head(), `docker inspect --format '{{.State.Running}} {{.HostConfig.RestartPolicy.Name}}' ${WATCHDOG_CONTAINER}`).trim()).toBe("true unless-stopped");
    });

    // A crash: the container's main process killed from the host, as the OOM killer does. (`docker
    // kill` is a stop by hand, which Docker's restart policy respects; `up` handles that, below.)
    const crash = (node: SimNode, container: string) => onNode(node, `kill -9 "$(docker inspect --format '{{.State.Pid}}' ${container})"`);
    const selfHealing: [string, () => void][] = [
        [executor === "ray" ? "Ray worker crashed" : "headless rank crashed", () => crash(worker(), serving)],
        [executor === "ray" ? "Ray head crashed" : "rank 0 crashed", () => crash(head(), serving)],
        ...(executor === "ray" ? ([["vllm serve killed, Ray alive", () => onNode(head(), `docker exec ${RAY_CONTAINER} pkill -9 -f "vllm serve"`)]] as [string, () => void][]) : []),
        ["first node restarted (its Docker engine and sshd come back)", () => void execFileSync("docker", ["restart", "--time", "5", `${name}-spark0`])],
    ];

    it.each(selfHealing)("serves again by itself after: %s; the next up changes nothing", async (fault, inflict) => {
        const before = states();
        const start = Date.now();
        inflict();
        await faultShows(api, () => states().some((state, index) => state !== before[index]));
        const byItself = await servingAgain(cluster, api, start);
        const again = await stack.up({ expectNoChanges: true });
        expect(again.summary.result).toBe("succeeded");
        table.push({ fault, executor, byItself: Math.round(byItself), restarted: restarted(before) });
    });

    const replacedByUp: [string, () => SimNode, string][] = [
        [executor === "ray" ? "Ray worker stopped by hand (docker kill)" : "headless rank stopped by hand (docker kill)", worker, "kill"],
        [executor === "ray" ? "Ray head container removed (docker rm -f)" : "rank 0 container removed (docker rm -f)", head, "rm -f"],
    ];

    it.each(replacedByUp)("a plain up brings back what supervision leaves alone: %s", async (fault, where, how) => {
        const before = states();
        onNode(where(), `docker ${how} ${serving} >/dev/null`);
        const start = Date.now();
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const viaUp = (Date.now() - start) / 1000;
        await servingAgain(cluster, api, start, viaUp + 5);
        const what = restarted(before);
        if (executor === "ray" && where() === worker()) {
            // A worker alone: the head keeps running.
            expect(states()[0]).toBe(before[0]);
        }
        table.push({ fault, executor, viaUp: Math.round(viaUp), restarted: `${what} (${JSON.stringify(up.summary.resourceChanges)})` });
        await stack.up({ expectNoChanges: true });
    });

    // Compile caches that outlive containers: the vLLM stand-in takes COMPILE_SECONDS to "compile"
    // a rank whose compile cache has no entry (test/sim/workload/vllm/compilation/backends.py; the
    // time from the model directory's .vllm-sim/compile-seconds, which no deployment step reads).
    const COMPILE_SECONDS = 8;
    it.runIf(executor === "mp")(`a replaced serving container starts sooner with a warm compile cache than cold (the stand-in compiles ${COMPILE_SECONDS} s)`, async () => {
        const cacheDir = `/var/cache/vllm-fleet/${name}`;
        for (const node of cluster.nodes) {
            onNode(node, `mkdir -p ${MODEL_DIR}/.vllm-sim && echo ${COMPILE_SECONDS} > ${MODEL_DIR}/.vllm-sim/compile-seconds`);
        }
        /**
         * Seconds of a plain up that replaces every rank until it serves. Every rank is removed first
         * (one left behind would be restarted by Docker and could fill its node's cache meanwhile),
         * and for a cold start its node's cache with it.
         */
        const replaced = async (cache: "cold" | "warm"): Promise<number> => {
            for (const node of cluster.nodes) {
                onNode(node, `docker rm -f ${serving} >/dev/null${cache === "cold" ? ` && rm -rf ${cacheDir}` : ""}`);
            }
            const start = Date.now();
            const up = await stack.up();
            expect(up.summary.result).toBe("succeeded");
            const seconds = (Date.now() - start) / 1000;
            await servingAgain(cluster, api, start, seconds + 5);
            for (const node of cluster.nodes) {
                const mounts = onNode(node, `docker inspect --format '{{range .Mounts}}{{.Source}}:{{.Destination}} {{end}}' ${serving}`);
                expect(mounts).toMatch(new RegExp(`${cacheDir}/image-[0-9a-f]{16}:/vllm-fleet-cache`));
                const log = onNode(node, `docker logs ${serving} 2>&1`);
                expect(log).toContain(cache === "cold" ? "Compiling a graph for compile range (1, 2048) takes" : "Directly load the compiled graph(s) for compile range (1, 2048) from the cache");
            }
            return seconds;
        };
        try {
            const cold = await replaced("cold");
            const warm = await replaced("warm");
            console.log(`a replaced serving container (mp, ${COMPILE_SECONDS} s to compile): cold compile cache ${cold.toFixed(1)} s, warm ${warm.toFixed(1)} s`);
            table.push({ fault: `replaced with a cold compile cache (${COMPILE_SECONDS} s to compile)`, executor, viaUp: Math.round(cold), restarted: "every rank" });
            table.push({ fault: "replaced with a warm compile cache", executor, viaUp: Math.round(warm), restarted: "every rank" });
            // The warm start skips the compile on every node (each compiles when cold, the headless
            // rank's start following rank 0's); half the compile time is left for the jitter of two
            // runs of `up` on a busy machine (without the cache the two are alike).
            expect(cold - warm).toBeGreaterThanOrEqual(COMPILE_SECONDS / 2);
        } finally {
            for (const node of cluster.nodes) {
                onNode(node, `rm -rf ${MODEL_DIR}/.vllm-sim`);
            }
        }
        await stack.up({ expectNoChanges: true });
    });

    // States that supervision leaves as they are (a container stopped or paused by hand) and an
    // engine restart: none may wedge `up` (or, below, `destroy`). Before anything is replaced, the
    // delete of what runs in a container (vllm serve in the Ray head) meets that container stopped.
    const wedges: [string, () => void][] = [
        [executor === "ray" ? "Ray head stopped by hand (docker kill)" : "rank 0 stopped by hand (docker kill)", () => onNode(head(), `docker kill ${serving} >/dev/null`)],
        [executor === "ray" ? "Ray head paused (docker pause)" : "rank 0 paused (docker pause)", () => onNode(head(), `docker pause ${serving} >/dev/null`)],
        ["Docker engine restarted on the first node", () => restartDocker(head())],
    ];

    it.each(wedges)("a plain up serves again after: %s", async (fault, inflict) => {
        const before = states();
        inflict();
        const start = Date.now();
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const viaUp = (Date.now() - start) / 1000;
        await servingAgain(cluster, api, start, viaUp + 5);
        table.push({ fault, executor, viaUp: Math.round(viaUp), restarted: `${restarted(before)} (${JSON.stringify(up.summary.resourceChanges)})` });
        await stack.up({ expectNoChanges: true });
    });

    it.runIf(executor === "ray")("refresh + up serves again after the Ray head was stopped by hand", async () => {
        const before = states();
        onNode(head(), `docker kill ${serving} >/dev/null`);
        const start = Date.now();
        await stack.refresh();
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const viaUp = (Date.now() - start) / 1000;
        await servingAgain(cluster, api, start, viaUp + 5);
        table.push({ fault: "Ray head stopped by hand (docker kill), refresh + up", executor, viaUp: Math.round(viaUp), restarted: restarted(before) });
    });

    it.runIf(executor === "ray")("a plain up starts vllm serve again when it and the watchdog are gone; Ray stays", async () => {
        const before = states();
        onNode(head(), `docker stop ${WATCHDOG_CONTAINER} >/dev/null && docker exec ${RAY_CONTAINER} pkill -9 -f "vllm serve"`);
        const start = Date.now();
        const preview = await stack.preview();
        expect(preview.stdout).toMatch(/vllm serve is not running/);
        const up = await stack.up();
        const viaUp = (Date.now() - start) / 1000;
        expect(states()).toEqual(before);
        await servingAgain(cluster, api, start, viaUp + 5);
        table.push({ fault: "vllm serve killed, watchdog stopped", executor, viaUp: Math.round(viaUp), restarted: `vllm serve, watchdog (${JSON.stringify(up.summary.resourceChanges)})` });
    });

    // The last of the ray block's own cases (the destroy below is both executors'). The preview
    // before the drop leaves node 2's shared SSH connection open: the first run waits for its
    // keepalives to close it, then for a fresh connection; the second finds none open.
    it.runIf(executor === "ray")("a node that stops answering on SSH (its packets dropped, as when unplugged) is named by preview and up within sshConnectSeconds + 15 s", async () => {
        const connectSeconds = JSON.parse((await stack.getConfig("vllm-fleet:timeouts")).value).sshConnectSeconds as number;
        const rule = "INPUT -p tcp --dport 22 -j DROP";
        await stack.preview();
        onNode(worker(), `iptables -I ${rule}`);
        try {
            for (const [what, run] of [
                ["preview", () => stack.preview()],
                ["up", () => stack.up()],
            ] as const) {
                const start = Date.now();
                const failure = await run().then(
                    () => undefined,
                    (error: Error) => error,
                );
                const seconds = (Date.now() - start) / 1000;
                console.log(`${what} with node 2's SSH packets dropped failed after ${seconds.toFixed(1)} s`);
                expect(failure?.message).toMatch(new RegExp(`node spark2 \\(spark@[0-9.]+:22\\) does not answer on SSH \\(no reply within ${connectSeconds} s\\)`));
                expect(seconds).toBeLessThan(connectSeconds + 15);
            }
        } finally {
            onNode(worker(), `iptables -D ${rule}`);
        }
    });

    it("destroy fails in bounded time naming a node whose sshd is down; a later destroy leaves nothing", async () => {
        // The listener and every connection (OpenSSH 10 serves each in an sshd-session process), as
        // when the node's sshd is gone: the connection the program shares with the node goes too.
        onNode(worker(), "pkill -x sshd; pkill -x sshd-session; true");
        const start = Date.now();
        const failure = await stack.destroy().then(
            () => undefined,
            (error: Error) => error,
        );
        expect((Date.now() - start) / 1000).toBeLessThan(90);
        expect(failure?.message).toMatch(/node spark2 \(spark@[0-9.]+:22\)/);
        onNode(worker(), "/usr/sbin/sshd -E /var/log/sshd.log");
        const destroy = await stack.destroy();
        expect(destroy.summary.result).toBe("succeeded");
        expectNothingLeft();
    });

    // A destroy ends clean whatever state the containers are in: each wedge above, one at a time,
    // with the other node's serving container stopped or paused by hand as well.
    const destroyIn: [string, () => void][] = [
        // The other node's first: once the head stops, its serving container may be restarting (mp).
        [`${wedges[0][0]}, the other node's paused`, () => (onNode(worker(), `docker pause ${serving} >/dev/null`), wedges[0][1]())],
        [`${wedges[1][0]}, the other node's stopped by hand`, () => (wedges[1][1](), onNode(worker(), `docker kill ${serving} >/dev/null`))],
        [wedges[2][0], wedges[2][1]],
    ];

    it.each(destroyIn)("destroy leaves nothing on any node after: %s", async (_fault, inflict) => {
        expect((await stack.up()).summary.result).toBe("succeeded");
        inflict();
        const destroy = await stack.destroy();
        expect(destroy.summary.result).toBe("succeeded");
        expectNothingLeft();
    });

    /** Nothing of the stack on any node: no container (in any state) carries its label. */
    function expectNothingLeft(): void {
        for (const node of cluster.nodes) {
            expect(onNode(node, `docker ps -aq --filter label=vllm-fleet.stack=${name}`).trim()).toBe("");
        }
    }
});
