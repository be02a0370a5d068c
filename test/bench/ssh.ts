/** Reaching a simulated node from this machine over SSH, as the builtin runner does. */
import { execFileSync, spawn } from "child_process";
import { programsOnStdin, runFromStdin } from "../../components/shell";
import { SimCluster } from "../e2e/simCluster";
import { median } from "./targets";

/** The arguments of this machine's ssh to a simulated node, as the builtin runner logs in. */
export function sshArgs(cluster: SimCluster, index: number): string[] {
    const node = cluster.nodes[index];
    return [
        "-i", cluster.sshPrivateKeyPath, "-p", String(node.sshPort),
        "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", `${cluster.sshUser}@${node.sshHost}`,
    ];
}

/** Median seconds of a plain SSH login that runs `true` on node 0 (what every step pays at least once). */
export function sshRoundTripSeconds(cluster: SimCluster): number {
    const times: number[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
        const start = process.hrtime.bigint();
        execFileSync("ssh", [...sshArgs(cluster, 0), "true"]);
        times.push(Number(process.hrtime.bigint() - start) / 1e9);
    }
    return median(times);
}

/** A program run on a node as the builtin runner runs it (ssh, the programs on stdin), counting the bytes through this machine. */
export function overSsh(cluster: SimCluster, index: number, program: string): Promise<{ code: number | null; stdout: string; stderr: string; bytes: number }> {
    return new Promise((resolve) => {
        const input = programsOnStdin({ create: program });
        const child = spawn("ssh", [...sshArgs(cluster, index), "--", runFromStdin("create")]);
        let stdout = "";
        let stderr = "";
        let bytes = Buffer.byteLength(input);
        child.stdout.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
            stdout += chunk.toString();
        });
        child.stderr.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
            stderr += chunk.toString();
        });
        child.stdin.end(input);
        child.on("close", (code) => resolve({ code, stdout, stderr, bytes }));
    });
}
