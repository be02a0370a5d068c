/**
 * The host checks (infra/core/hostChecks.ts) on facts read from what real DGX Sparks print
 * (test/fixtures, through the mocked probe), each edited to trip one check; and quiet on a healthy
 * Spark. Then their keys (vllm-fleet:hostChecks, vllm-fleet:hostPrep), and the program refusing at
 * preview, before anything is registered.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it, vi } from "vitest";
import { parseFleetConfig } from "../../infra/core/config";
import { parseProbeOutput } from "../../infra/core/facts";
import { HostCheckError, HostCheckNode, enforceHostChecks, hostChecks } from "../../infra/core/hostChecks";
import { HEALTHY_MEMINFO, liveAfter, registeredBefore, runProgram, sparkProbeOutput } from "./mocks";
import { sparkDuo } from "./stacks";
import { configErrorOf } from "./configErrors";

const fixture = (name: string) => fs.readFileSync(path.join(__dirname, "..", "fixtures", name), "utf8");

type ProbeOverrides = Parameters<typeof sparkProbeOutput>[2];

/** A Spark as the read finds it, with `overrides` on the healthy one. */
function node(name: string, overrides: ProbeOverrides = {}, servingAlive = false): HostCheckNode {
    return { name, facts: parseProbeOutput(sparkProbeOutput("192.168.200.12", "10.1.230.180", overrides)), fabricInterface: "enp1s0f1np1", servingAlive };
}

const defaults = parseFleetConfig(sparkDuo);
const withKeys = (keys: Record<string, unknown>) => parseFleetConfig({ ...sparkDuo, ...keys });

/** /proc/meminfo with these fields changed (kB). */
const meminfo = (fields: Record<string, number>) =>
    HEALTHY_MEMINFO.split("\n")
        .map((line) => {
            const name = line.split(":")[0];
            return name in fields ? `${name}:${String(fields[name]).padStart(16)} kB` : line;
        })
        .join("\n");

/** The 590 driver on the fixture's GB10 (the fixture's own is 580.126.09). */
const smi590 = fixture("nvidia-smi-gb10.txt").replace(/580\.126\.09/g, "590.44.01");

describe("on a healthy Spark", () => {
    it("every check is quiet", () => {
        expect(hostChecks(defaults, [node("spark1"), node("spark2")])).toEqual([]);
        expect(enforceHostChecks(defaults, [node("spark1")])).toEqual([]);
    });

    it("the fixture's two rails Up and the other cable's ports Down are healthy", () => {
        const facts = node("spark1").facts;
        expect(facts.hcas.filter((hca) => !hca.up).map((hca) => hca.netdev)).toEqual(["enP2p1s0f0np0", "enp1s0f0np0"]);
        expect(hostChecks(defaults, [node("spark1")]).filter((finding) => finding.check === "rails")).toEqual([]);
    });
});

describe("each check fires on a node set up to trip it, naming node, finding, expectation, reason and key", () => {
    it("mtu: the fabric at 1500 (what the NVIDIA playbook's Spark shows), and only on that node", () => {
        const findings = hostChecks(defaults, [node("spark1"), node("spark2", { mtu: 1500 })]);
        expect(findings).toHaveLength(1);
        expect(findings[0]).toMatchObject({ check: "mtu", node: "spark2", policy: "warn" });
        expect(findings[0].message).toMatch(
            /^host check mtu: node spark2: fabric enp1s0f1np1 has MTU 1500, enP2p1s0f1np1 has MTU 1500; expected 9000 on the fabric .*24 GB\/s .* 19-21 GB\/s at 1500; .*ip link set enp1s0f1np1 mtu 9000; ip link set enP2p1s0f1np1 mtu 9000.*; or set vllm-fleet:hostChecks\.mtu to off$/,
        );
    });

    it("mtu: the fixture's own ip addr line, without the links section", () => {
        const facts = parseProbeOutput(`### ip-addr\n${fixture("ip-addr-spark-fabric.txt")}\n### ibdev2netdev\n${fixture("ibdev2netdev-spark.txt")}`);
        const findings = hostChecks(defaults, [{ name: "spark1", facts, fabricInterface: "enp1s0f1np1", servingAlive: false }]);
        expect(findings.map((finding) => finding.check)).toEqual(["mtu"]);
        expect(findings[0].message).toContain("fabric enp1s0f1np1 has MTU 1500;");
    });

    it("rails: the twin of the cabled port Down", () => {
        const twinDown = fixture("ibdev2netdev-spark.txt").replace("enP2p1s0f1np1 (Up)", "enP2p1s0f1np1 (Down)");
        const findings = hostChecks(defaults, [node("spark1", { ibdev2netdev: twinDown })]);
        expect(findings.map((finding) => finding.check)).toEqual(["rails"]);
        expect(findings[0].message).toMatch(
            /^host check rails: node spark1: RoCE rail roceP2p1s0f1 \(enP2p1s0f1np1\) of the fabric port is Down \(ibdev2netdev\); expected every rail of the cabled port Up: .*ip link set enP2p1s0f1np1 up.*; or set vllm-fleet:hostChecks\.rails to off$/,
        );
    });

    it("driver: 590 on GB10 is refused by default, before anything starts, with the reason", () => {
        const nodes = [node("spark1"), node("spark2", { smi: smi590 })];
        expect(() => enforceHostChecks(defaults, nodes)).toThrow(HostCheckError);
        expect(() => enforceHostChecks(defaults, nodes)).toThrow(
            /host checks refuse the nodes:\n {2}- host check driver: node spark2: NVIDIA driver 590\.44\.01 on NVIDIA GB10 is known bad: .*deadlocking during CUDA-graph capture.*; expected a driver outside 590\.x: .*install 580.*; or set vllm-fleet:hostChecks\.driver to warn or off$/,
        );
        expect(enforceHostChecks(withKeys({ hostChecks: { driver: "warn" } }), nodes)).toEqual([expect.stringMatching(/^host check driver: node spark2: NVIDIA driver 590\.44\.01/)]);
        expect(enforceHostChecks(withKeys({ hostChecks: { driver: "off" } }), nodes)).toEqual([]);
    });

    it("driver: 590 on a GPU that is not a GB10 is not this list's business", () => {
        const h100 = node("spark1", { smi: smi590 });
        const facts = { ...h100.facts, gpus: [{ index: 0, name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 }] };
        expect(hostChecks(defaults, [{ ...h100, facts }])).toEqual([]);
    });

    it("memory: MemAvailable below what the plan takes (gpu-memory-utilization × memory)", () => {
        // 60 GiB available; vLLM asks for 0.9 × 118.8 GiB (MemTotal) = 106.9 GiB at its start.
        const findings = hostChecks(defaults, [node("spark1", { meminfo: meminfo({ MemAvailable: 60 * 1024 ** 2, MemFree: 50 * 1024 ** 2 }) })]);
        expect(findings.map((finding) => finding.check)).toEqual(["memory"]);
        expect(findings[0].message).toMatch(
            /^host check memory: node spark1: MemAvailable is 60\.0 GiB, below the 106\.9 GiB vLLM asks for at its start \(vllm-fleet:vllm\.gpuMemoryUtilization 0\.9 × MemTotal 118\.8 GiB\); expected that much available .*Free memory on device.*Available memory on node.*vllm-fleet:vllm\.gpuMemoryUtilization \(at most 0\.5 fits what is available now\); or set vllm-fleet:hostChecks\.memory to warn or off$/,
        );
        // A lower gpu-memory-utilization takes less: 0.5 × 118.8 = 59.4 GiB fits in 60.
        expect(hostChecks(withKeys({ vllm: { gpuMemoryUtilization: 0.5 } }), [node("spark1", { meminfo: meminfo({ MemAvailable: 60 * 1024 ** 2, MemFree: 59.5 * 1024 ** 2 }) })])).toEqual([]);
    });

    it("memory: the page cache holding what the plan needs, until hostPrep.dropCaches drops it", () => {
        const cached = { meminfo: meminfo({ MemFree: 3 * 1024 ** 2, Cached: 105 * 1024 ** 2, MemAvailable: 110 * 1024 ** 2 }) };
        const findings = hostChecks(defaults, [node("spark1", cached)]);
        expect(findings.map((finding) => finding.check)).toEqual(["pageCache"]);
        expect(findings[0].message).toMatch(
            /^host check pageCache: node spark1: the page cache holds 105\.0 GiB and 3\.0 GiB are free, below the 106\.9 GiB vLLM asks for at its start .*set vllm-fleet:hostPrep\.dropCaches to true.*; or set vllm-fleet:hostChecks\.pageCache to off$/,
        );
        expect(hostChecks(withKeys({ hostPrep: { dropCaches: true } }), [node("spark1", cached)])).toEqual([]);
    });

    it("memory: quiet where this stack's serving container runs (the memory is its own), and on a GPU with memory of its own", () => {
        const held = { meminfo: meminfo({ MemAvailable: 10 * 1024 ** 2, MemFree: 5 * 1024 ** 2 }) };
        expect(hostChecks(defaults, [node("spark1", held)])).toHaveLength(1);
        expect(hostChecks(defaults, [node("spark1", held, true)])).toEqual([]);
        const discrete = node("spark1", held);
        expect(hostChecks(defaults, [{ ...discrete, facts: { ...discrete.facts, gpus: [{ index: 0, name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 }] } }])).toEqual([]);
    });

    it("oomGuard: neither a userspace OOM killer nor swap", () => {
        const bare = { oomGuards: [], meminfo: meminfo({ SwapTotal: 0 }) };
        const findings = hostChecks(defaults, [node("spark1", bare)]);
        expect(findings.map((finding) => finding.check)).toEqual(["oomGuard"]);
        expect(findings[0].message).toMatch(
            /^host check oomGuard: node spark1: no userspace OOM killer runs \(earlyoom, systemd-oomd or nohang\) and there is no swap \(SwapTotal 0\); expected one of them: .*wedge the whole host.*apt install earlyoom.*; or set vllm-fleet:hostChecks\.oomGuard to off$/,
        );
        // Either one is a guard.
        expect(hostChecks(defaults, [node("spark1", { oomGuards: [] })])).toEqual([]);
        expect(hostChecks(defaults, [node("spark1", { meminfo: meminfo({ SwapTotal: 0 }) })])).toEqual([]);
        expect(hostChecks(defaults, [node("spark1", { oomGuards: ["systemd-oomd"], meminfo: meminfo({ SwapTotal: 0 }) })])).toEqual([]);
    });

    it("a check set to refuse refuses, set to off says nothing; the others keep their own setting", () => {
        const trips = node("spark2", { mtu: 1500, oomGuards: [], meminfo: meminfo({ SwapTotal: 0 }) });
        const refuse = withKeys({ hostChecks: { mtu: "refuse" } });
        expect(() => enforceHostChecks(refuse, [trips])).toThrow(/host check mtu: node spark2: .*; or set vllm-fleet:hostChecks\.mtu to warn or off/);
        expect(() => enforceHostChecks(refuse, [trips])).not.toThrow(/host check oomGuard/);
        expect(enforceHostChecks(withKeys({ hostChecks: { mtu: "off" } }), [trips])).toEqual([expect.stringMatching(/^host check oomGuard: node spark2/)]);
    });
});

describe("on the proving ground's stand-in nvidia-smi (test/sim/node/nvidia-smi)", () => {
    /** The probe's two nvidia-smi sections as the stand-in prints them, with /etc/sim/driver-version holding `driver`. */
    function standInProbe(driver?: string): string {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sim-smi-"));
        try {
            fs.writeFileSync(path.join(dir, "gpus"), "1\n");
            if (driver) {
                fs.writeFileSync(path.join(dir, "driver-version"), `${driver}\n`);
            }
            const env = { ...process.env, SIM_GPUS_FILE: path.join(dir, "gpus"), SIM_DRIVER_VERSION_FILE: path.join(dir, "driver-version") };
            const smi = (...args: string[]) => execFileSync("bash", [path.join(__dirname, "..", "sim", "node", "nvidia-smi"), ...args], { encoding: "utf8", env });
            const query = smi("--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits");
            const table = smi().split("\n").slice(0, 12).join("\n");
            return sparkProbeOutput("192.168.200.12", "10.1.230.180", { gpuQuery: query, smi: table });
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
    const simNode = (driver?: string): HostCheckNode => ({ name: "sim-spark1", facts: parseProbeOutput(standInProbe(driver)), fabricInterface: "enp1s0f1np1", servingAlive: false });

    it("shows the Spark's 580 by default: quiet", () => {
        expect(simNode().facts.driverVersion).toBe("580.126.09");
        expect(hostChecks(defaults, [simNode()])).toEqual([]);
    });

    it("shows what /etc/sim/driver-version says: 590 on its GB10 is refused", () => {
        const node590 = simNode("590.44.01");
        expect(node590.facts.gpus.map((gpu) => gpu.name)).toEqual(["NVIDIA GB10"]);
        expect(() => enforceHostChecks(defaults, [node590])).toThrow(/host check driver: node sim-spark1: NVIDIA driver 590\.44\.01 on NVIDIA GB10 is known bad/);
    });
});

describe("the keys", () => {
    it("default to warn, but refuse for a known-bad driver and for memory vLLM would refuse; hostPrep is off", () => {
        expect(defaults.hostChecks).toEqual({ mtu: "warn", rails: "warn", driver: "refuse", memory: "refuse", pageCache: "warn", oomGuard: "warn" });
        expect(defaults.hostPrep).toEqual({ dropCaches: false });
        expect(withKeys({ hostChecks: { rails: "off" }, hostPrep: { dropCaches: true } })).toMatchObject({
            hostChecks: { mtu: "warn", rails: "off", driver: "refuse" },
            hostPrep: { dropCaches: true },
        });
    });

    /** The message of the ConfigError `keys` get. */
    function errorOf(keys: Record<string, unknown>): string {
        return configErrorOf(keys, withKeys).message;
    }

    it("refuse a policy that is none of warn, refuse, off, naming the key", () => {
        expect(errorOf({ hostChecks: { mtu: "loud" } })).toMatch(/vllm-fleet:hostChecks\.mtu: got "loud"; expected one of "warn", "refuse", "off"/);
    });

    it("refuse a check they do not know, with the nearest one", () => {
        expect(errorOf({ hostChecks: { railz: "off" } })).toMatch(/vllm-fleet:hostChecks\.railz.*rails/);
    });

    it("refuse a hostPrep.dropCaches that is not a boolean, and a hostPrep key they do not know", () => {
        expect(errorOf({ hostPrep: { dropCaches: "yes" } })).toMatch(/vllm-fleet:hostPrep\.dropCaches: got "yes"; expected true or false/);
        expect(errorOf({ hostPrep: { dropCache: true } })).toMatch(/vllm-fleet:hostPrep\.dropCache.*dropCaches/);
    });
});

describe("the program (mocks)", () => {
    const ips: Record<string, [string, string]> = { spark1: ["192.168.200.12", "10.1.230.180"], spark2: ["192.168.200.13", "10.1.230.181"] };
    const duo = { ...sparkDuo, containerDriver: "ssh", commandRunner: "builtin" };
    const badDriverOnSpark2 = (name: string) => sparkProbeOutput(...ips[name], name === "spark2" ? { smi: smi590 } : {});

    it("refuses a known-bad driver at preview, before anything that reaches a host is registered", async () => {
        const failure = await runProgram(duo, badDriverOnSpark2).then(
            () => undefined,
            (error: unknown) => error,
        );
        expect(failure).toBeInstanceOf(Error);
        expect((failure as Error).message).toMatch(/host check driver: node spark2: NVIDIA driver 590\.44\.01 on NVIDIA GB10 is known bad/);
        // Only the stack's secrets (made on this machine) came before the read of the nodes.
        const registered = registeredBefore(failure);
        expect(registered.length).toBeGreaterThan(0);
        expect(registered.every((resource) => resource.startsWith("pulumi-nodejs:dynamic/secret:FleetSecret::") || resource.startsWith("pulumi:pulumi:Stack::"))).toBe(true);
    });

    it("goes on with the warning when the check is set to warn", async () => {
        const warned: string[] = [];
        const spy = vi.spyOn(console, "warn").mockImplementation((message: unknown) => {
            warned.push(String(message));
        });
        try {
            // 590 on both nodes: preflight refuses driver majors that differ across the nodes.
            const run = await runProgram({ ...duo, hostChecks: { driver: "warn" } }, (name) => sparkProbeOutput(...ips[name], { smi: smi590 }));
            expect(run.resources.some((resource) => resource.type === "vllm-fleet:vllm:VllmService")).toBe(true);
        } finally {
            spy.mockRestore();
        }
        expect(warned.filter((line) => line.includes("host check"))).toEqual([
            expect.stringMatching(/^warning: \[runtime\] host check driver: node spark1: NVIDIA driver 590\.44\.01/),
            expect.stringMatching(/^warning: \[runtime\] host check driver: node spark2: NVIDIA driver 590\.44\.01/),
        ]);
    });

    it("judges the memory of a node before the first deployment, not where this stack's serving container already holds it", async () => {
        const low = (name: string) => sparkProbeOutput(...ips[name], { meminfo: meminfo({ MemAvailable: 20 * 1024 ** 2, MemFree: 18 * 1024 ** 2 }) });
        const memoryWarnings = async (live?: (name: string) => string) => {
            const warned: string[] = [];
            const spy = vi.spyOn(console, "warn").mockImplementation((message: unknown) => {
                warned.push(String(message));
            });
            try {
                await runProgram({ ...duo, hostChecks: { memory: "warn" } }, low, undefined, live);
            } finally {
                spy.mockRestore();
            }
            return warned.filter((line) => line.includes("host check memory")).map((line) => /node (\S+):/.exec(line)?.[1]);
        };
        expect(await memoryWarnings()).toEqual(["spark1", "spark2"]);
        const deployed = await runProgram(duo, (name) => sparkProbeOutput(...ips[name]));
        expect(await memoryWarnings(liveAfter(deployed))).toEqual([]);
        // By default the check refuses what vLLM itself would refuse: before any container, naming the fit.
        await expect(runProgram(duo, low)).rejects.toThrow(/host check memory: node spark1: MemAvailable is 20\.0 GiB.*at most 0\.16 fits/);
        await expect(runProgram(duo, low, undefined, liveAfter(deployed))).resolves.toBeDefined();
    });
});
