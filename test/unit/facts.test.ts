import * as fs from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";
import {
    NodeFacts,
    PreflightError,
    fabricHcas,
    findFabric,
    parseGpuQuery,
    parseIbdev2netdev,
    parseIpAddr,
    parseProbeOutput,
    parseRdmaDevices,
    parseSmiHeader,
    preflight,
    usableMemoryBytes,
} from "../../infra/facts";

const fixture = (name: string) => fs.readFileSync(path.join(__dirname, "..", "fixtures", name), "utf8");

// A management interface as the seeds' Sparks had (10.1.230.x) beside the fabric one of the fixture.
const mgmtIpAddr = `2: enP7s7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 1000
    inet 10.1.230.180/24 brd 10.1.230.255 scope global dynamic enP7s7
`;

function sparkProbe(overrides: { image?: string; ipAddr?: string; model?: string; smi?: string } = {}): string {
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
        "### image",
        overrides.image ?? "sha256:1111111111111111111111111111111111111111111111111111111111111111",
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
            { name: "enP7s7", up: true, addresses: [{ ip: "10.1.230.180", prefix: 24 }] },
            { name: "enp1s0f1np1", up: true, addresses: [{ ip: "192.168.100.10", prefix: 24 }] },
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
        expect(findFabric("spark1", facts, "192.168.100.0/24")).toEqual({
            interface: "enp1s0f1np1",
            ip: "192.168.100.10",
            hcas: ["roceP2p1s0f1", "rocep1s0f1"],
            rdmaDevices: ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"],
        });
    });

    it("names the node and lists what it has when nothing is in the subnet", () => {
        expect(() => findFabric("spark1", facts, "192.168.200.0/24")).toThrow(
            "node spark1: no interface has an address in the fabric subnet 192.168.200.0/24; it has: enP7s7 10.1.230.180/24; enp1s0f1np1 192.168.100.10/24",
        );
    });

    it("refuses two addresses in the subnet, as launch-cluster.sh does", () => {
        const twice = parseProbeOutput(
            sparkProbe({ ipAddr: fixture("ip-addr-spark-fabric.txt") + "5: enP2p1s0f1np1: <UP> mtu 1500\n    inet 192.168.100.11/24 scope global\n" }),
        );
        expect(() => findFabric("spark2", twice, "192.168.100.0/24")).toThrow(/node spark2: more than one address.*enp1s0f1np1 192\.168\.100\.10, enP2p1s0f1np1 192\.168\.100\.11/);
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

    it("names the nodes whose image ids differ", () => {
        const other = parseProbeOutput(sparkProbe({ image: `sha256:${"2".repeat(64)}` }));
        expect(failure([{ name: "spark1", facts: good }, { name: "spark2", facts: other }])).toContain(
            "image vllm:test differs across nodes: spark1 have 111111111111; spark2 have 222222222222",
        );
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
