/**
 * The copies over the fabric between two simulated nodes, measured before the rounds while the
 * smallest cluster is alone on the machine: raw TCP, `docker save` and `docker load` alone, the image
 * copy through this machine (the way before), the image copy and the weight sync with the product's
 * scripts, and the image bytes that crossed this machine. The figures and targets: ./fabricTargets.ts.
 */
import { execFile, execFileSync } from "child_process";
import * as crypto from "crypto";
import { promisify } from "util";
import { readScript, scriptProgram } from "../../components/shell";
import { IMAGE_COPY_PORT, RSYNC_PORT, WEIGHT_FILES_PORT } from "../../infra/core/names";
import { WEIGHTS_CLOSE, WEIGHTS_RECEIVE, WEIGHT_STREAMS } from "../../components/weightSync";
import { SimCluster } from "../e2e/simCluster";
import { FabricThroughput, Transfer, fabricTargets, mibPerSecond } from "./fabricTargets";
import { log } from "./log";
import { overSsh, sshArgs } from "./ssh";

/** The transfer of median throughput (an odd count: the middle one). */
function medianTransfer<T extends Transfer>(transfers: T[]): T {
    return [...transfers].sort((a, b) => mibPerSecond(a) - mibPerSecond(b))[Math.floor(transfers.length / 2)];
}

/** Plain TCP over the fabric: one python3 socket stream of zeros, 1 MiB writes, timed by the receiver. */
const RAW_TCP = `
import socket, sys, time
mode, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
chunk = memoryview(bytearray(1 << 20))
if mode == "receive":
    server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); server.bind((ip, port)); server.listen(1)
    print("listening", flush=True)
    conn, _ = server.accept(); total = 0; start = time.monotonic()
    while True:
        count = conn.recv_into(chunk)
        if not count: break
        total += count
    print(total, time.monotonic() - start)
else:
    total = int(sys.argv[4]); conn = socket.create_connection((ip, port)); sent = 0
    while sent < total:
        conn.sendall(chunk); sent += len(chunk)
    conn.shutdown(socket.SHUT_WR); conn.recv(1)
`;

const execAsync = promisify(execFile);

async function inNode(name: string, command: string): Promise<string> {
    return (await execAsync("docker", ["exec", name, "bash", "-c", command], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024, timeout: 600_000 })).stdout;
}

/** Seconds a shell command takes, run on this machine; throws when it fails. */
async function timed(command: string): Promise<number> {
    const start = process.hrtime.bigint();
    await execAsync("bash", ["-o", "pipefail", "-c", command], { maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
    return Number(process.hrtime.bigint() - start) / 1e9;
}

function txBytes(node: string, iface: string): number {
    return Number(execFileSync("docker", ["exec", node, "cat", `/sys/class/net/${iface}/statistics/tx_bytes`], { encoding: "utf8" }).trim());
}

/**
 * The copies over the fabric between the first two nodes: raw TCP (the limit), `docker save` and
 * `docker load` alone (the image copy's other limits), the image copy through this machine as it
 * was done before, the image copy and the weight sync with the product's own scripts, started over
 * SSH as the builtin runner starts them; and the bytes of the image copy that crossed this machine.
 */
export async function measureFabric(cluster: SimCluster): Promise<FabricThroughput> {
    const [source, target] = cluster.nodes;
    const image = cluster.workloadImage;
    // Raw TCP and the weight sync take turns, 5 times each, so that the machine's drift hits both alike.
    log("fabric: raw TCP and the weight sync, in turns (2 GiB each: 16 files of 128 MiB, new on the target)");
    await inNode(source.name, `cat > /tmp/raw-tcp.py <<'PY'\n${RAW_TCP}\nPY`);
    await inNode(target.name, `cat > /tmp/raw-tcp.py <<'PY'\n${RAW_TCP}\nPY`);
    const dir = "/home/spark/models/bench-weights";
    // Written, then flushed: a model lies on the first node's disk well before a sync starts.
    await inNode(source.name, `mkdir -p ${dir} && for i in $(seq 1 16); do head -c 134217728 /dev/urandom > ${dir}/w-$i.safetensors; done && chown -R spark ${dir} && sync`);
    const secret = crypto.randomBytes(16).toString("hex");
    const fabricStream = readScript("fabric-stream.py");
    const weightsVars = { MODEL_PATH: dir, PORT: RSYNC_PORT, FILES_PORT: WEIGHT_FILES_PORT, SECRET: secret, FABRIC_STREAM: fabricStream };
    const raws: Transfer[] = [];
    const syncs: (Transfer & { streams: number })[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
        const receiving = inNode(target.name, `python3 /tmp/raw-tcp.py receive ${target.fabricIp} 28799`);
        await new Promise((resolve) => setTimeout(resolve, 500));
        await inNode(source.name, `python3 /tmp/raw-tcp.py send ${target.fabricIp} 28799 ${2 * 1024 ** 3}`);
        const [bytes, seconds] = (await receiving).trim().split("\n").pop()!.split(" ").map(Number);
        raws.push({ bytes, seconds });
        log(`fabric: raw TCP ${mibPerSecond({ bytes, seconds }).toFixed(0)} MiB/s`);

        await inNode(target.name, `rm -rf ${dir} && mkdir -p ${dir} && chown spark ${dir} && sync`);
        const receive = await overSsh(cluster, 1, scriptProgram(WEIGHTS_RECEIVE, { ...weightsVars, BIND_IP: target.fabricIp, SENDER_IP: source.fabricIp }));
        const send = await overSsh(cluster, 0, scriptProgram("weights-send", { ...weightsVars, TARGET_IP: target.fabricIp, STREAMS: WEIGHT_STREAMS }));
        await overSsh(cluster, 1, scriptProgram(WEIGHTS_CLOSE, { MODEL_PATH: dir, PORT: RSYNC_PORT }));
        const synced = /weights-synced to \S+ millis=(\d+) streams=(\d+) bytes=(\d+)/.exec(send.stdout);
        if (receive.code !== 0 || send.code !== 0 || !synced) {
            throw new Error(`weight sync failed: ${receive.stderr} ${send.stderr}`);
        }
        log(`fabric: ${synced[0]}`);
        syncs.push({ bytes: Number(synced[3]), seconds: Number(synced[1]) / 1000, streams: Number(synced[2]) });
    }
    await inNode(source.name, `rm -rf ${dir}`);
    await inNode(target.name, `rm -rf ${dir}`);
    const raw = medianTransfer(raws);

    log("fabric: docker save alone");
    const [saveBytes, saveMillis] = (await inNode(source.name, `s=$(date +%s%N); n=$(docker save ${image} | wc -c); echo $n $((($(date +%s%N) - s) / 1000000))`))
        .trim()
        .split(" ")
        .map(Number);

    log("fabric: image copy node to node");
    // The image under every tag (the proving ground tags it `:current` too): a node that kept a layer
    // of it would be sent less (image-layers.py) and load less.
    const removeImage = `docker image rm --force "$(docker image inspect --format '{{.Id}}' ${image})" >/dev/null`;
    await inNode(target.name, removeImage);
    // By content identity, as the copy compares them (components/scripts/image-identity.sh).
    const identityOf = (node: string) =>
        execFileSync("docker", ["exec", node, "bash", "-c", `${readScript("image-identity")}\nimage_identity "$1"`, "_", image], { encoding: "utf8" }).trim();
    const wantIdentity = identityOf(source.name);
    const common = { IMAGE: image, WANT_IDENTITY: wantIdentity, PORT: IMAGE_COPY_PORT, SECRET: secret, FABRIC_STREAM: fabricStream };
    const mgmtIface = (cluster as unknown as { mgmtIface: string }).mgmtIface;
    const before = { mgmt: txBytes(source.name, mgmtIface), fabric: txBytes(source.name, source.fabricIface) };
    const start = Date.now();
    const [received, sent] = await Promise.all([
        overSsh(cluster, 1, scriptProgram(["image-identity", "image-receive"], { ...common, BIND_IP: target.fabricIp, SENDER_IP: source.fabricIp })),
        overSsh(cluster, 0, scriptProgram(["image-identity", "image-send"], { ...common, TARGET_IP: target.fabricIp, IMAGE_LAYERS: readScript("image-layers.py") })),
    ]);
    const imageSeconds = (Date.now() - start) / 1000;
    const after = { mgmt: txBytes(source.name, mgmtIface), fabric: txBytes(source.name, source.fabricIface) };
    if (received.code !== 0 || sent.code !== 0) {
        throw new Error(`image copy failed: receiver ${received.code} ${received.stderr}; sender ${sent.code} ${sent.stderr}`);
    }
    const copied = /image-copied \S+ \S+ bytes=(\d+)/.exec(received.stdout);
    log(`fabric: ${received.stdout.trim().split("\n").pop()}`);

    log("fabric: docker load alone on the second node (from a file saved there, not timed)");
    await inNode(target.name, `docker save ${image} > /tmp/bench-image.tar && ${removeImage}`);
    const loadSeconds = Number((await inNode(target.name, `s=$(date +%s%N); docker load < /tmp/bench-image.tar >/dev/null; echo $((($(date +%s%N) - s) / 1000000))`)).trim()) / 1000;
    await inNode(target.name, "rm -f /tmp/bench-image.tar");

    log("fabric: image copy through this machine (docker save | ssh | ssh | docker load, the way before the node-to-node copy)");
    await inNode(target.name, removeImage);
    const ssh = (index: number) => ["ssh", ...sshArgs(cluster, index)].join(" ");
    const viaOperatorSeconds = await timed(`${ssh(0)} docker save ${image} | ${ssh(1)} docker load >/dev/null`);
    const loadedVia = identityOf(target.name);
    if (loadedVia !== wantIdentity) {
        throw new Error(`the copy through this machine loaded ${loadedVia}, not ${wantIdentity}`);
    }

    const fabric: FabricThroughput = {
        raw,
        save: { bytes: saveBytes, seconds: saveMillis / 1000 },
        image: { bytes: Number(copied?.[1] ?? saveBytes), seconds: imageSeconds },
        load: { bytes: saveBytes, seconds: loadSeconds },
        viaOperator: { bytes: saveBytes, seconds: viaOperatorSeconds },
        weights: medianTransfer(syncs),
        operatorBytes: received.bytes + sent.bytes,
        sourceInterfaceBytes: { mgmt: after.mgmt - before.mgmt, fabric: after.fabric - before.fabric },
    };
    for (const result of fabricTargets(fabric)) {
        log(`fabric: ${result.target}: ${result.value?.toFixed(3)} (${result.passed ? "pass" : "FAIL"}; ${result.detail})`);
    }
    return fabric;
}
