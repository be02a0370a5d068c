/**
 * The inputs the program sends, compared with what each provider keeps and compares them against on
 * the next `pulumi up`: a difference there replaces a container (a model reload on real Sparks) on
 * every `up`. The Docker provider's side is modelled on its source (dockerProviderModel.ts).
 */
import * as fs from "fs";
import { describe, expect, it } from "vitest";
import { programsOnStdin, runFromStdin } from "../../components/shell";
import { RANK_KEEPER_PATH } from "../../infra/core/plan";
import { ContainerInputs, dockerProviderState, fieldsThatWouldReplace } from "./dockerProviderModel";
import { MockRun, liveAfter, runProgram, sparkProbeOutput, unsecret } from "./mocks";
import { sparkDuo } from "./stacks";

const fabricIps: Record<string, string> = { spark1: "192.168.200.12", spark2: "192.168.200.13" };
const probe = (node: string) => sparkProbeOutput(fabricIps[node], node === "spark1" ? "10.1.230.180" : "10.1.230.181");
const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const users = {
    ...sparkDuo,
    nodes: [
        { name: "spark1", host: "10.1.230.180", hostKey: HOST_KEY },
        { name: "spark2", host: "10.1.230.181", port: 2222, hostKey: HOST_KEY },
    ],
    containerDriver: "docker",
    commandRunner: "pulumi-command",
};
/** What a vLLM image brings (vllm/vllm-openai: ENTRYPOINT ["vllm", "serve"]). */
const VLLM_IMAGE = { entrypoint: ["vllm", "serve"], cmd: [] };
const CONTAINER = "docker:index/container:Container";

/** A provider's config arrives as JSON text or as a list, depending on the SDK's path. */
function sshOptsOf(provider: Record<string, any>): string[] {
    return Array.isArray(provider.sshOpts) ? provider.sshOpts : JSON.parse(provider.sshOpts);
}

function containers(run: MockRun): [string, ContainerInputs][] {
    return run.resources.filter((r) => r.type === CONTAINER).map((r) => [r.name, unsecret(r.inputs) as ContainerInputs]);
}

describe.each(["ray", "mp"])("the Docker provider keeps what the program sends (executor %s)", async (executor) => {
    const run = await runProgram({ ...users, executor }, probe);

    it("registers a docker.Container per node and the watchdog's", () => {
        expect(containers(run).map(([name]) => name).sort()).toEqual(
            executor === "ray" ? ["ray-spark1-ray-head", "ray-spark2-ray-worker", "vllm-watchdog"] : ["vllm-spark1-rank0", "vllm-spark2-rank1", "vllm-watchdog"],
        );
    });

    it.each(containers(run))("%s: no field differs from what the provider stores, so no up replaces it", (_name, inputs) => {
        expect(fieldsThatWouldReplace(inputs, dockerProviderState(inputs, VLLM_IMAGE))).toEqual([]);
    });

    it.each(containers(run))("%s: the image's entrypoint is replaced by the program, never kept or cleared", (name, inputs) => {
        const program = name.endsWith("watchdog") ? ["python3", "-c"] : executor === "ray" ? ["ray", "start"] : ["python3", RANK_KEEPER_PATH];
        expect([...inputs.entrypoints!, inputs.command![0]]).toEqual(program);
        expect(inputs.shmSize === undefined || Number.isInteger(inputs.shmSize)).toBe(true);
    });
});

describe("the model of the Docker provider", () => {
    const base: ContainerInputs = { name: "c", image: "i", command: ["ray", "start"], networkMode: "host", ipcMode: "host", restart: "no" };

    it("flags the cleared entrypoint the program used to send ([\"\"] is stored as none)", () => {
        expect(fieldsThatWouldReplace({ ...base, entrypoints: [""] }, dockerProviderState({ ...base, entrypoints: [""] }, VLLM_IMAGE))).toEqual(["entrypoints"]);
    });

    it("flags a shm size that is not whole MiB (10.24 GiB is 10485.76 MiB)", () => {
        const inputs = { ...base, entrypoints: ["ray"], shmSize: (10.24 * 1024 ** 3) / 1024 ** 2 };
        expect(fieldsThatWouldReplace(inputs, dockerProviderState(inputs, VLLM_IMAGE))).toEqual(["shmSize"]);
    });

    it("flags a container that names no command on an image with a CMD (the image's is stored)", () => {
        const inputs = { ...base, command: [] as string[] };
        expect(fieldsThatWouldReplace(inputs, dockerProviderState(inputs, { entrypoint: ["vllm", "serve"], cmd: ["--help"] }))).toEqual(["command"]);
    });

    it("flags a capability without Docker's CAP_ prefix, and a device without its permissions", () => {
        const inputs = { ...base, entrypoints: ["ray"], capabilities: { adds: ["IPC_LOCK"] }, devices: [{ hostPath: "/dev/infiniband/uverbs0", containerPath: "/dev/infiniband/uverbs0" }] };
        expect(fieldsThatWouldReplace(inputs, dockerProviderState(inputs, VLLM_IMAGE))).toEqual(["capabilities", "devices"]);
    });

    it("flags privileged: false, which the provider reads back as set", () => {
        const inputs = { ...base, entrypoints: ["ray"], privileged: false };
        expect(fieldsThatWouldReplace(inputs, dockerProviderState(inputs, VLLM_IMAGE))).toEqual([]);
    });
});

describe("the serving containers get the RDMA devices in a form the Docker provider keeps", async () => {
    const run = await runProgram({ ...users, executor: "mp" }, probe);
    it.each(containers(run).filter(([name]) => !name.endsWith("watchdog")))("%s", (_name, inputs) => {
        expect(inputs.devices?.map((device) => device.hostPath)).toEqual(expect.arrayContaining(["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"]));
        expect(inputs.capabilities).toEqual({ adds: ["CAP_IPC_LOCK"] });
        expect(inputs.privileged).toBeUndefined();
        expect(fieldsThatWouldReplace(inputs, dockerProviderState(inputs, VLLM_IMAGE))).toEqual([]);
    });
});

describe("remote.Command keeps what the program sends", async () => {
    const first = await runProgram(users, probe);
    // The second run reads the hosts as the first left them: every container alive, vLLM serving.
    const second = await runProgram(users, probe, undefined, liveAfter(first));
    const commands = first.resources.filter((r) => r.type === "command:remote:Command");

    it("gets the same inputs on a run after a healthy one, so a second up changes nothing", () => {
        const inputsOf = (run: MockRun) => Object.fromEntries(run.resources.map((r) => [r.name, unsecret(r.inputs)]));
        expect(inputsOf(second)).toEqual(inputsOf(first));
    });

    it("runs short command lines; the programs travel on standard input", () => {
        // join waits, the gate, vllm serve, the check of its arguments and the read of the image's
        // PYTHONPATH, the fabric check per node, a remove-first step per Docker container, and the
        // compile cache's step per node.
        expect(commands.length).toBe(12);
        for (const resource of commands) {
            const inputs = unsecret(resource.inputs);
            expect(inputs.create).toBe(runFromStdin("create"));
            expect(inputs.update).toBe(runFromStdin("update"));
            expect(unsecret(inputs.stdin)).toMatch(/^FLEET_CREATE='/);
        }
        const serve = unsecret(first.byName("vllm-serve").inputs);
        expect(serve.delete).toBe(runFromStdin("delete"));
        expect(unsecret(serve.stdin)).toMatch(/FLEET_DELETE=.*stop_vllm_serve "\$CONTAINER"/s);
    });

    it("runs no probe as a resource: the facts come from the read at the start of every run", () => {
        expect(first.resources.some((r) => r.name.endsWith("-probe"))).toBe(false);
    });

    it("checks each node's pinned host key with the same key as the Docker provider", () => {
        const connection = unsecret(unsecret(first.byName("ray-spark2-ray-joined").inputs).connection);
        expect(connection.hostKey).toBe(HOST_KEY);
        expect(connection.port).toBe(2222);
    });
});

describe("the Docker provider reaches a node like every other path", async () => {
    const run = await runProgram(users, probe);
    const provider = unsecret(run.byName("spark2-docker").inputs);
    const options = sshOptsOf(provider);
    const option = (name: string) => options[options.indexOf(name) + 1];
    const known = /UserKnownHostsFile=(.*)/.exec(options.find((o) => o.startsWith("UserKnownHostsFile=")) ?? "")?.[1] ?? "";

    it("uses the stack's key, written to a private file, not ~/.ssh", () => {
        const keyFile = option("-i");
        expect(fs.readFileSync(keyFile, "utf8")).toContain("mock");
        expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
        expect(options).toContain("IdentitiesOnly=yes");
    });

    it("checks the pinned host key strictly, from a known_hosts file of its own", () => {
        expect(options).toContain("StrictHostKeyChecking=yes");
        expect(fs.readFileSync(known, "utf8")).toBe(`[10.1.230.181]:2222 ${HOST_KEY}\n`);
        expect(provider.host).toBe("ssh://aurora@10.1.230.181:2222");
    });

    it("fails in seconds on a node that does not answer: one attempt of ConnectTimeout, keepalives", () => {
        expect(options).toEqual(expect.arrayContaining(["ConnectTimeout=20", "ConnectionAttempts=1", "ServerAliveInterval=3", "ServerAliveCountMax=3"]));
    });

    it("skips the check, like remote.Command, where no host key is pinned", async () => {
        const open = await runProgram({ ...users, nodes: sparkDuo.nodes }, probe);
        const openOptions = sshOptsOf(unsecret(open.byName("spark1-docker").inputs));
        expect(openOptions).toEqual(expect.arrayContaining(["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"]));
    });
});

describe("the Docker driver removes the other executor's container first", async () => {
    const run = await runProgram({ ...users, executor: "mp" }, probe);

    it("in a step of its own, before the container, on the same node", () => {
        const step = run.byName("vllm-spark2-rank1-remove-first");
        expect(run.byName("vllm-spark2-rank1").dependencies).toContain(step.urn);
        const stdin = unsecret(unsecret(step.inputs).stdin) as string;
        expect(stdin).toContain("vllm-fleet-ray");
        expect(unsecret(unsecret(step.inputs).connection).host).toBe("10.1.230.181");
    });
});

describe("the image copy (image.source copy) reaches both nodes like every other path", async () => {
    const run = await runProgram({ ...users, image: { ...users.image, source: "copy" } }, probe);
    const copy = unsecret(run.byName("spark2-image").inputs);
    const stdin = unsecret(copy.stdin) as string;

    it("checks host keys with the same files as the Docker provider", () => {
        expect(stdin).not.toContain("StrictHostKeyChecking=no");
        expect(stdin.match(/StrictHostKeyChecking=yes/g)).toHaveLength(2);
        expect(stdin).toContain("spark1.known_hosts");
        expect(stdin).toContain("spark2.known_hosts");
    });

    it("fails in seconds on either node when it does not answer", () => {
        expect(stdin.match(/'ConnectionAttempts=1'/g)).toHaveLength(2);
        expect(stdin.match(/'ServerAliveInterval=3' '-o' 'ServerAliveCountMax=3'/g)).toHaveLength(2);
    });

    it("runs both sides' programs from standard input, none on a command line, and relays no data", () => {
        expect(copy.create).not.toContain("docker save");
        expect(copy.create).not.toContain("SECRET=");
        expect(stdin).toContain("docker save");
        expect(stdin).toContain("docker load");
        // Nothing here reads one session's output into the other's input.
        expect(copy.create).not.toMatch(/PEER_RUN"[^\n]*\|[^\n]*SELF_SSH/);
        expect(copy.create).toMatch(/printf '%s' "\$SELF_PROGRAMS" \| "\$\{SELF_SSH\[@\]\}"/);
    });
});

describe("programsOnStdin", () => {
    it("gives update the create program when it has none, and reads back through a shell", async () => {
        const { execFileSync } = await import("child_process");
        const document = programsOnStdin({ create: "echo 'it''s'", delete: "echo gone" });
        const read = (name: string) => execFileSync("bash", ["-c", `eval "$(cat)"; printf '%s' "$${name}"`], { input: document, encoding: "utf8" });
        expect(read("FLEET_CREATE")).toBe("echo 'it''s'");
        expect(read("FLEET_UPDATE")).toBe("echo 'it''s'");
        expect(read("FLEET_DELETE")).toBe("echo gone");
    });

    it("runs the chosen program with standard input already consumed", async () => {
        const { execFileSync } = await import("child_process");
        const document = programsOnStdin({ create: "read -r line || echo stdin-empty" });
        expect(execFileSync("sh", ["-c", runFromStdin("create")], { input: document, encoding: "utf8" })).toBe("stdin-empty\n");
    });

    it("runs the program without it in any process's command line (programs carry secrets)", async () => {
        const { execFileSync } = await import("child_process");
        // The program lists every command line of this session's processes: its own text is in none.
        const document = programsOnStdin({ create: "secret=sk-in-the-program; ps -eww -o args | grep -c 'sk-in-th[e]' || true" });
        expect(execFileSync("sh", ["-c", runFromStdin("create")], { input: document, encoding: "utf8" }).trim()).toBe("0");
        // and it runs strict: a failing command stops it with its status.
        const failing = programsOnStdin({ create: "set -euo pipefail; false; echo not-reached" });
        expect(() => execFileSync("sh", ["-c", runFromStdin("create")], { input: failing, encoding: "utf8", stdio: "pipe" })).toThrow();
    });
});
