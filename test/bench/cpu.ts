/**
 * CPU accounting: the machine's busy and total CPU time (/proc/stat), and the CPU time of the
 * simulated nodes and of the containers their Docker engines run (their cgroups, v1 or v2).
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { SimCluster } from "../e2e/simCluster";
import { log } from "./log";

/** A cgroup's CPU time so far in seconds: cgroup v1 cpuacct.usage (ns) or v2 cpu.stat usage_usec. */
function cgroupCpuSeconds(dir: string): number | undefined {
    try {
        return Number(fs.readFileSync(path.join(dir, "cpuacct.usage"), "utf8")) / 1e9;
    } catch {
        try {
            const line = fs.readFileSync(path.join(dir, "cpu.stat"), "utf8").split("\n").find((text) => text.startsWith("usage_usec "));
            return line ? Number(line.split(" ")[1]) / 1e6 : undefined;
        } catch {
            return undefined;
        }
    }
}

/** Where Docker put a container's cgroup (cgroup v1 cpuacct, v2 with the cgroupfs or the systemd driver). */
function containerCgroupDir(id: string): string | undefined {
    return [`/sys/fs/cgroup/cpuacct/docker/${id}`, `/sys/fs/cgroup/docker/${id}`, `/sys/fs/cgroup/system.slice/docker-${id}.scope`].find((dir) =>
        fs.existsSync(dir),
    );
}

/** CPU seconds so far of each simulated node (whole) and of each container its Docker engine runs, by cgroup path. */
export function simCpuSnapshot(nodeCgroups: readonly string[]): { nodes: number; workloads: Map<string, number> } | undefined {
    if (nodeCgroups.length === 0) {
        return undefined;
    }
    let nodes = 0;
    const workloads = new Map<string, number>();
    for (const dir of nodeCgroups) {
        const seconds = cgroupCpuSeconds(dir);
        if (seconds === undefined) {
            return undefined;
        }
        nodes += seconds;
        const inner = path.join(dir, "docker");
        for (const entry of fs.existsSync(inner) ? fs.readdirSync(inner, { withFileTypes: true }) : []) {
            const used = entry.isDirectory() ? cgroupCpuSeconds(path.join(inner, entry.name)) : undefined;
            if (used !== undefined) {
                workloads.set(path.join(inner, entry.name), used);
            }
        }
    }
    return { nodes, workloads };
}

/** The cgroup directories of a simulated cluster's node containers (empty where they cannot be found). */
export function nodeCgroupDirs(cluster: SimCluster): string[] {
    const dirs = cluster.nodes.map((node) => containerCgroupDir(execFileSync("docker", ["inspect", "--format", "{{.Id}}", node.name], { encoding: "utf8" }).trim()));
    return dirs.every((dir) => dir !== undefined) ? (dirs as string[]) : [];
}

/** The machine's CPU time so far, busy and total, in clock ticks (the `cpu` line of /proc/stat). */
export function cpuTicks(): { busy: number; total: number } {
    const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((sum, value) => sum + value, 0);
    const idle = fields[3] + (fields[4] ?? 0); // idle + iowait
    return { busy: total - idle, total };
}

/**
 * Waits (at most 20 s) until the machine's CPU is less than a fifth busy over half a second, so that
 * what the last operation left running (containers and Ray processes ending, files written back)
 * is not timed, nor counted, with the next one.
 */
export async function quietMachine(): Promise<void> {
    const start = Date.now();
    for (;;) {
        const before = cpuTicks();
        await new Promise((resolve) => setTimeout(resolve, 500));
        const after = cpuTicks();
        const busy = (after.busy - before.busy) / Math.max(1, after.total - before.total);
        if (busy < 0.2 || Date.now() - start > 20_000) {
            if (Date.now() - start > 1000) {
                log(`waited ${((Date.now() - start) / 1000).toFixed(1)} s for a quiet machine (CPU ${Math.round(busy * 100)}% busy)`);
            }
            return;
        }
    }
}

/**
 * CPU seconds so far of this process and of its children that have ended (/proc/self/stat: utime,
 * stime, cutime, cstime): the bench itself, the inline program, and each `pulumi` command with what
 * it waited for (its providers) once the Automation API has reaped it. Not other users' processes,
 * nor the SSH connection masters that outlive a command (ControlPersist detaches them).
 */
export function processTreeCpuSeconds(): number {
    const stat = fs.readFileSync("/proc/self/stat", "utf8");
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime is field 14 of the whole line: index 11 after the state field (3rd).
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
    const ticksPerSecond = 100; // USER_HZ, 100 on Linux
    return (utime + stime + cutime + cstime) / ticksPerSecond;
}
