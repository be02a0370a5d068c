/**
 * The node-side scripts that decide when a container counts as started or joined, run by bash
 * against the stand-in `docker` (fakeDocker.ts) holding each container's state and log.
 */
import { spawn, spawnSync } from "child_process";
import * as http from "http";
import { AddressInfo } from "net";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { CONTAINER_RUN } from "../../components/container";
import { bashCommand, readScript, renderAssignments, scriptProgram, ScriptValue, shQuote } from "../../components/shell";
import { splitViews } from "../../components/observer";
import { ARGS_CHECK } from "../../components/serveArgsCheck";
import { NCCL_TRANSPORT, VLLM_LIFECYCLE, VLLM_READY, VLLM_START, VLLM_STOP } from "../../components/vllmService";
import { VLLM_PHASES } from "../../infra/core/vllmPhases";
import { parseObservation } from "../../infra/core/observe";
import { FakeDockerOutcome, runWithFakeDocker, StandInContainer, StandInDocker } from "./fakeDocker";

/** Runs scripts as the runners send them; `calls` keeps the first word of each docker call. */
function runScript(
    names: string | readonly string[],
    vars: Readonly<Record<string, ScriptValue>>,
    docker: StandInDocker,
): Omit<FakeDockerOutcome, "calls"> & { calls: string[] } {
    const outcome = runWithFakeDocker(bashCommand(scriptProgram(names, vars)), docker);
    return { ...outcome, calls: outcome.calls.map((args) => args[0]) };
}

/** The Ray head, as the stand-in plays it. */
const rayHead = (container: StandInContainer): StandInDocker => ({ containers: { "vllm-fleet-ray": container } });

/** The lines `ray start --address ... --block` prints on a node (Ray 2.53, as seen on a simulated Spark). */
function rayStartLog(ip: string, started: boolean): string {
    const lines = [
        `2026-12-02 13:29:11,246\tINFO scripts.py:1101 -- Local node IP: ${ip}`,
        "2026-12-02 13:29:15,651\tWARNING services.py:2137 -- WARNING: The object store is using /tmp instead of /dev/shm",
    ];
    if (started) {
        lines.push(
            "2026-12-02 13:29:16,935\tSUCC scripts.py:1117 -- --------------------",
            "2026-12-02 13:29:16,936\tSUCC scripts.py:1118 -- Ray runtime started.",
            "2026-12-02 13:29:16,936\tSUCC scripts.py:1119 -- --------------------",
        );
    }
    return lines.join("\n") + "\n";
}

describe("ray-wait-node.sh: a node has joined when its own `ray start` says so", () => {
    const vars = { CONTAINER: "vllm-fleet-ray", NODE_IP: "192.168.200.13", ADDRESS: "192.168.200.12:6379", TIMEOUT: 5 };

    it("succeeds once Ray reports the runtime started under the fabric address", () => {
        const outcome = runScript("ray-wait-node", vars, rayHead({ state: ["running"], log: rayStartLog("192.168.200.13", true) }));
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toContain("ray node 192.168.200.13 registered with 192.168.200.12:6379");
        // Nothing runs inside the container to find out.
        expect(outcome.calls).not.toContain("exec");
    });

    it("refuses a node that registered under another address, naming it", () => {
        const outcome = runScript("ray-wait-node", vars, rayHead({ state: ["running"], log: rayStartLog("10.1.230.181", true) }));
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("registered as 10.1.230.181, not its fabric address 192.168.200.13");
    });

    it("fails with the log tail when the container stops before joining", () => {
        const log = rayStartLog("192.168.200.13", false) + "ConnectionError: Failed to connect to GCS at 192.168.200.12:6379\n";
        const outcome = runScript("ray-wait-node", vars, rayHead({ state: ["running", "exited"], log }));
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("stopped before it joined 192.168.200.12:6379");
        expect(outcome.stderr).toContain("Failed to connect to GCS");
    });

    it("gives up after its timeout, saying what it waited for", () => {
        const outcome = runScript("ray-wait-node", { ...vars, TIMEOUT: 1 }, rayHead({ state: ["running"], log: rayStartLog("192.168.200.13", false) }));
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("did not register as 192.168.200.13 with 192.168.200.12:6379 within 1s");
    }, 20_000);
});

describe("container-run.sh: started means up, for as long as asked", () => {
    const vars = (watch: number) => ({
        NAME: "vllm-fleet-vllm",
        RUN_ARGS: ["run", "--detach", "--name", "vllm-fleet-vllm", "image"],
        FILE_PATHS: [],
        FILE_CONTENTS: [],
        WATCH_SECONDS: watch,
    });

    it("with no watch, looks once right after the start and prints the id", () => {
        const outcome = runScript(CONTAINER_RUN, vars(0), { containers: { "vllm-fleet-vllm": { state: "gone", afterRun: ["running"], log: "" } } });
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toContain("container-id 0123456789ab");
        expect(outcome.calls.filter((call) => call === "inspect")).toHaveLength(2); // the stale-name check, then one look
    });

    it("with files, creates the container, copies them in, then starts it and watches it", () => {
        const content = "import os\n# a module's text, with 'quotes' and $dollars\n";
        const outcome = runScript(
            CONTAINER_RUN,
            { ...vars(1), FILE_PATHS: ["/opt/vllm-fleet/python/vllm_fleet_key.py"], FILE_CONTENTS: [content] },
            { containers: { "vllm-fleet-vllm": { state: "gone", afterRun: ["running"], log: "" } } },
        );
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toContain("container-id 0123456789ab");
        expect(outcome.calls.filter((verb) => ["run", "create", "cp", "start"].includes(verb))).toEqual(["create", "cp", "start"]);
        expect(outcome.containers["vllm-fleet-vllm"]).toMatchObject({ state: "running", files: { "/opt/vllm-fleet/python/vllm_fleet_key.py": { content, mode: 0o644 } } });
    });

    it("fails with the log tail when the container exits within its watch", () => {
        const outcome = runScript(CONTAINER_RUN, vars(2), {
            containers: { "vllm-fleet-vllm": { state: "gone", afterRun: ["running", "running", "exited"], log: "vllm: error: unrecognized arguments: --bogus\n" } },
        });
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("container vllm-fleet-vllm exited right after start");
        expect(outcome.stderr).toContain("unrecognized arguments: --bogus");
    });
});

describe("ray-ready.sh: the cluster is ready when Ray itself counts every node and GPU", () => {
    const vars = {
        CONTAINER: "vllm-fleet-ray",
        ADDRESS: "192.168.200.12:6379",
        EXPECTED_IPS: ["192.168.200.12", "192.168.200.13"],
        EXPECTED_GPUS: 2,
        TIMEOUT: 1,
    };
    const resources = "ray-resources CPU=40.0 GPU=2.0 memory=1.0 object_store_memory=1.0\n";

    it("passes with every fabric address and GPU, printing what Ray answered", () => {
        const exec = "ray-node 192.168.200.12 1\nray-node 192.168.200.13 1\n" + resources;
        const outcome = runScript("ray-ready", vars, rayHead({ log: "", exec }));
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toBe(exec);
        // One Ray driver answers everything: no `ray status` run besides it.
        expect(outcome.calls.filter((call) => call === "exec")).toHaveLength(1);
    });

    it("names a node registered under a management address and the fabric address missing", () => {
        const exec = "ray-node 192.168.200.12 1\nray-node 10.1.230.181 1\n" + resources;
        const outcome = runScript("ray-ready", vars, rayHead({ log: "head log line", exec }));
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("missing nodes (fabric addresses): 192.168.200.13");
        expect(outcome.stderr).toContain("unexpected nodes (not a fabric address of the stack): 10.1.230.181");
        expect(outcome.stderr).toContain("head log line");
    }, 20_000);

    it("waits for every GPU, not only every node", () => {
        const exec = "ray-node 192.168.200.12 1\nray-node 192.168.200.13 0\n" + resources;
        const outcome = runScript("ray-ready", vars, rayHead({ log: "", exec }));
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("GPUs: 1 of 2");
    }, 20_000);
});

describe("nccl-transport.sh: the transport each rank's NCCL chose, from NCCL's own start-up lines", () => {
    const vars = (executor: string, policy: string) => ({ NODE: "spark2", CONTAINER: "vllm-fleet-vllm", EXECUTOR: executor, POLICY: policy, HINT: "no RDMA device nodes" });
    const ib = [
        "spark2:4117:4117 [1] NCCL INFO Bootstrap : Using enp1s0f1np1:192.168.200.13<0>",
        "spark2:4117:4117 [1] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.200.13<0>",
        "spark2:4117:4117 [1] NCCL INFO Using network IB",
    ].join("\n");
    const rank = (container: StandInContainer): StandInDocker => ({ containers: { "vllm-fleet-vllm": container } });
    const socket = [
        "spark2:5120:5120 [1] NCCL INFO NET/IB : No device found.",
        "spark2:5120:5120 [1] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:192.168.200.13<0>",
        "spark2:5120:5120 [1] NCCL INFO Using network Socket",
    ].join("\n");

    it("reads IB from an mp rank's container log, with NCCL's NET line", () => {
        const outcome = runScript(NCCL_TRANSPORT, vars("mp", "refuse"), rank({ log: `INFO started\n${ib}\nINFO serving\n` }));
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^transport IB$/m);
        expect(outcome.stdout).toContain("nccl NET/IB : Using [0]rocep1s0f1:1/RoCE");
    });

    it("takes the newest start: a rank restarted after a fix reads IB, one that fell back reads Socket", () => {
        expect(runScript(NCCL_TRANSPORT, vars("mp", "refuse"), rank({ log: `${socket}\n${ib}\n` })).stdout).toMatch(/^transport IB$/m);
        expect(runScript(NCCL_TRANSPORT, vars("mp", "warn"), rank({ log: `${ib}\n${socket}\n` })).stdout).toMatch(/^transport Socket$/m);
    });

    it("refuses TCP sockets when the policy says so, naming the node, the hint and the way out", () => {
        const outcome = runScript(NCCL_TRANSPORT, vars("mp", "refuse"), rank({ log: socket }));
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("node spark2: NCCL uses TCP sockets (NET/Socket), not RoCE (NET/IB): no RDMA device nodes");
        expect(outcome.stderr).toContain("vllm-fleet:fabric.socketTransport to warn");
    });

    it("only reports TCP sockets when the policy is warn", () => {
        const outcome = runScript(NCCL_TRANSPORT, vars("mp", "warn"), rank({ log: socket }));
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^transport Socket$/m);
        expect(outcome.stdout).toContain("nccl NET/Socket : Using [0]enp1s0f1np1");
    });

    it("reads the Ray workers' logs in the Ray container (ray executor), not the container's own log", () => {
        const outcome = runScript(NCCL_TRANSPORT, { ...vars("ray", "refuse"), CONTAINER: "vllm-fleet-ray" }, rayHead({ exec: ib, log: socket }));
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^transport IB$/m);
        expect(outcome.calls).toContain("exec");
        expect(outcome.calls).not.toContain("logs");
    });

    it("says unknown, and refuses nothing, when no NCCL line is there", () => {
        const outcome = runScript(NCCL_TRANSPORT, vars("mp", "refuse"), rank({ log: "INFO no nccl debug here\n" }));
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^transport unknown$/m);
    });
});

/**
 * Runs live.sh with a stand-in `docker` (`docker`: the lines of its bash script; a file `listing`
 * beside it is `extra.listing`) first on the PATH, with `vars` over the defaults (this stack's Ray
 * head serves, nothing listens, no watchdog). Returns what it printed; it must exit 0.
 */
function runLive(docker: readonly string[], vars: Readonly<Record<string, ScriptValue>> = {}, extra: { listing?: string } = {}): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "live-"));
    try {
        if (extra.listing !== undefined) {
            fs.writeFileSync(path.join(dir, "listing"), extra.listing);
        }
        fs.writeFileSync(path.join(dir, "docker"), ["#!/bin/bash", ...docker].join("\n") + "\n", { mode: 0o755 });
        const program = scriptProgram("live", {
            STACK: "unit",
            OWN_NAMES: ["vllm-fleet-ray", "vllm-fleet-vllm", "vllm-fleet-watchdog"],
            SERVING_CONTAINER: "vllm-fleet-ray",
            SERVE_IN_CONTAINER: "yes",
            ENDPOINT: "yes",
            PORT: 9, // nothing listens
            SERVED_NAME: "m",
            WATCHDOG_CONTAINER: "",
            RAY_NODES: "no",
            FIREWALL_MARKER: "",
            DELIVERY_MARKS: "",
            ...vars,
        });
        const result = spawnSync("bash", ["-c", program], { env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, encoding: "utf8", timeout: 30_000 });
        expect(result.status).toBe(0);
        return result.stdout;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/** `docker inspect`'s line for a running container of this stack, as live.sh asks for it. */
const runningContainer = (name: string) =>
    `{"name":"/${name}","id":"c0ffee","status":"running","running":true,"restarting":false,"exitCode":0,"restartCount":0,"startedAt":"","labels":{}}`;

describe("live.sh: vllm serve and the endpoint as the serving container sees them", () => {
    /**
     * live.sh for the Ray head with a `docker` whose `exec` runs the command here, in a PID
     * namespace of its own (what a container's processes are), with a process named `vllm serve`
     * in it when `server` is true.
     */
    function live(server: boolean): string {
        const start = server ? `(exec -a "vllm serve" sleep 30) & sleep 0.2; ` : "";
        return runLive([
            'case "$1" in',
            "  ps) printf 'c0ffee\\tvllm-fleet-ray\\tunit\\tUp 1 minute\\n' ;;",
            `  inspect) echo '${runningContainer("vllm-fleet-ray")}' ;;`,
            '  exec) shift; while [ "${1#-}" != "$1" ]; do [ "$1" = --env ] && shift; shift; done; shift',
            `    exec unshare --pid --fork --mount-proc bash -c '${start}"$@"; status=$?; kill %1 2>/dev/null; exit $status' _ "$@" ;;`,
            "esac",
        ]);
    }

    it("finds no server when none runs: the reading process's own command line does not count", () => {
        const out = live(false);
        expect(out).toMatch(/^### serve\nprocess no\n/m);
        expect(out).toMatch(/^### endpoint\nhealth none .*\ncompletion fail /m);
    });

    it("finds the server that runs, and says the endpoint does not answer when it does not", () => {
        const out = live(true);
        expect(out).toMatch(/^### serve\nprocess yes\n/m);
        expect(out).toMatch(/^completion fail /m);
    });
});

describe("live.sh: the containers of others that the stack would touch", () => {
    it("lists another stack's containers and unlabelled ones by the stack's names, not its own nor unrelated ones", () => {
        const listing = [
            ["a1", "vllm-fleet-ray", "unit", "Up 2 hours"],
            ["b2", "vllm-fleet-vllm", "prod", "Exited (137) 5 minutes ago"],
            ["c3", "vllm-fleet-watchdog", "", "Up 3 days"],
            ["d4", "grafana", "", "Up 3 days"],
            ["e5", "vllm-fleet-ray-old", "", "Created"],
        ]
            .map((fields) => fields.join("\t"))
            .join("\n");
        const out = runLive(['case "$1" in', '  ps) cat "$(dirname "$0")/listing" ;;', "  inspect) echo '{}' ;;", "esac"], { SERVE_IN_CONTAINER: "no", ENDPOINT: "no" }, { listing: `${listing}\n` });
        const foreign = /^### foreign\n([\s\S]*?)(?=^###|$(?![\s\S]))/m.exec(out)?.[1] ?? "";
        expect(foreign.trim().split("\n")).toEqual(["vllm-fleet-vllm\tprod\tExited (137) 5 minutes ago", "vllm-fleet-watchdog\t\tUp 3 days"]);
    });
});

describe("live.sh: what the stack's other Ray heads serve (a service that left the config)", () => {
    it("reads the serve arguments of each other running Ray head, not of a stopped one nor of a rank", () => {
        const line = (name: string, status: string, role: string) =>
            `{"name":"/${name}","id":"${name}-id","status":"${status}","running":${status === "running"},"restarting":false,"exitCode":0,"restartCount":0,"startedAt":"","labels":{"vllm-fleet.role":"${role}","vllm-fleet.stack":"unit"},"image":"img","args":["start"]}`;
        const listing = ["old-ray", "gone-ray", "new-vllm"].map((name) => `${name}-id\tvllm-fleet-${name}\tunit\tUp`).join("\n");
        const inspect = [line("vllm-fleet-old-ray", "running", "ray-head"), line("vllm-fleet-gone-ray", "exited", "ray-head"), line("vllm-fleet-new-vllm", "running", "vllm-rank0")].join("\n");
        const out = runLive(
            [
                'case "$1" in',
                '  ps) cat "$(dirname "$0")/listing" ;;',
                `  inspect) echo '${inspect}' ;;`,
                // Only `docker exec <head> cat <args file>` is expected: it names the container it was asked.
                '  exec) [ "$3" = cat ] && [ "$4" = /tmp/vllm-fleet-serve.args ] && printf \'["serve","/models/%s","--served-model-name","%s"]\\n\' "$2" "$2" ;;',
                "esac",
            ],
            { OWN_NAMES: ["vllm-fleet-new-vllm"], SERVING_CONTAINER: "vllm-fleet-new-vllm", SERVE_IN_CONTAINER: "no", ENDPOINT: "no" },
            { listing: `${listing}\n` },
        );
        const observation = parseObservation("spark1", out);
        expect(observation.serveArgs).toEqual({ "vllm-fleet-old-ray": ["serve", "/models/vllm-fleet-old-ray", "--served-model-name", "vllm-fleet-old-ray"] });
        expect(observation.containers.map((container) => [container.name, container.image, container.args])).toEqual([
            ["vllm-fleet-old-ray", "img", ["start"]],
            ["vllm-fleet-gone-ray", "img", ["start"]],
            ["vllm-fleet-new-vllm", "img", ["start"]],
        ]);
    });
});

describe("live.sh: a serving container that takes no exec", () => {
    it.each(["yes", "no"] as const)("says the endpoint does not answer, with Docker's reason, and names no container of another (serve in container: %s)", (serveInContainer) => {
        const name = serveInContainer === "yes" ? "vllm-fleet-ray" : "vllm-fleet-vllm";
        // runc's failure to enter a container, which `docker exec` prints on stdout.
        const out = runLive(
            [
                'case "$1" in',
                `  ps) printf 'c0ffee\\t${name}\\tunit\\tUp 1 minute\\n' ;;`,
                `  inspect) echo '${runningContainer(name)}' ;;`,
                "  exec) echo 'OCI runtime exec failed: exec failed: unable to start container process: read init-p: connection reset by peer: unknown'; exit 126 ;;",
                "esac",
            ],
            { OWN_NAMES: [name], SERVING_CONTAINER: name, SERVE_IN_CONTAINER: serveInContainer },
        );
        expect(out).toMatch(/^### foreign\n###/m);
        expect(out).toMatch(/^### endpoint\ncompletion fail no answer \(docker exec: OCI runtime exec failed: .*\)$/m);
        const observation = parseObservation("spark1", out);
        expect(observation.foreign).toEqual([]);
        expect(observation.endpoint?.completionOk).toBe(false);
        expect(observation.endpoint?.detail).toContain("OCI runtime exec failed");
        if (serveInContainer === "yes") {
            expect(observation.serve?.running).toBe(false);
        }
    });
});

describe("vllm-start.sh, vllm-stop.sh and the watchdog's restart: vllm serve stopped and started inside the Ray head by vllm-lifecycle.sh", () => {
    const LIFECYCLE = readScript(VLLM_LIFECYCLE);

    /**
     * Runs `program` with a `docker` whose `exec` runs its command here, in a PID and mount namespace
     * of its own with a /tmp of its own (what a container has), with an old `vllm serve` in it when
     * `oldServer` (one that ignores SIGTERM when "hung") and what `setup` puts there, and a stand-in
     * `vllm` on the PATH that prints its arguments and stays. After the command it shows what runs
     * and what was left in /tmp. The watchdog is absent.
     */
    function inHead(program: string, oldServer: boolean | "hung", setup = ""): { status: number | null; stdout: string; stderr: string; execs: number } {
        // Not under /tmp, which the namespace covers with a tmpfs of its own.
        const dir = fs.mkdtempSync(path.join(fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(), "vllm-start-"));
        try {
            const old = oldServer ? `(${oldServer === "hung" ? "trap '' TERM; " : ""}exec -a "vllm serve /models/old" sleep 30) & sleep 0.2; ` : "";
            const after = [
                "status=$?",
                "sleep 0.2",
                'echo "### ps"; ps -eo args | grep "vllm" | grep -v grep',
                'echo "### tmp"; for f in $(find /tmp -type f | sort); do echo "$f: $(cat "$f")"; done',
                "exit $status",
            ].join("; ");
            // In a file, not on a command line: the old server's name there would match the stop's
            // pattern. From /, as in a container: the tmpfs may cover the directory the test ran in.
            fs.writeFileSync(path.join(dir, "container"), `mount -t tmpfs tmpfs /tmp; cd /; ${setup}${old}"$@"; ${after}\n`);
            fs.writeFileSync(
                path.join(dir, "docker"),
                [
                    "#!/bin/bash",
                    `echo "$1" >> ${dir}/calls`,
                    'case "$1" in',
                    // The head runs; the watchdog is absent (Docker's words: docker-stand-in.sh).
                    '  inspect) case "$*" in *vllm-fleet-ray*) echo running ;; *) echo "Error response from daemon: No such container: ${*: -1}" >&2; exit 1 ;; esac ;;',
                    '  exec) shift; while [ "${1#-}" != "$1" ]; do [ "$1" = --env ] && shift; shift; done; shift',
                    `    exec unshare --pid --fork --mount-proc bash ${dir}/container "$@" ;;`,
                    "esac",
                ].join("\n") + "\n",
                { mode: 0o755 },
            );
            fs.writeFileSync(path.join(dir, "vllm"), '#!/bin/bash\necho "stand-in vllm $* key=${VLLM_API_KEY:-none}"\nexec -a "vllm $*" sleep 30\n', { mode: 0o755 });
            const result = spawnSync("bash", ["-c", program], { env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, encoding: "utf8", timeout: 60_000 });
            const execs = fs.readFileSync(path.join(dir, "calls"), "utf8").split("\n").filter((call) => call === "exec").length;
            return { status: result.status, stdout: result.stdout, stderr: result.stderr, execs };
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }

    const serveArgs = ["serve", "/models/m", "--served-model-name", "m it's", "--max-model-len", "4096"];
    const start = () =>
        scriptProgram(VLLM_START, {
            CONTAINER: "vllm-fleet-ray",
            SERVE_ARGS: serveArgs,
            SERVE_ARGS_JSON: JSON.stringify(serveArgs),
            ARGS_FILE: "/tmp/serve.args",
            API_KEY: "sk-1",
            LOG_FILE: "/tmp/serve.log",
            TOKEN: "t1",
            CONFIG_ROOT: "/tmp/config",
            NON_CARRY_OVER: '["NCCL_SOCKET_IFNAME"]',
            LIFECYCLE,
        });

    it("a restart stops the old server and starts the new one, with its arguments, token and files, in one exec", () => {
        const outcome = inHead(start(), true);
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        expect(outcome.execs).toBe(1);
        const ps = outcome.stdout.split("### ps\n")[1].split("### tmp")[0];
        expect(ps).not.toContain("/models/old");
        expect(ps).toMatch(/vllm serve \/models\/m --served-model-name m it's --max-model-len 4096/);
        const tmp = outcome.stdout.split("### tmp\n")[1];
        expect(tmp).toContain(`/tmp/serve.args: ${JSON.stringify(serveArgs)}\n`);
        expect(tmp).toContain("/tmp/vllm-fleet-serve.token: t1\n");
        expect(tmp).toContain('/tmp/config/ray_non_carry_over_env_vars.json: ["NCCL_SOCKET_IFNAME"]\n');
        // The arguments arrive as a list, the key through the environment.
        expect(tmp).toContain("/tmp/serve.log: stand-in vllm serve /models/m --served-model-name m it's --max-model-len 4096 key=sk-1\n");
    });

    it("a first start finds nothing to stop", () => {
        const outcome = inHead(start(), false);
        expect(outcome.status).toBe(0);
        expect(outcome.stdout.split("### ps\n")[1]).toMatch(/vllm serve \/models\/m/);
    });

    it("a start whose server cannot run fails with the server's log", () => {
        const program = start().replace(/^SERVE_ARGS_JSON=.*$/m, "SERVE_ARGS_JSON='not a list'");
        const outcome = inHead(program, false);
        expect(outcome.status).not.toBe(0);
        expect(outcome.stderr).toMatch(/the server did not start; its log ends with:\n\/tmp\/serve\.args is not a JSON list of strings\n/);
    });

    it("stop_vllm_serve stops the server and says so; with none running it says that", () => {
        const stop = `${scriptProgram(VLLM_STOP, { LIFECYCLE })}\nstop_vllm_serve vllm-fleet-ray`;
        const withServer = inHead(stop, true);
        expect(withServer.status).toBe(0);
        expect(withServer.execs).toBe(1);
        expect(withServer.stdout).toMatch(/^the server stopped$/m);
        expect(withServer.stdout.split("### ps\n")[1]).not.toContain("/models/old");
        const without = inHead(stop, false);
        expect(without.stdout).toMatch(/^the server was not running$/m);
    });

    /** The watchdog's exec of the lifecycle, made by `docker exec` here: `sh -c "$LIFECYCLE" vllm-lifecycle ARGS...`. */
    const lifecycle = (...args: string[]) =>
        `${renderAssignments({ LIFECYCLE, ARGS: args })}\nexport VLLM_API_KEY=sk-2\ndocker exec --env VLLM_API_KEY vllm-fleet-ray sh -c "$LIFECYCLE" vllm-lifecycle "\${ARGS[@]}"`;
    const argsFile = `printf '%s\\n' ${shQuote(JSON.stringify(serveArgs))} >/tmp/serve.args; echo t0 >/tmp/vllm-fleet-serve.token; `;

    it("the watchdog's restart stops the server and starts it again from the arguments file, keeping the token", () => {
        const outcome = inHead(lifecycle("restart", "/tmp/serve.log", "/tmp/serve.args", "0.5"), true, argsFile);
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^the server stopped\n### ps/);
        const ps = outcome.stdout.split("### ps\n")[1].split("### tmp")[0];
        expect(ps).not.toContain("/models/old");
        expect(ps).toMatch(/vllm serve \/models\/m --served-model-name m it's --max-model-len 4096/);
        const tmp = outcome.stdout.split("### tmp\n")[1];
        expect(tmp).toContain("/tmp/vllm-fleet-serve.token: t0\n");
        expect(tmp).toContain("/tmp/serve.log: stand-in vllm serve /models/m --served-model-name m it's --max-model-len 4096 key=sk-2\n");
    });

    it.each([
        ["missing", ""],
        ["not a JSON list of strings", "printf 'serve /models/m\\n' >/tmp/serve.args; "],
    ])("the watchdog's restart with an arguments file %s leaves the server running, saying why", (what, setup) => {
        const outcome = inHead(lifecycle("restart", "/tmp/serve.log", "/tmp/serve.args"), true, setup);
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toBe(`/tmp/serve.args (the serve arguments vllm-start.sh writes) is ${what}\n`);
        expect(outcome.stdout.split("### ps\n")[1]).toContain("vllm serve /models/old");
    });

    it("the stop SIGKILLs a server that outlives its stop timeout, and says after how long", () => {
        const outcome = inHead(lifecycle("stop", "0.3"), "hung");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^the server was killed \(0\.3 s after SIGTERM\)\n### ps\n/);
        expect(outcome.stdout.split("### ps\n")[1]).not.toContain("/models/old");
    });

    it("refuses an unknown operation or a stop timeout that is no number, before touching anything", () => {
        for (const args of [["reload"], ["stop", "30s"], ["restart", "/tmp/serve.log"]]) {
            const outcome = inHead(lifecycle(...args), true);
            expect(outcome.status).toBe(2);
            expect(outcome.stderr).toMatch(/^vllm-lifecycle: .* \(operations: stop /);
            expect(outcome.stdout.split("### ps\n")[1]).toContain("vllm serve /models/old");
        }
    });

    it("has no word the stop's pattern finds: its text is the command line of the shell that runs it", () => {
        // The server is found with `pgrep -f "vllm [s]erve"` (the watchdog: pgrep -f "vllm serve").
        expect(LIFECYCLE).not.toMatch(/vllm serve/);
        for (const name of ["vllm-start", "vllm-stop"]) {
            // Their docker exec lines carry the lifecycle, never a line of their own that names the server.
            expect(readScript(name)).not.toMatch(/docker exec[^\n]*vllm serve/);
        }
    });
});

/** A start's log as vLLM writes it (infra/core/vllmPhases.ts names each line's source), short. */
const SLOW_START = [
    "(EngineCore_DP0 pid=300) INFO 10-06 11:58:20 [gpu_model_runner.py:2602] Starting to load model /models/m...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]",
    "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.00s/it]",
    "(EngineCore_DP0 pid=300) INFO 10-06 11:58:23 [gpu_model_runner.py:2653] Model loading took 1.2000 GiB and 2.500000 seconds",
    "(EngineCore_DP0 pid=300) INFO 10-06 11:58:24 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/ab/rank_0_0/backbone for vLLM's torch.compile",
    "(EngineCore_DP0 pid=300) INFO 10-06 11:58:25 [kv_cache_utils.py:1087] GPU KV cache size: 10,000 tokens",
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 11/11 [00:01<00:00,  9.00it/s]",
    "(APIServer pid=212) INFO 10-06 11:58:27 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
    "(APIServer pid=212) INFO:     Application startup complete.",
];

describe("vllm-ready.sh: served means listed on /v1/models and one completion answered", () => {
    type Api = { listedAfterMs: number; completion: "ok" | "500" };

    /**
     * Runs vllm-ready.sh with a `docker` whose `exec` runs the command here (the Python wait among
     * them), a `pgrep` that finds `vllm serve` while `serving` is true, and `api` on 127.0.0.1.
     */
    async function waitReady(
        api: Api | undefined,
        serving: boolean,
        timeout = 5,
        log: (elapsedMs: number) => string = () => "INFO last line of the server log\n",
    ): Promise<{ status: number | null; stdout: string; stderr: string; execs: number; listings: number; progressAt: number[] }> {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-ready-"));
        let writer: NodeJS.Timeout | undefined;
        let listings = 0;
        const started = Date.now();
        // Counted from the gate's first question, not from here: a busy machine may start it late.
        let firstListing: number | undefined;
        const server = http.createServer((req, res) => {
            if (req.url === "/v1/models") {
                listings += 1;
                firstListing ??= Date.now();
                const listed = api && Date.now() - firstListing >= api.listedAfterMs;
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end(JSON.stringify({ data: listed ? [{ id: "m" }] : [] }));
            } else if (api?.completion === "ok") {
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end(JSON.stringify({ choices: [{ text: " hello" }] }));
            } else {
                res.writeHead(500);
                res.end();
            }
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        try {
            // The server log as the start writes it: rewritten every 0.1 s from `log`.
            const logFile = path.join(dir, "serve.log");
            fs.writeFileSync(logFile, log(0));
            writer = setInterval(() => fs.writeFileSync(logFile, log(Date.now() - started)), 100);
            fs.writeFileSync(
                path.join(dir, "docker"),
                [
                    "#!/bin/bash",
                    `echo "$*" >> ${JSON.stringify(path.join(dir, "calls"))}`,
                    '[ "$1" = exec ] || exit 1',
                    "shift",
                    'while [ "${1#-}" != "$1" ]; do [ "$1" = --env ] && shift; shift; done',
                    'shift # the container',
                    'exec "$@"',
                ].join("\n") + "\n",
                { mode: 0o755 },
            );
            fs.writeFileSync(path.join(dir, "pgrep"), `#!/bin/sh\nexit ${serving ? 0 : 1}\n`, { mode: 0o755 });
            const program = scriptProgram(VLLM_READY, {
                CONTAINER: "vllm-fleet-ray",
                HOST: "127.0.0.1",
                PORT: (server.address() as AddressInfo).port,
                SERVED_NAME: "m",
                TIMEOUT: timeout,
                API_KEY: "",
                LOG_FILE: logFile,
                PROGRESS_SECONDS: 0.2,
                STILL_SECONDS: 1,
                PHASE_PATTERNS: VLLM_PHASES.map((phase) => phase.pattern),
                PHASE_TEXTS: VLLM_PHASES.map((phase) => phase.text),
            });
            const child = spawn("bash", ["-c", program], { env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
            let stdout = "";
            let stderr = "";
            const progressAt: number[] = [];
            child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
            child.stderr.on("data", (chunk: Buffer) => {
                stderr += chunk.toString();
                progressAt.push(...(chunk.toString().match(/^progress: /gm) ?? []).map(() => Date.now() - started));
            });
            const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
            const calls = fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n");
            // The wait is one exec of Python; the reads of the log are the others.
            const waits = calls.filter((call) => call.startsWith("exec ") && call.includes(" python3 -"));
            const reads = calls.filter((call) => call.startsWith("exec ") && call.includes(" tail -n "));
            expect(waits.length + reads.length).toBe(calls.length);
            return { status, stdout, stderr, execs: waits.length, listings, progressAt };
        } finally {
            clearInterval(writer);
            server.close();
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }

    it("waits inside one exec, asking /v1/models until the model is listed, then prints the completion", async () => {
        const outcome = await waitReady({ listedAfterMs: 700, completion: "ok" }, true);
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toBe('completion {"choices": [{"text": " hello"}]}\n');
        expect(outcome.execs).toBe(1);
        expect(outcome.listings).toBeGreaterThan(1);
    });

    it("fails with the server log when vllm serve is gone before the model is listed", async () => {
        const outcome = await waitReady(undefined, false);
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain(
            "vllm serve exited before it served m (the start reached: no phase of vLLM's start in its log); the server log ends with:\nINFO last line of the server log",
        );
    });

    it("fails after its timeout, saying what it waited for and where the start got to", async () => {
        const outcome = await waitReady({ listedAfterMs: 60_000, completion: "ok" }, true, 1, () => SLOW_START.slice(0, 3).join("\n") + "\n");
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("vllm serve did not list m on /v1/models within 1s (the start reached: loading weights: shard 1/2); the server log ends with:");
    });

    it("says each new phase of the start while it waits, in the order of the start", async () => {
        // The log grows a line every 0.5 s; the model is listed once the API server is up.
        const outcome = await waitReady({ listedAfterMs: 3500, completion: "ok" }, true, 10, (ms) => SLOW_START.slice(0, Math.min(SLOW_START.length, 1 + Math.floor(ms / 500))).join("\n") + "\n");
        expect(outcome.status).toBe(0);
        const progress = outcome.stderr.split("\n").filter((line) => line.startsWith("progress: "));
        const phases = progress.filter((line) => !line.startsWith("progress: still "));
        // In the order of the start, each once (the gate looks every 0.2 s, so it may skip one).
        expect(phases[0]).toMatch(/^progress: (loading the model \/models\/m|loading weights: shard [012]\/2)$/);
        expect(new Set(phases).size).toBe(phases.length);
        const order = ["loading the model", "loading weights: shard 0/2", "loading weights: shard 1/2", "loading weights: shard 2/2", "model loaded", "compiling (torch.compile)", "KV cache allocated", "capturing CUDA graphs", "starting the API server", "API server up"];
        const ranks = phases.map((line) => order.findIndex((start) => line.startsWith(`progress: ${start}`)));
        expect(ranks.every((rank) => rank >= 0)).toBe(true);
        expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
        expect(phases.length).toBeGreaterThanOrEqual(4);
        // Said while waiting, not at the end: the first long before the model was listed.
        expect(outcome.progressAt[0]).toBeLessThan(2500);
        expect(outcome.stdout).toMatch(/^completion /);
        expect(outcome.execs).toBe(1);
    });

    it("says `still` the phase it stays in, with the seconds in it", async () => {
        const outcome = await waitReady({ listedAfterMs: 2800, completion: "ok" }, true, 10, () => SLOW_START.slice(0, 6).join("\n") + "\n");
        expect(outcome.status).toBe(0);
        const progress = outcome.stderr.split("\n").filter((line) => line.startsWith("progress: "));
        expect(progress[0]).toBe("progress: compiling (torch.compile)");
        expect(progress.slice(1).length).toBeGreaterThanOrEqual(1);
        for (const line of progress.slice(1)) {
            expect(line).toMatch(/^progress: still compiling \(torch\.compile\) \([0-9]+s\)$/);
        }
    });

    it("fails when the model is listed but a completion fails, quoting the error", async () => {
        const outcome = await waitReady({ listedAfterMs: 0, completion: "500" }, true);
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toMatch(/vllm serve lists m but a completion failed: HTTPError: HTTP Error 500/);
    });
});

describe("secrets stay off the node's command lines", () => {
    it("vllm-start.sh and vllm-ready.sh name the API key to docker exec, which takes its value from their environment", () => {
        for (const name of ["vllm-start", "vllm-ready"]) {
            const vars = {
                CONTAINER: "vllm-fleet-ray",
                SERVE_ARGS: ["serve", "/models/m"],
                SERVE_ARGS_JSON: '["serve", "/models/m"]',
                ARGS_FILE: "/tmp/vllm-fleet-serve.args",
                API_KEY: "sk-very-secret",
                LOG_FILE: "/tmp/serve.log",
                TOKEN: "t1",
                CONFIG_ROOT: "/etc/vllm-fleet/vllm",
                NON_CARRY_OVER: "[]",
                LIFECYCLE: readScript(VLLM_LIFECYCLE),
                HOST: "127.0.0.1",
                PORT: 8000,
                SERVED_NAME: "m",
                TIMEOUT: 1,
            };
            const outcome = runWithFakeDocker(bashCommand(scriptProgram(name === "vllm-start" ? VLLM_START : name, vars)), rayHead({ exec: '{"data":[{"id":"m"}]}' }));
            const execs = outcome.calls.filter((args) => args[0] === "exec" && args.includes("--env"));
            expect(execs.length).toBeGreaterThan(0);
            for (const args of outcome.calls) {
                expect(args.join(" ")).not.toContain("sk-very-secret");
            }
            for (const args of execs) {
                expect(args[args.indexOf("--env") + 1]).toBe("VLLM_API_KEY");
            }
        }
    });
});

describe("vllm-args-check.sh: the serve arguments checked by the vLLM inside the image", () => {
    // `docker run ... --entrypoint python3 IMAGE -c CHECK ARGS` runs the check here, against the vLLM
    // stand-in of the proving ground (test/sim/workload/vllm, modelled on vLLM 0.17.1's CLI), or
    // against no vLLM at all.
    // `docker exec vllm-fleet-ray python3 -c CHECK ARGS` too, when `serving` names the image the
    // serving container runs.
    function check(
        serveArgs: string[],
        flagKeys: string[],
        vllm = true,
        serving?: string,
    ): { status: number | null; stdout: string; stderr: string; docker: string[] } {
        // `serving` is the image the serving container runs ("": it is stopped); none: no container.
        const outcome = runWithFakeDocker(
            bashCommand(scriptProgram(ARGS_CHECK, { IMAGE: "img:1", CONTAINER: "vllm-fleet-ray", SERVE_ARGS: serveArgs, FLAG_KEYS: flagKeys, TIMEOUT: 60 })),
            {
                containers: serving === undefined ? {} : { "vllm-fleet-ray": { state: serving ? "running" : "exited", image: serving || "sha256:img0" } },
                images: { "img:1": "sha256:img1" },
                env: { PYTHONPATH: vllm ? STANDIN : "/nonexistent", PYTHONDONTWRITEBYTECODE: "1" },
            },
        );
        return { status: outcome.status, stdout: outcome.stdout, stderr: outcome.stderr, docker: outcome.calls.map((args) => args[0]) };
    }
    const STANDIN = path.join(__dirname, "..", "sim", "workload");
    const keys = ["--disable-log-requests|vllm.extraArgs", "reasoning parser|vllm.reasoningParser", "tool call parser|vllm.toolCallParser"];

    it("accepts what the image's vLLM accepts, underscores included", () => {
        const outcome = check(["serve", "/models/m", "--tensor_parallel_size", "2", "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder", "--enable-auto-tool-choice"], keys);
        expect(outcome.stderr).toBe("");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^accepted$/m);
        expect(outcome.stdout).toMatch(/^versions vllm=0\.17\.1\+vllm-fleet-standin ray=\S+$/m);
        expect(outcome.docker).toEqual(["inspect", "run"]);
    });

    it("checks inside the serving container when it runs the same image, in a new container when not", () => {
        const args = ["serve", "/models/m", "--max-model-len", "4096"];
        const same = check(args, keys, true, "sha256:img1");
        expect(same.stdout).toMatch(/^accepted$/m);
        expect(same.docker).toEqual(["inspect", "image", "exec"]);
        const other = check(args, keys, true, "sha256:img0");
        expect(other.stdout).toMatch(/^accepted$/m);
        expect(other.docker).toEqual(["inspect", "image", "run"]);
        // A stopped container prints no image (`{{if .State.Running}}`).
        const stopped = check(args, keys, true, "");
        expect(stopped.docker).toEqual(["inspect", "run"]);
        const refused = check(["serve", "/models/m", "--max-model-len", "x"], keys, true, "sha256:img1");
        expect(refused.status).toBe(1);
        expect(refused.docker).toEqual(["inspect", "image", "exec"]);
    });

    it.each([
        [["--disable-log-requests"], "vllm: error: unrecognized arguments: --disable-log-requests (config: vllm.extraArgs)"],
        [["--reasoning-parser", "qwen4"], "Reasoning parser 'qwen4' not found", "(config: vllm.reasoningParser)"],
        [["--tool-call-parser", "hermess", "--enable-auto-tool-choice"], "invalid tool call parser: hermess", "(config: vllm.toolCallParser)"],
        [["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"],
    ])("refuses %j with vLLM's own message and the config key", (extra, ...expected) => {
        const outcome = check(["serve", "/models/m", ...extra], keys);
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("the vLLM in img:1 refuses the serve arguments: ");
        for (const text of expected) {
            expect(outcome.stderr).toContain(text);
        }
        expect(outcome.stderr.trim().split("\n")).toHaveLength(1);
    });

    it("lets an image whose vLLM has another layout through, saying it could not check", () => {
        const outcome = check(["serve", "/models/m"], keys, false);
        expect(outcome.status).toBe(0);
        expect(outcome.stdout).toMatch(/^unchecked: cannot load the CLI of this vLLM \(ModuleNotFoundError/m);
    });
});

describe("read-views.sh: one session reads a node for every service on it", () => {
    const run = (views: readonly string[]) => spawnSync("bash", ["-c", scriptProgram("read-views", { VIEWS: views })], { encoding: "utf8", timeout: 30_000 });

    it("runs each view's program in a subshell of its own, its output after the line naming the view", () => {
        // The second program sees nothing the first one set, and its own strict mode.
        const result = run(["X=first; echo \"### one\"; echo $X", "set -u; echo \"### two\"; echo ${X:-unset}"]);
        expect(result.status).toBe(0);
        const views = splitViews(result.stdout);
        expect([...views.keys()]).toEqual([0, 1]);
        expect(views.get(0)!.trim()).toBe("### one\nfirst");
        expect(views.get(1)!.trim()).toBe("### two\nunset");
    });

    it("fails with the failing view's status, reading no view after it", () => {
        const result = run(["echo a", "echo half; exit 7", "echo never"]);
        expect(result.status).toBe(7);
        expect(result.stdout).toContain("half");
        expect(result.stdout).not.toContain("never");
        expect([...splitViews(result.stdout).keys()]).toEqual([0, 1]);
    });
});

describe("step-answer.sh: the end of a step that waits on a container", () => {
    const gateway = { containers: { "vllm-fleet-gateway": { log: "router: no worker for big" } } };
    const end = (status: number, answer: string) =>
        runWithFakeDocker(bashCommand(`${scriptProgram("step-answer", { CONTAINER: "vllm-fleet-gateway" })}\nstep_answer ${status} ${shQuote(answer)} "the gateway's"`), gateway);

    it("prints the check's answer when it passed", () => {
        const outcome = end(0, "route big {}");
        expect(outcome.status).toBe(0);
        expect(outcome.stdout.trim()).toBe("route big {}");
        expect(outcome.calls).toEqual([]);
    });

    it("fails with the answer and the tail of the gateway's log when it failed", () => {
        const outcome = end(4, "not served: big");
        expect(outcome.status).toBe(1);
        expect(outcome.stderr).toContain("not served: big\nthe gateway's log (docker logs vllm-fleet-gateway):\nrouter: no worker for big");
    });
});
