/**
 * End to end on simulated Sparks: what the stand-ins used to let through.
 * - Nodes whose fabric interfaces have different names serve with the ray executor, each rank on its
 *   own node's interface (vLLM would otherwise copy the head's NCCL_SOCKET_IFNAME to every worker).
 * - A node without the RDMA device nodes: NCCL falls back to TCP sockets there, which is refused by
 *   default, naming the node, and served with a warning when the config accepts it.
 * - Serve arguments the image's vLLM refuses stop `up` before any Ray or vLLM container starts, with
 *   vLLM's own message and the config key.
 * - A fabric interface at MTU 1500 is named at preview by the host check of the MTU
 *   (infra/core/hostChecks.ts), with its key; the nodes at 9000 are not.
 * Real SSH, Docker and Ray; the GPU, the fabric link (and its RDMA devices) and vLLM are stand-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "@pulumi/pulumi/automation";
import { SIM_VLLM, SimCluster, complete, failureOf, onNode, simDeployment, tearDown } from "./simCluster";

/** Every container of the stack on every node (none after a refusal). */
function stackContainers(cluster: SimCluster, stack: string): string[] {
    return cluster.nodes.flatMap((node) =>
        onNode(node, `docker ps -a --filter label=vllm-fleet.stack=${stack} --format '{{.Names}}' 2>/dev/null || true`)
            .split("\n")
            .filter((line) => line !== ""),
    );
}

describe("three nodes whose fabric interfaces have different names (ray executor)", () => {
    const name = "e2e-ifaces";
    const ifaces = ["enp1s0f1np1", "enP2p1s0f1np1", "enp1s0f0np0"];
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, 3, { parallelism: { tensor: 3 } }, { fabricIfaces: ifaces }));
    });

    afterAll(async () => {
        await tearDown({ stacks: [stack], cluster: name, workDir });
    });

    it("warns at preview about the node whose fabric runs at MTU 1500, with the key, and not about those at 9000", async () => {
        const mtus = cluster.nodes.map((node) => onNode(node, `cat /sys/class/net/${node.fabricIface}/mtu`).trim());
        try {
            cluster.nodes.forEach((node, index) => onNode(node, `ip link set ${node.fabricIface} mtu ${index === 1 ? 1500 : 9000}`));
            const preview = await stack.preview();
            expect(preview.stdout).toMatch(/host check mtu: node spark2: fabric enP2p1s0f1np1 has MTU 1500; expected 9000 on the fabric/);
            expect(preview.stdout).toMatch(/ip link set enP2p1s0f1np1 mtu 9000 .*; or set vllm-fleet:hostChecks\.mtu to off/);
            expect(preview.stdout).not.toMatch(/host check mtu: node spark[13]:/);
        } finally {
            cluster.nodes.forEach((node, index) => onNode(node, `ip link set ${node.fabricIface} mtu ${mtus[index]}`));
        }
    });

    it("serves, every rank's NCCL on its own node's interface and over RoCE", async () => {
        expect(cluster.nodes.map((node) => node.fabricIface)).toEqual(ifaces);
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        const body = await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value);
        expect(body.vllm_fleet_ranks.map((rank) => rank.ip).sort()).toEqual(cluster.nodes.map((node) => node.fabricIp).sort());
        expect(up.outputs.fabricTransport.value).toEqual({ spark1: "IB", spark2: "IB", spark3: "IB" });
        for (const node of cluster.nodes) {
            // The rank's own NCCL lines, in the Ray worker logs of its node.
            const log = onNode(node, "docker exec vllm-fleet-ray sh -c 'cat /tmp/ray/session_latest/logs/worker-*.out' 2>/dev/null || true");
            expect(log).toContain(`:1/RoCE [RO]; OOB ${node.fabricIface}:${node.fabricIp}<0>`);
            expect(log).not.toMatch(/Overwriting environment variable (NCCL_SOCKET_IFNAME|GLOO_SOCKET_IFNAME|NCCL_IB_HCA|VLLM_HOST_IP)/);
        }
        // vLLM's own exclusion list names the node-specific variables.
        const list = JSON.parse(onNode(cluster.nodes[0], "docker exec vllm-fleet-ray sh -c 'cat \"$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json\"'"));
        expect(list).toEqual(expect.arrayContaining(["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA"]));
    });

    it("would have failed without vLLM's exclusion list: the workers get the head's interface", () => {
        // The same vLLM stand-in, started by hand in place of the running one (the watchdog held
        // still) with the list emptied: the head's NCCL_SOCKET_IFNAME is copied to the workers,
        // whose nodes have no such interface.
        const head = cluster.nodes[0];
        onNode(head, "docker pause vllm-fleet-watchdog >/dev/null; docker exec vllm-fleet-ray pkill -f 'vllm serve'; sleep 5");
        const output = onNode(
            head,
            "docker exec vllm-fleet-ray sh -c 'mkdir -p /tmp/no-list && echo [] > /tmp/no-list/ray_non_carry_over_env_vars.json && " +
                "VLLM_CONFIG_ROOT=/tmp/no-list VLLM_SIM_STARTUP_TIMEOUT=30 timeout 120 vllm serve /models/tiny-moe --port 8011 --tensor-parallel-size 3 " +
                "--distributed-executor-backend ray 2>&1; echo exit=$?' || true",
        );
        expect(output).toMatch(/NCCL error/);
        expect(output).toMatch(/exit=[1-9]/);
        // On each worker's node, in its Ray worker log: the head's interface overwrote its own.
        for (const node of cluster.nodes.slice(1)) {
            const log = onNode(node, "docker exec vllm-fleet-ray sh -c 'cat /tmp/ray/session_latest/logs/worker-*.out' 2>/dev/null || true");
            expect(log).toContain(`Overwriting environment variable NCCL_SOCKET_IFNAME from '${node.fabricIface}' to 'enp1s0f1np1'`);
        }
    });
});

describe("a node without RDMA device nodes, and serve arguments the image's vLLM refuses (mp executor)", () => {
    const name = "e2e-nordma";
    let cluster: SimCluster;
    let stack: Stack;
    let workDir: string;

    beforeAll(async () => {
        ({ cluster, stack, workDir } = await simDeployment(name, 2, { executor: "mp", parallelism: { tensor: 2 } }, { noRdma: [1] }));
    });

    afterAll(async () => {
        await tearDown({ stacks: [stack], cluster: name, workDir });
    });

    it("warns at preview that spark2's NCCL will fall back to TCP", async () => {
        expect(cluster.nodes.map((node) => node.rdma)).toEqual([true, false]);
        const preview = await stack.preview();
        expect(preview.stdout).toMatch(/node spark2: RoCE devices .* but no RDMA device nodes in \/dev\/infiniband/);
        expect(preview.stdout).not.toMatch(/node spark1: RoCE devices/);
    });

    it("refuses by default once NCCL chose TCP sockets there, naming the node and the cause", async () => {
        const message = await failureOf(stack.up());
        expect(message).toMatch(/node spark2: NCCL uses TCP sockets \(NET\/Socket\), not RoCE \(NET\/IB\): the node shows RoCE devices .* but no RDMA device nodes/);
        expect(message).not.toMatch(/node spark1: NCCL uses TCP/);
    });

    it("serves with a warning when the config accepts TCP, and outputs the transport per node", async () => {
        await stack.setConfig("vllm-fleet:fabric", { value: JSON.stringify({ subnet: cluster.fabricSubnet, socketTransport: "warn" }) });
        const up = await stack.up();
        expect(up.summary.result).toBe("succeeded");
        expect(up.outputs.fabricTransport.value).toEqual({ spark1: "IB", spark2: "Socket" });
        expect(up.stdout).toMatch(/node spark2: NCCL uses TCP sockets \(NET\/Socket\) over the fabric/);
        await complete(up.outputs.endpoint.value, "tiny-moe", up.outputs.apiKey.value);
        await stack.destroy();
    });

    const refused: [string, Record<string, unknown>, RegExp][] = [
        // The stand-in is vLLM 0.17.1, which has no --disable-log-requests yet (0.33 has).
        ["a flag this vLLM does not have", { extraArgs: ["--disable-log-requests"] }, /unrecognized arguments: --disable-log-requests \(config: vllm\.extraArgs\)/],
        ["a misspelled reasoning parser", { reasoningParser: "qwen4" }, /qwen4.*\(config: vllm\.reasoningParser\)/],
        ["a misspelled tool-call parser", { toolCallParser: "hermess", enableAutoToolChoice: true }, /hermess.*\(config: vllm\.toolCallParser\)/],
    ];

    it.each(refused)("refuses %s before any container starts, with vLLM's message and the key", async (_what, vllm, message) => {
        await stack.setConfig("vllm-fleet:vllm", { value: JSON.stringify({ ...SIM_VLLM, ...vllm }) });
        const failure = await failureOf(stack.up());
        expect(failure).toMatch(/the vLLM in \S+ refuses the serve arguments/);
        expect(failure).toMatch(message);
        expect(stackContainers(cluster, name)).toEqual([]);
    });
});
