/**
 * Runs the real program under Pulumi's mocks: no engine, no host. Probes answer with what a real
 * DGX Spark prints (test/fixtures), each node with its own fabric address.
 */
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, vi } from "vitest";
import type { Observer } from "../../components/observer";
import { parseObservation } from "../../infra/core/observe";
import { FAKE_IMAGE_ID, FAKE_IMAGE_IDENTITY } from "./fakeDocker";

export interface RecordedResource {
    readonly type: string;
    readonly name: string;
    readonly inputs: Record<string, any>;
    readonly parent?: string;
    readonly dependencies: string[];
    readonly urn: string;
    /** The URNs this resource is also known by (aliases), as the engine receives them. */
    readonly aliases: string[];
}

const fixture = (name: string) => fs.readFileSync(path.join(__dirname, "..", "fixtures", name), "utf8");

/** The RDMA device nodes of a Spark (ConnectX-7: one uverbs device per RoCE device, and rdma_cm). */
export const SPARK_RDMA_DEVICES = ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/infiniband/uverbs2", "/dev/infiniband/uverbs3"];

/** /proc/meminfo of an idle Spark (kB): 119 GiB available, little page cache, 16 GiB of swap. */
export const HEALTHY_MEMINFO = [
    "MemTotal:       124571956 kB",
    "MemFree:        117000000 kB",
    "MemAvailable:   119000000 kB",
    "Cached:           1500000 kB",
    "SwapTotal:       16777212 kB",
].join("\n");

/** What probe.sh prints on a simulated Spark with this fabric address. */
export function sparkProbeOutput(
    fabricIp: string,
    mgmtIp: string,
    overrides: {
        /** The image's content identity (image-identity.sh) on the node; the fake image's by default. */
        imageIdentity?: string;
        /** The node's image store; classic (overlay2) by default. */
        imageStore?: "classic" | "containerd";
        /** The image's registry digests (`name@sha256:...`); none by default (a loaded image). */
        repoDigests?: string[];
        gpus?: number;
        modelConfig?: object;
        weightBytes?: number;
        rdmaDevices?: string[];
        /** The fabric interface's MTU (and its twin rail's); a healthy fabric's 9000 by default. */
        mtu?: number;
        /** The lines of /proc/meminfo; an idle Spark's by default (no page cache to speak of, swap). */
        meminfo?: string;
        /** `nvidia-smi --query-gpu` output; `gpus` lines as GB10 prints them by default. */
        gpuQuery?: string;
        /** The header of plain nvidia-smi; the fixture's (driver 580) by default. */
        smi?: string;
        /** The userspace OOM killers running; earlyoom by default. */
        oomGuards?: string[];
        /** ibdev2netdev's output; the fixture's (both rails of the cabled port Up) by default. */
        ibdev2netdev?: string;
    } = {},
): string {
    const mtu = overrides.mtu ?? 9000;
    const gpuLines = Array.from({ length: overrides.gpus ?? 1 }, (_, index) => `${index}, NVIDIA GB10, [N/A], [N/A], [N/A]`);
    return [
        "### hostname",
        "spark",
        "### nvidia-smi-query",
        ...(overrides.gpuQuery !== undefined ? [overrides.gpuQuery] : gpuLines),
        "### nvidia-smi",
        overrides.smi ?? fixture("nvidia-smi-gb10.txt"),
        "### meminfo",
        overrides.meminfo ?? HEALTHY_MEMINFO,
        "### ip-addr",
        `2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n    inet ${mgmtIp}/24 brd 10.1.230.255 scope global eth0`,
        `3: enp1s0f1np1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu ${mtu}\n    inet ${fabricIp}/24 scope global enp1s0f1np1`,
        "### links",
        "eth0 1500 up",
        "enP2p1s0f0np0 1500 down",
        `enP2p1s0f1np1 ${mtu} up`,
        "enp1s0f0np0 1500 down",
        `enp1s0f1np1 ${mtu} up`,
        "lo 65536 unknown",
        "### oom-guard",
        ...(overrides.oomGuards ?? ["earlyoom"]),
        "### ibdev2netdev",
        overrides.ibdev2netdev ?? fixture("ibdev2netdev-spark.txt"),
        "### rdma-devices",
        ...(overrides.rdmaDevices ?? SPARK_RDMA_DEVICES),
        "### docker",
        "28.3.3",
        "### docker-store",
        ...(overrides.imageStore === "containerd" ? ["overlayfs", "driver-type=io.containerd.snapshotter.v1"] : ["overlay2", "Backing Filesystem=extfs", "Supports d_type=true"]),
        "### image",
        `identity ${overrides.imageIdentity ?? FAKE_IMAGE_IDENTITY}`,
        `id ${FAKE_IMAGE_ID}`,
        ...(overrides.repoDigests ?? []).map((digest) => `repo-digest ${digest}`),
        "### model",
        `exists yes\nconfig-sha256 abc\n1000 config.json\n${overrides.weightBytes ?? 5000} model.safetensors`,
        "### model-config",
        overrides.modelConfig ? JSON.stringify(overrides.modelConfig) : "",
        "",
    ].join("\n");
}

/**
 * What live.sh would print on each node after `run`: every serving container it made, alive with
 * the labels it was given, `vllm serve` running with its token, and the endpoint answering.
 */
export function liveAfter(run: MockRun, watchdogNode: (resource: string) => string = () => "spark1"): (node: string) => string {
    return (node: string) => {
        const containers: string[] = [];
        let token = "";
        for (const resource of run.resources) {
            const inputs = unsecret(resource.inputs);
            let name: string | undefined;
            let labels: Record<string, string> = {};
            if (resource.type === "docker:index/container:Container") {
                name = inputs.name;
                labels = Object.fromEntries((inputs.labels as { label: string; value: string }[]).map((l) => [l.label, l.value]));
            } else if (typeof inputs.create === "string" && inputs.create.includes("RUN_ARGS=(")) {
                const args = [...unsecret(inputs.create).matchAll(/'--label' '([^=']+)=([^']*)'/g)];
                labels = Object.fromEntries(args.map((match) => [match[1], match[2]]));
                name = /NAME='([^']+)'/.exec(inputs.create)?.[1];
            }
            // The builtin runner keeps the program in `create`; remote.Command sends it on stdin.
            const program = `${unsecret(inputs.create) ?? ""}\n${unsecret(inputs.stdin) ?? ""}`;
            // Quoted once in a program, twice inside stdin's assignments; tokens are [0-9a-z].
            const served = /TOKEN='(?:\\'')?([0-9a-z]*)/.exec(program);
            if (resource.name.endsWith("-serve") && served) {
                token = served[1];
            }
            // The watchdog runs on its service's first node (spark1 in the single-model unit stacks).
            // A node exporter is `<node>-node-exporter`; Prometheus runs where `watchdogNode` says too.
            const onNode =
                resource.name.includes(`-${node}-`) ||
                resource.name === `${node}-node-exporter` ||
                ((resource.name.endsWith("-watchdog") || resource.name === "monitoring-prometheus") && watchdogNode(resource.name) === node);
            if (name && onNode) {
                containers.push(JSON.stringify({ name: `/${name}`, id: `${resource.name}-id`, status: "running", running: true, restarting: false, exitCode: 0, restartCount: 0, startedAt: "", labels }));
            }
        }
        return ["### containers", ...containers, "### serve", "process yes", `token ${token}`, "### endpoint", "health 200", "completion ok", ...deliveredAfter(run, node), ""].join("\n");
    };
}

/**
 * The `delivered` section live.sh would print on `node` after `run`: the mark each image delivery
 * step there left (its revision), the image there with the stand-in identity, known by its pinned
 * name when pinned. `gone` names the images no longer there.
 */
export function deliveredAfter(run: MockRun, node: string, gone: readonly string[] = []): string[] {
    const lines = ["### delivered"];
    for (const resource of run.resources) {
        const inputs = unsecret(resource.inputs);
        // Quoted once in a program, twice inside stdin's assignments (remote.Command, peer-run.sh's input).
        const program = `${unsecret(inputs.create) ?? ""}\n${unsecret(inputs.stdin) ?? ""}`;
        const revision = /REVISION='(?:\\'')?([0-9a-z]+)/.exec(program)?.[1];
        const image = /IMAGE='(?:\\'')?([^'\\]+)/.exec(program)?.[1];
        if (!resource.name.startsWith(`${node}-`) || !resource.name.endsWith("-image") || !revision || !image) {
            continue;
        }
        lines.push(`mark ${revision} ${image}`);
        if (!gone.includes(image)) {
            lines.push(`identity ${FAKE_IMAGE_IDENTITY}`, ...(image.includes("@") ? [`repo-digest ${image}`] : []));
        }
    }
    return lines;
}

/**
 * The names of the resources whose own inputs differ between two runs: what `up` changes first.
 * Under mocks a replaced container keeps its id, so what follows it through its id (a worker after
 * its head, join waits, gates) is not listed here; the e2e tests see those follow.
 */
export function changedInputs(before: MockRun, after: MockRun): string[] {
    const inputs = (run: MockRun) => Object.fromEntries(run.resources.map((r) => [r.name, JSON.stringify(unsecret(r.inputs))]));
    const a = inputs(before);
    const b = inputs(after);
    return Object.keys(b).filter((name) => a[name] !== b[name]).sort();
}

export interface MockRun {
    readonly resources: RecordedResource[];
    readonly outputs: Record<string, unknown>;
    byName(name: string): RecordedResource;
}

/** Resolves an Output (mocks resolve everything); rejects when the Output failed (e.g. preflight). */
export function valueOf<T>(output: pulumi.Output<T> | T): Promise<T> {
    // Output.promise() is the SDK's own accessor (internal, but what the SDK's tests use).
    return (pulumi.output(output) as unknown as { promise(): Promise<T> }).promise();
}

/** The plain value of a possibly secret-wrapped mock input. */
export function unsecret(value: any): any {
    const SECRET_SIG = "4dabf18193072939515e22adb298388d";
    return value && typeof value === "object" && SECRET_SIG in value ? value.value : value;
}

/** Puts on the error of a failed run the resources registered until then (read by {@link registeredBefore}). */
function withRegistered(error: unknown, resources: readonly RecordedResource[]): unknown {
    if (error && typeof error === "object" && !("registered" in error)) {
        // A getter: registrations still under way when the error was thrown are counted too.
        Object.defineProperty(error, "registered", { get: () => resources.map((resource) => `${resource.type}::${resource.name}`), enumerable: false });
    }
    return error;
}

/** `type::name` of every resource a failed {@link runProgram} registered before it failed. */
export function registeredBefore(error: unknown): string[] {
    const registered = (error as { registered?: string[] } | undefined)?.registered;
    if (!registered) {
        throw new Error(`not the error of a run: ${String(error)}`);
    }
    return registered;
}

/** The cache directory {@link runProgram} made for the test file: removed after its tests. */
let unitCache: string | undefined;
afterAll(() => {
    if (unitCache !== undefined) {
        fs.rmSync(unitCache, { recursive: true, force: true });
        if (process.env.XDG_CACHE_HOME === unitCache) {
            delete process.env.XDG_CACHE_HOME;
        }
        unitCache = undefined;
    }
});

/**
 * Runs infra/program.ts with `config` (keys without the `vllm-fleet:` prefix) and returns every
 * registered resource. `probe` gives each node's probe output by node name.
 */
export async function runProgram(
    config: Record<string, unknown>,
    probe: (node: string) => string,
    secrets: Record<string, string> = { sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----" },
    live: (node: string) => string = () => "",
): Promise<MockRun> {
    // The program writes each node's ssh files under the cache (components/ssh.ts): a private one here.
    if (process.env.XDG_CACHE_HOME === undefined) {
        unitCache = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-unit-cache-"));
        process.env.XDG_CACHE_HOME = unitCache;
    }
    const resources: RecordedResource[] = [];
    const inputsByName = new Map<string, Record<string, any>>();
    vi.resetModules();
    const runtime = await import("@pulumi/pulumi/runtime");
    await runtime.setMocks(
        {
            newResource(args: pulumi.runtime.MockResourceArgs) {
                const name = args.name;
                inputsByName.set(name, args.inputs);
                let stdout = "";
                if (/-weights-close$/.test(name)) {
                    // After a sync the receiving node lists what the first node has.
                    const listing = probe(name.replace(/-weights-close$/, "")).split("### model\n")[1].split("\n### ")[0];
                    stdout = `### model\n${listing}`;
                } else if (/-hub-download$/.test(name)) {
                    // model.source hub: the first node lists its directory as the download left it,
                    // which the probe gives as node `<name>@hub`.
                    const node = name.replace(/-hub-download$/, "");
                    stdout = `hub-downloaded x@y\n### model\n${probe(`${node}@hub`).split("### model\n")[1]}`;
                } else if (/-fabric-[^-]+$/.test(name)) {
                    stdout = "transport IB\nnccl NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.200.12<0>";
                } else if (/-args-check$/.test(name)) {
                    stdout = "versions vllm=0.17.1 ray=2.53.0\naccepted";
                } else if (args.type === "pulumi-nodejs:dynamic/secret:FleetSecret") {
                    // The stand-in of the random value the provider makes: known, to be looked for.
                    return { id: `${name}-id`, state: { ...args.inputs, value: `generated-${name}` } };
                } else if (name === "monitoring-config") {
                    // Prometheus scraped every target it was given up.
                    const program = String(unsecret(args.inputs.create));
                    const list = /ADDRESSES=\(([^)]*)\)/.exec(program)?.[1] ?? "";
                    stdout = [...list.matchAll(/'([^']+)'/g)].map((match) => `target ${match[1]} up`).join("\n");
                } else if (/-serve$/.test(name)) {
                    stdout = 'started\ncompletion {"choices":[{"text":"ranks: 0@x"}]}';
                } else {
                    stdout = `container-id ${name}`;
                }
                return { id: `${name}-id`, state: { ...args.inputs, stdout, stderr: "" } };
            },
            call(args: pulumi.runtime.MockCallArgs) {
                return args.inputs;
            },
        },
        "vllm-fleet",
        "unit",
        false,
    );
    const allConfig: Record<string, string> = {};
    for (const [key, value] of Object.entries(config)) {
        allConfig[`vllm-fleet:${key}`] = typeof value === "string" ? value : JSON.stringify(value);
    }
    for (const [key, value] of Object.entries(secrets)) {
        allConfig[`vllm-fleet:${key}`] = value;
    }
    runtime.setAllConfig(allConfig, Object.keys(secrets).map((key) => `vllm-fleet:${key}`));

    // Record every registration with its parent and dependencies, as the engine would see them.
    const monitor: any = (runtime as any).getMonitor();
    const register = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req: any, callback: (err: any, response: any) => void) => {
        register(req, (err: any, response: any) => {
            if (!err) {
                resources.push({
                    type: req.getType(),
                    name: req.getName(),
                    inputs: {},
                    parent: req.getParent() || undefined,
                    dependencies: req.getDependenciesList(),
                    urn: response.getUrn(),
                    aliases: [...(req.getAliasurnsList?.() ?? []), ...(req.getAliasesList?.() ?? []).map((alias: any) => alias.getUrn?.() || JSON.stringify(alias.toObject()))],
                });
            }
            callback(err, response);
        });
    };
    const program = await import("../../infra/program");
    // A failing apply (a preflight error) rejects every Output derived from it. The engine reports
    // those once; here they would surface as unhandled rejections, so the run collects them while
    // it lasts and rethrows the first one.
    const previous = process.listeners("unhandledRejection");
    process.removeAllListeners("unhandledRejection");
    const rejections: unknown[] = [];
    process.on("unhandledRejection", (reason) => rejections.push(reason));
    const resolved: Record<string, unknown> = {};
    try {
        // The program-time read of the hosts answers with the probe's and live.sh's output.
        const observe: Observer = async (views) =>
            views.map((view) => view.config.nodes.map((node) => parseObservation(node.name, `${probe(node.name)}\n${live(node.name)}`)));
        const outputs = await program.fleetProgram(observe);
        for (const [key, value] of Object.entries(outputs)) {
            resolved[key] = await valueOf(value as pulumi.Output<unknown>);
        }
    } catch (error) {
        throw withRegistered(error, resources);
    } finally {
        // Let pending registrations finish before handing rejections back to the test runner.
        await new Promise((resolve) => setTimeout(resolve, 50));
        process.removeAllListeners("unhandledRejection");
        for (const listener of previous) {
            process.on("unhandledRejection", listener);
        }
    }
    if (rejections.length > 0) {
        throw withRegistered(rejections[0], resources);
    }
    for (const resource of resources) {
        Object.assign(resource.inputs, inputsByName.get(resource.name) ?? {});
    }
    return {
        resources,
        outputs: resolved,
        byName(name: string) {
            // A component and the one step it holds may share a name (the serve-argument check, a
            // node's firewall): the step is what the tests look at.
            const named = resources.filter((resource) => resource.name === name);
            const found = named.find((resource) => !resource.type.startsWith("vllm-fleet:")) ?? named[0];
            if (!found) {
                throw new Error(`no resource ${name}; have ${resources.map((resource) => resource.name).join(", ")}`);
            }
            return found;
        },
    };
}
