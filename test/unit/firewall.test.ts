/**
 * The rules of security.firewall (components/scripts/firewall.sh), run against a stand-in `iptables`
 * that records its calls (and answers like iptables for a chain that does not exist yet), as root.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { closedPorts, firewallChain, firewallMarker } from "../../components/firewall";
import { scriptProgram } from "../../components/shell";
import { parseFleetConfig } from "../../infra/config";
import { firewallRevisions, parseObservation } from "../../infra/observe";
import { sparkDuo } from "./stacks";

function runFirewall(action: "apply" | "remove", dir: string): { calls: string[][]; stdout: string } {
    const log = path.join(dir, "calls");
    const bin = path.join(dir, "bin");
    fs.mkdirSync(bin, { recursive: true });
    // -C (is the jump there?) and -N of an existing chain fail as iptables does; all else succeeds.
    fs.writeFileSync(
        path.join(bin, "iptables"),
        `#!/bin/sh\nprintf '%s\\n' "$*" >> ${log}\ncase "$*" in *"-C INPUT"*) exit 1;; *"-D INPUT"*) [ -e ${dir}/deleted ] && exit 1; touch ${dir}/deleted;; esac\nexit 0\n`,
        { mode: 0o755 },
    );
    const config = parseFleetConfig({ ...sparkDuo, security: { firewall: true } });
    const program = scriptProgram("firewall", {
        ACTION: action,
        CHAIN: firewallChain("spark-duo"),
        FABRIC_SUBNET: config.fabric.subnet,
        OPEN_PORTS: ["22", String(config.vllm.port)],
        CLOSED_PORTS: closedPorts(config),
        MARKER: path.join(dir, "marker"),
        REVISION: "r1",
    });
    const stdout = execFileSync("bash", ["-c", program], {
        encoding: "utf8",
        env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
    const calls = fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n").map((line) => line.split(" ")) : [];
    return { calls, stdout };
}

describe.runIf(process.getuid?.() === 0)("firewall.sh", () => {
    const [low, high] = fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);

    it("lets the fabric, loopback, established connections, SSH and the API through, and resets the rest of Ray's ports", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fw-"));
        try {
            const chain = firewallChain("spark-duo");
            expect(chain.length).toBeLessThanOrEqual(28);
            const { calls, stdout } = runFirewall("apply", dir);
            const rules = calls.filter((call) => call[1] === "-A").map((call) => call.slice(3).join(" "));
            expect(rules).toEqual([
                "-i lo -j RETURN",
                `-s ${parseFleetConfig(sparkDuo).fabric.subnet} -j RETURN`,
                "-m conntrack --ctstate ESTABLISHED,RELATED -j RETURN",
                "-p tcp --dport 22 -j RETURN",
                "-p tcp --dport 8000 -j RETURN",
                "-p tcp --dport 6379 -j REJECT --reject-with tcp-reset",
                "-p tcp --dport 10001:19999 -j REJECT --reject-with tcp-reset",
                "-p tcp --dport 52365 -j REJECT --reject-with tcp-reset",
                `-p tcp --dport ${low}:${high} -j REJECT --reject-with tcp-reset`,
            ]);
            // The chain is jumped to first in INPUT, once.
            expect(calls.map((call) => call.join(" "))).toContain(`-w -I INPUT 1 -j ${chain}`);
            expect(fs.readFileSync(path.join(dir, "marker"), "utf8")).toBe("r1\n");
            expect(stdout).toContain(`from 192.168.200.0/24 only: 6379 10001:19999 52365 ${low}:${high}`);

            const removed = runFirewall("remove", dir);
            expect(removed.calls.slice(-4).map((call) => call.join(" "))).toEqual([
                `-w -D INPUT -j ${chain}`,
                `-w -D INPUT -j ${chain}`,
                `-w -F ${chain}`,
                `-w -X ${chain}`,
            ]);
            expect(fs.existsSync(path.join(dir, "marker"))).toBe(false);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("the firewall's revision", () => {
    it("keeps the revision the rules left, and makes a new one where none are (never applied, or a reboot)", () => {
        const applied = parseObservation("spark1", "### firewall\nabc123\n");
        const rebooted = parseObservation("spark2", "### firewall\n\n");
        let n = 0;
        expect(firewallRevisions([applied, rebooted], () => `new${++n}`)).toEqual({ spark1: "abc123", spark2: "new1" });
    });

    it("closes the mp rendezvous port with the mp executor, Ray's ports with ray", () => {
        expect(closedPorts(parseFleetConfig({ ...sparkDuo, executor: "mp" }))).toEqual(["29501"]);
        expect(firewallMarker("spark-duo")).toBe(`/dev/shm/vllm-fleet-firewall-${firewallChain("spark-duo")}`);
    });
});
