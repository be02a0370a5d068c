import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { PreflightError } from "../../infra/core/errors";
import { fabricHcas, findFabric } from "../../infra/core/fabric";
import { readScript } from "../../components/shell";
import {
    NodeFacts,
    parseGpuQuery,
    parseIbdev2netdev,
    parseIpAddr,
    parseLinks,
    parseMeminfo,
    parseOomGuards,
    parseProbeOutput,
    parseRdmaDevices,
    parseSmiHeader,
} from "../../infra/core/facts";
import { usableMemoryBytes } from "../../infra/core/fit";
import { parseCidr } from "../../infra/core/net";
import { preflight } from "../../infra/core/preflight";

/** A fabric subnet as the config holds it: parsed once. */
const cidr = (text: string) => parseCidr(text)!;

const fixture = (name: string) => fs.readFileSync(path.join(__dirname, "..", "fixtures", name), "utf8");

// A management interface as the seeds' Sparks had (10.1.230.x) beside the fabric one of the fixture.
const mgmtIpAddr = `2: enP7s7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 1000
    inet 10.1.230.180/24 brd 10.1.230.255 scope global dynamic enP7s7
`;

function sparkProbe(overrides: { image?: string; store?: string; ipAddr?: string; model?: string; smi?: string } = {}): string {
    return [
        "### hostname",
        "spark-a",
        "### nvidia-smi-query",
        fixture("nvidia-smi-query-gb10.csv"),
        "### nvidia-smi",
        overrides.smi ?? fixture("nvidia-smi-gb10.txt"),
        "### meminfo",
        "MemTotal:       124571956 kB",
        "MemAvailable:   119000000 kB",
        "### ip-addr",
        overrides.ipAddr ?? mgmtIpAddr + fixture("ip-addr-spark-fabric.txt"),
        "### ibdev2netdev",
        fixture("ibdev2netdev-spark.txt"),
        "### rdma-devices",
        "/dev/infiniband/uverbs1\n/dev/infiniband/rdma_cm\n/dev/infiniband/uverbs0",
        "### docker",
        "28.3.3",
        "### docker-store",
        overrides.store ?? "overlay2\nBacking Filesystem=extfs\nSupports d_type=true\nUsing metacopy=false\nNative Overlay Diff=true\nuserxattr=false",
        "### image",
        overrides.image ?? `identity sha256:${"1".repeat(64)}\nid sha256:${"9".repeat(64)}`,
        "### model",
        overrides.model ?? "exists yes\nconfig-sha256 abc123\n4096 config.json\n61000000000 model-00001-of-00002.safetensors\n60000000000 model-00002-of-00002.safetensors",
        "",
    ].join("\n");
}

describe("parsers, on outputs of real DGX Sparks", () => {
    it("reads GB10's [N/A] memory as unknown", () => {
        expect(parseGpuQuery(fixture("nvidia-smi-query-gb10.csv"))).toEqual([{ index: 0, name: "NVIDIA GB10", memoryMiB: undefined }]);
    });

    it("reads a GPU that does report its memory", () => {
        expect(parseGpuQuery("0, NVIDIA H100 80GB HBM3, 81559\n1, NVIDIA H100 80GB HBM3, 81559")).toEqual([
            { index: 0, name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 },
            { index: 1, name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 },
        ]);
    });

    it("reads driver and CUDA versions from the nvidia-smi header", () => {
        expect(parseSmiHeader(fixture("nvidia-smi-gb10.txt"))).toEqual({ driverVersion: "580.126.09", cudaVersion: "13.0" });
    });

    it("reads both RoCE ports of one cable as Up", () => {
        const hcas = parseIbdev2netdev(fixture("ibdev2netdev-spark.txt"));
        expect(hcas).toHaveLength(4);
        expect(hcas.filter((hca) => hca.up).map((hca) => `${hca.device}>${hca.netdev}`)).toEqual([
            "roceP2p1s0f1>enP2p1s0f1np1",
            "rocep1s0f1>enp1s0f1np1",
        ]);
    });

    it("reads interfaces and their IPv4 addresses", () => {
        expect(parseIpAddr(mgmtIpAddr + fixture("ip-addr-spark-fabric.txt"))).toEqual([
            { name: "enP7s7", up: true, mtu: 1500, addresses: [{ ip: "10.1.230.180", prefix: 24 }] },
            { name: "enp1s0f1np1", up: true, mtu: 1500, addresses: [{ ip: "192.168.100.10", prefix: 24 }] },
        ]);
    });

    it("assembles the facts of a whole probe", () => {
        const facts = parseProbeOutput(sparkProbe());
        expect(facts.hostname).toBe("spark-a");
        expect(facts.gpus).toHaveLength(1);
        expect(facts.memTotalBytes).toBe(124571956 * 1024);
        expect(facts.dockerVersion).toBe("28.3.3");
        expect(facts.model.exists).toBe(true);
        expect(facts.model.totalBytes).toBe(121_000_004_096);
        expect(facts.model.files.map((file) => file.name)).toEqual([
            "config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ]);
        expect(facts.model.configSha256).toBe("abc123");
    });
});

describe("what the host checks read", () => {
    it("reads MemFree, Cached and SwapTotal beside MemTotal and MemAvailable, and leaves out what is not there", () => {
        const meminfo = "MemTotal:       124571956 kB\nMemFree:         3000000 kB\nMemAvailable:   110000000 kB\nBuffers:          100 kB\nCached:         105000000 kB\nSwapCached:  0 kB\nSwapTotal:             0 kB";
        expect(parseMeminfo(meminfo)).toEqual({
            memTotalBytes: 124571956 * 1024,
            memAvailableBytes: 110000000 * 1024,
            memFreeBytes: 3000000 * 1024,
            cachedBytes: 105000000 * 1024,
            swapTotalBytes: 0,
        });
        expect(parseMeminfo("MemTotal:       124571956 kB\nMemAvailable:   119000000 kB")).toEqual({ memTotalBytes: 124571956 * 1024, memAvailableBytes: 119000000 * 1024 });
    });

    it("reads each link's MTU and operstate, and the OOM killers by name only", () => {
        expect(parseLinks("enp1s0f1np1 9000 up\nenP2p1s0f1np1 1500 lowerlayerdown\ngarbage\nlo 65536 unknown")).toEqual([
            { name: "enp1s0f1np1", mtu: 9000, operstate: "up" },
            { name: "enP2p1s0f1np1", mtu: 1500, operstate: "lowerlayerdown" },
            { name: "lo", mtu: 65536, operstate: "unknown" },
        ]);
        expect(parseOomGuards("systemd-oomd\nearlyoom-helper\nearlyoom\n")).toEqual(["earlyoom", "systemd-oomd"]);
        expect(parseOomGuards("")).toEqual([]);
    });

    it("knows a probe without the sections from one that found nothing", () => {
        const older = parseProbeOutput(sparkProbe());
        expect(older.links).toBeUndefined();
        expect(older.oomGuards).toBeUndefined();
        expect(older.swapTotalBytes).toBeUndefined();
        const none = parseProbeOutput(`${sparkProbe()}### links\n### oom-guard\n`);
        expect(none.links).toEqual([]);
        expect(none.oomGuards).toEqual([]);
    });

    it("gets them from probe.sh on this machine (read-only; no GPU, Docker or RoCE tools here)", () => {
        const bin = fs.mkdtempSync(path.join(os.tmpdir(), "probe-bin-"));
        try {
            // Stand-ins that fail as a host without the tool would: nothing else is run.
            for (const tool of ["nvidia-smi", "ibdev2netdev", "docker"]) {
                fs.writeFileSync(path.join(bin, tool), "#!/bin/sh\nexit 127\n", { mode: 0o755 });
            }
            const program = `list_model_dir() { echo "exists no"; }\nIMAGE=x\nMODEL_PATH=/nonexistent\n${readScript("image-identity")}\n${readScript("probe")}`;
            const output = execFileSync("bash", ["-c", program], { encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
            const facts = parseProbeOutput(output);
            const lo = facts.links?.find((link) => link.name === "lo");
            expect(lo?.mtu).toBeGreaterThan(0);
            expect(fs.readFileSync("/sys/class/net/lo/mtu", "utf8").trim()).toBe(String(lo?.mtu));
            expect(facts.memFreeBytes).toBeGreaterThan(0);
            expect(facts.swapTotalBytes).toBeGreaterThanOrEqual(0);
            expect(Array.isArray(facts.oomGuards)).toBe(true);
        } finally {
            fs.rmSync(bin, { recursive: true, force: true });
        }
    });
});

describe("RDMA facts", () => {
    it("lists the RDMA device nodes, sorted, and nothing else", () => {
        expect(parseRdmaDevices("/dev/infiniband/uverbs1\n/dev/infiniband/rdma_cm\nfind: '/dev/infiniband': No such file or directory\n\n/dev/sda")).toEqual([
            "/dev/infiniband/rdma_cm",
            "/dev/infiniband/uverbs1",
        ]);
        expect(parseRdmaDevices("")).toEqual([]);
    });

    const hcas = parseIbdev2netdev(fixture("ibdev2netdev-spark.txt"));
    const otherPortUp = parseIbdev2netdev(fixture("ibdev2netdev-spark.txt").replace("enp1s0f0np0 (Down)", "enp1s0f0np0 (Up)"));

    it("gives NCCL the fabric port's RoCE device and its twin on the same cable", () => {
        expect(fabricHcas(hcas, "enp1s0f1np1")).toEqual(["roceP2p1s0f1", "rocep1s0f1"]);
        expect(fabricHcas(hcas, "enP2p1s0f1np1")).toEqual(["roceP2p1s0f1", "rocep1s0f1"]);
    });

    it("leaves out the devices of ports cabled elsewhere, and a twin that is down", () => {
        expect(fabricHcas(otherPortUp, "enp1s0f1np1")).toEqual(["roceP2p1s0f1", "rocep1s0f1"]);
        expect(fabricHcas(otherPortUp, "enp1s0f0np0")).toEqual(["rocep1s0f0"]);
        const twinDown = parseIbdev2netdev("rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\nroceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Down)");
        expect(fabricHcas(twinDown, "enp1s0f1np1")).toEqual(["rocep1s0f1"]);
    });

    it("has none for a fabric interface without RoCE, e.g. a plain Ethernet port", () => {
        expect(fabricHcas(hcas, "enP7s7")).toEqual([]);
        expect(fabricHcas(parseIbdev2netdev("mlx5_0 port 1 ==> eth2 (Up)"), "eth2")).toEqual(["mlx5_0"]);
        expect(fabricHcas(parseIbdev2netdev("mlx5_0 port 1 ==> eth2 (Up)"), "eth3")).toEqual([]);
    });
});

describe("findFabric", () => {
    const facts = parseProbeOutput(sparkProbe());

    it("picks the interface in the fabric subnet, never the default route's", () => {
        expect(findFabric("spark1", facts, cidr("192.168.100.0/24"))).toEqual({
            interface: "enp1s0f1np1",
            ip: "192.168.100.10",
            hcas: ["roceP2p1s0f1", "rocep1s0f1"],
            rdmaDevices: ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"],
        });
    });

    it("names the node and lists what it has when nothing is in the subnet", () => {
        expect(() => findFabric("spark1", facts, cidr("192.168.200.0/24"))).toThrow(
            "node spark1: no interface has an address in the fabric subnet 192.168.200.0/24; it has: enP7s7 10.1.230.180/24; enp1s0f1np1 192.168.100.10/24",
        );
    });

    it("refuses two addresses in the subnet, as launch-cluster.sh does", () => {
        const twice = parseProbeOutput(
            sparkProbe({ ipAddr: fixture("ip-addr-spark-fabric.txt") + "5: enP2p1s0f1np1: <UP> mtu 1500\n    inet 192.168.100.11/24 scope global\n" }),
        );
        expect(() => findFabric("spark2", twice, cidr("192.168.100.0/24"))).toThrow(/node spark2: more than one address.*enp1s0f1np1 192\.168\.100\.10, enP2p1s0f1np1 192\.168\.100\.11/);
    });
});

describe("preflight", () => {
    const good = parseProbeOutput(sparkProbe());
    const options = { image: "vllm:test", modelPath: "/models/q", gpusNeeded: 2 };
    const failure = (nodes: { name: string; facts: NodeFacts }[], opts = options) => {
        try {
            preflight(nodes, opts);
        } catch (error) {
            expect(error).toBeInstanceOf(PreflightError);
            return (error as Error).message;
        }
        throw new Error("expected preflight to fail");
    };

    it("passes two matching Sparks", () => {
        expect(() => preflight([{ name: "spark1", facts: good }, { name: "spark2", facts: good }], options)).not.toThrow();
    });

    it("names the nodes whose images differ by content, and their image stores", () => {
        const other = parseProbeOutput(sparkProbe({ image: `identity sha256:${"2".repeat(64)}\nid sha256:${"9".repeat(64)}` }));
        expect(failure([{ name: "spark1", facts: good }, { name: "spark2", facts: other }])).toContain(
            "image vllm:test differs across nodes by content (its layers or its config, not Docker's image id): spark1 (classic store) have 111111111111; spark2 (classic store) have 222222222222",
        );
    });

    it("passes one image on a classic and a containerd node, whose Docker ids differ", () => {
        const containerd = parseProbeOutput(
            sparkProbe({ store: "overlayfs\ndriver-type=io.containerd.snapshotter.v1", image: `identity sha256:${"1".repeat(64)}\nid sha256:${"e".repeat(64)}` }),
        );
        expect(containerd.imageStore).toEqual({ kind: "containerd", driver: "overlayfs" });
        expect(good.imageStore).toEqual({ kind: "classic", driver: "overlay2" });
        expect(containerd.imageId).not.toBe(good.imageId);
        expect(() => preflight([{ name: "spark1", facts: good }, { name: "spark2", facts: containerd }], options)).not.toThrow();
    });

    it("checks an image pinned by digest against each node's registry digests (image.source present)", () => {
        const digest = `sha256:${"d".repeat(64)}`;
        const pinned = { ...options, image: `nvcr.io/nvidia/vllm:26.01-py3@${digest}` };
        const pulled = parseProbeOutput(sparkProbe({ image: `identity sha256:${"1".repeat(64)}\nid sha256:${"9".repeat(64)}\nrepo-digest nvcr.io/nvidia/vllm@${digest}` }));
        expect(pulled.imageRepoDigests).toEqual([`nvcr.io/nvidia/vllm@${digest}`]);
        expect(() => preflight([{ name: "spark1", facts: pulled }, { name: "spark2", facts: pulled }], pinned)).not.toThrow();
        // The name resolved to a local image (its config digest pinned, or a load) without that registry digest.
        const message = failure([{ name: "spark1", facts: pulled }, { name: "spark2", facts: good }], pinned);
        expect(message).toContain(`node spark2: image nvcr.io/nvidia/vllm:26.01-py3@${digest} is there, but not as registry digest dddddddddddd (it has no registry digest there: built or loaded, not pulled)`);
        expect(message).toMatch(/; expected the image pulled by that digest with vllm-fleet:image\.source present: pull it on the node \(docker pull .*\), or set vllm-fleet:image\.source to pull, or correct the digest in vllm-fleet:image\.name$/);
        expect(message).not.toContain("node spark1");
        // With pull, the pull step itself checks the digest (image-pull.sh).
        expect(() => preflight([{ name: "spark1", facts: pulled }, { name: "spark2", facts: good }], { ...pinned, imageSource: "pull" })).not.toThrow();
    });

    it("names a node without the image or the model", () => {
        const bare = parseProbeOutput(sparkProbe({ image: "", model: "exists no" }));
        const message = failure([{ name: "spark1", facts: good }, { name: "spark2", facts: bare }]);
        expect(message).toContain("node spark2: image vllm:test is not present");
        expect(message).toContain("node spark2: model directory /models/q does not exist");
    });

    it("names the node and the first file where its weights differ from node 0's", () => {
        const short = parseProbeOutput(
            sparkProbe({ model: "exists yes\nconfig-sha256 abc123\n4096 config.json\n61000000000 model-00001-of-00002.safetensors" }),
        );
        expect(failure([{ name: "spark1", facts: good }, { name: "spark2", facts: short }])).toContain(
            "node spark2: model directory /models/q differs from spark1's: model-00002-of-00002.safetensors is missing",
        );
        const truncated = parseProbeOutput(
            sparkProbe({ model: "exists yes\nconfig-sha256 abc123\n4096 config.json\n61000000000 model-00001-of-00002.safetensors\n100 model-00002-of-00002.safetensors" }),
        );
        expect(failure([{ name: "spark1", facts: good }, { name: "spark2", facts: truncated }])).toContain(
            "model-00002-of-00002.safetensors has 100 bytes, not 60000000000",
        );
        const otherConfig = parseProbeOutput(sparkProbe().replace("config-sha256 abc123", "config-sha256 fff"));
        expect(failure([{ name: "spark1", facts: good }, { name: "spark2", facts: otherConfig }])).toContain("config.json has other content");
    });

    it("counts GPUs across nodes against TP×PP", () => {
        expect(failure([{ name: "spark1", facts: good }])).toContain("TP×PP needs 2 GPUs but the nodes have 1 (spark1: 1)");
    });

    it("refuses mismatched driver major versions", () => {
        const older = parseProbeOutput(sparkProbe({ smi: "| NVIDIA-SMI 570.1   Driver Version: 570.1.2   CUDA Version: 12.8 |" }));
        const message = failure([{ name: "spark1", facts: good }, { name: "spark2", facts: older }]);
        expect(message).toContain("driver major versions differ across nodes: spark1 580.126.09, spark2 570.1.2");
        expect(message).toContain("CUDA major versions differ across nodes: spark1 13.0, spark2 12.8");
    });
});

describe("every refusal from the nodes' facts says what was expected and what to change", () => {
    const good = parseProbeOutput(sparkProbe());
    const withFacts = (change: Partial<NodeFacts>): NodeFacts => ({ ...good, ...change });
    const fabricIpAddr = fixture("ip-addr-spark-fabric.txt");
    /** The one line of preflight's message about `fact`. */
    const lineOf = (run: () => void, fact: RegExp): string => {
        try {
            run();
        } catch (error) {
            expect(error).toBeInstanceOf(PreflightError);
            const line = (error as Error).message.split("\n").find((candidate) => fact.test(candidate));
            expect(line, `no line matches ${fact} in: ${(error as Error).message}`).toBeDefined();
            return line!;
        }
        throw new Error("expected a refusal");
    };
    const base = { image: "vllm:test", modelPath: "/models/q", gpusNeeded: 2 };
    const two = (spark2: NodeFacts, spark1: NodeFacts = good) => [
        { name: "spark1", facts: spark1 },
        { name: "spark2", facts: spark2 },
    ];

    it.each<[string, () => void, RegExp, RegExp]>([
        [
            "no address in the fabric subnet",
            () => findFabric("spark1", good, cidr("192.168.200.0/24")),
            /no interface has an address in the fabric subnet/,
            /; expected one address in it on every node: set vllm-fleet:fabric\.subnet to the subnet of the nodes' fabric link, or give this node's fabric interface an address in 192\.168\.200\.0\/24$/,
        ],
        [
            "two addresses in the fabric subnet",
            () => findFabric("spark2", parseProbeOutput(sparkProbe({ ipAddr: fabricIpAddr + "5: enP2p1s0f1np1: <UP> mtu 1500\n    inet 192.168.100.11/24 scope global\n" })), cidr("192.168.100.0/24")),
            /more than one address in the fabric subnet/,
            /; expected one per node: remove the others on the node, or set vllm-fleet:fabric\.subnet to a block that holds one address of each node$/,
        ],
        [
            "a fabric interface that is down (the fix is on the node)",
            () => findFabric("spark2", parseProbeOutput(sparkProbe({ ipAddr: fabricIpAddr.replace("<BROADCAST,MULTICAST,UP,LOWER_UP>", "<NO-CARRIER,BROADCAST,MULTICAST>") })), cidr("192.168.100.0/24")),
            /^node spark2: fabric interface enp1s0f1np1 \(192\.168\.100\.10\) is down/,
            /is down; the fix is on the node: bring it up \(ip link set enp1s0f1np1 up\) and check its cable$/,
        ],
        ["Docker not answering (the fix is on the node)", () => preflight(two(withFacts({ dockerVersion: undefined })), base), /^  - node spark2: Docker does not answer/, /; the fix is on the node: start Docker there \(systemctl start docker\), or add the SSH user to the docker group$/],
        [
            "an image missing with image.source present",
            () => preflight(two(withFacts({ imageIdentity: undefined })), base),
            /node spark2: image vllm:test is not present/,
            /; expected it there with vllm-fleet:image\.source present: pull or load it on the node, or set vllm-fleet:image\.source to pull \(every node pulls vllm-fleet:image\.name\) or copy \(the first node's, to the others\)$/,
        ],
        [
            "an image missing on the node image.source copy copies from",
            () => preflight(two(good, withFacts({ imageIdentity: undefined })), { ...base, imageSource: "copy" }),
            /node spark1: image vllm:test is not present/,
            /; expected it on the first node, which vllm-fleet:image\.source copy copies from: pull or load it there, or set vllm-fleet:image\.source to pull$/,
        ],
        ["an image missing after image.source pull", () => preflight(two(withFacts({ imageIdentity: undefined })), { ...base, imageSource: "pull" }), /node spark2: image vllm:test is not present/, /; expected it delivered by vllm-fleet:image\.source pull: check vllm-fleet:image\.name$/],
        [
            "images that differ (image.source present)",
            () => preflight(two(withFacts({ imageIdentity: `sha256:${"2".repeat(64)}` })), base),
            /image vllm:test differs across nodes by content \(its layers or its config, not Docker's image id\): spark1 \(classic store\) have 111111111111; spark2 \(classic store\) have 222222222222/,
            /; expected the same image on every node: set vllm-fleet:image\.source to copy \(the first node's, to the others\), or to pull with vllm-fleet:image\.name pinned by digest \(name@sha256:\.\.\.\)$/,
        ],
        [
            "images that differ after image.source pull (the tag moved between pulls)",
            () => preflight(two(withFacts({ imageIdentity: `sha256:${"2".repeat(64)}` })), { ...base, imageSource: "pull" }),
            /differs across nodes/,
            /; expected the same image on every node: pin vllm-fleet:image\.name by digest \(name@sha256:\.\.\.\) so that every node pulls the same image, or set vllm-fleet:image\.source to copy/,
        ],
        ["no model directory on the first node", () => preflight(two(good, withFacts({ model: { ...good.model, exists: false } })), base), /node spark1: model directory \/models\/q does not exist/, /; expected the model's directory there: set vllm-fleet:model\.path to where its config\.json and \*\.safetensors are$/],
        [
            "no model directory on another node, model.sync none",
            () => preflight(two(withFacts({ model: { ...good.model, exists: false } })), base),
            /node spark2: model directory \/models\/q does not exist/,
            /; expected a copy on every node with vllm-fleet:model\.sync none: copy it there, or set vllm-fleet:model\.sync to rsync \(spark1's, over the fabric\), or correct vllm-fleet:model\.path$/,
        ],
        ["a model directory without config.json", () => preflight(two(withFacts({ model: { ...good.model, files: good.model.files.filter((file) => file.name !== "config.json") } })), base), /has no config\.json/, /; expected a Hugging Face model's directory \(config\.json and \*\.safetensors\): set vllm-fleet:model\.path to it$/],
        [
            "model directories that differ, model.sync none",
            () => preflight(two(withFacts({ model: { ...good.model, configSha256: "fff" } })), base),
            /differs from spark1's: config\.json has other content/,
            /; expected the same files as spark1's: set vllm-fleet:model\.sync to rsync \(spark1's copied to the others\), or make the copies equal$/,
        ],
        ["model directories that differ after model.sync rsync", () => preflight(two(withFacts({ model: { ...good.model, configSha256: "fff" } })), { ...base, modelSync: "rsync" }), /differs from spark1's/, /; expected the same files as spark1's: run up again \(vllm-fleet:model\.sync rsync copies spark1's again\)$/],
        [
            "fewer GPUs than TP×PP",
            () => preflight(two(good), { ...base, gpusNeeded: 3 }),
            /TP×PP needs 3 GPUs but the nodes have 2 \(spark1: 1, spark2: 1\)/,
            /; expected at most 2 \(the GPUs of the nodes\): set vllm-fleet:parallelism\.tensor × vllm-fleet:parallelism\.pipeline to 2 or less, or add nodes to vllm-fleet:nodes$/,
        ],
        [
            "a node that shows no GPU",
            () => preflight(two(withFacts({ gpus: [] })), base),
            /needs 2 GPUs but the nodes have 1 \(spark1: 1, spark2: 0\)/,
            /or add nodes to vllm-fleet:nodes \(spark2 shows no GPU: check the driver there, nvidia-smi\)$/,
        ],
        ["driver versions that differ (the fix is on the nodes)", () => preflight(two(withFacts({ driverVersion: "570.1.2" })), base), /driver major versions differ/, /; expected one on every node; the fix is on the nodes: install the same NVIDIA driver release on each$/],
    ])("%s", (_what, run, fact, remedy) => {
        const line = lineOf(run, fact);
        expect(line).toMatch(remedy);
    });
});

describe("usableMemoryBytes", () => {
    it("uses MemTotal less the OS reserve on GB10's unified memory", () => {
        const facts = parseProbeOutput(sparkProbe());
        expect(usableMemoryBytes(facts, 0.9)).toBe(Math.floor((124571956 * 1024 - 8 * 1024 ** 3) * 0.9));
    });

    it("uses the GPU's own memory where the driver reports it", () => {
        const facts = parseProbeOutput(sparkProbe().replace("0, NVIDIA GB10, [N/A], [N/A], [N/A]", "0, NVIDIA H100, 81559"));
        expect(usableMemoryBytes(facts, 0.5)).toBe(Math.floor(81559 * 1024 ** 2 * 0.5));
    });
});
