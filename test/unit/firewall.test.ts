/**
 * The rules of security.firewall (components/scripts/firewall.sh), run against a stand-in `iptables`
 * that records its calls (and answers like iptables for a chain that does not exist yet), as root.
 */
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { closedPorts, firewallChain, firewallMarker } from "../../infra/core/plan";
import { scriptProgram } from "../../components/shell";
import { parseFleetConfig } from "../../infra/core/config";
import { firewallRevisions, parseObservation } from "../../infra/core/observe";
import { sparkDuo } from "./stacks";

function runFirewall(action: "apply" | "remove", dir: string, clients: readonly string[] = ["0.0.0.0/0"]): { calls: string[][]; stdout: string } {
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
        OPEN_PORTS: ["22"],
        CLIENT_PORTS: ["4000", String(config.vllm.port)],
        CLIENTS: [...clients],
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
                "-p tcp --dport 4000 -j RETURN",
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

    it("lets the client ports through from security.clients only, and resets them for everyone else", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fw-"));
        try {
            const { calls, stdout } = runFirewall("apply", dir, ["10.1.230.0/24", "10.9.0.7/32"]);
            const rules = calls.filter((call) => call[1] === "-A").map((call) => call.slice(3).join(" "));
            expect(rules.slice(3, 11)).toEqual([
                "-p tcp --dport 22 -j RETURN",
                "-p tcp --dport 4000 -s 10.1.230.0/24 -j RETURN",
                "-p tcp --dport 4000 -s 10.9.0.7/32 -j RETURN",
                "-p tcp --dport 4000 -j REJECT --reject-with tcp-reset",
                "-p tcp --dport 8000 -s 10.1.230.0/24 -j RETURN",
                "-p tcp --dport 8000 -s 10.9.0.7/32 -j RETURN",
                "-p tcp --dport 8000 -j REJECT --reject-with tcp-reset",
                "-p tcp --dport 6379 -j REJECT --reject-with tcp-reset",
            ]);
            // Before them all: the loopback, the fabric and established connections pass.
            expect(rules.slice(0, 3)).toEqual(["-i lo -j RETURN", `-s ${parseFleetConfig(sparkDuo).fabric.subnet} -j RETURN`, "-m conntrack --ctstate ESTABLISHED,RELATED -j RETURN"]);
            expect(stdout).toContain("to clients (10.1.230.0/24 10.9.0.7/32): 4000 8000");
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

/**
 * A stand-in `iptables` that holds the filter table (a file of rules per chain) and answers as
 * iptables-legacy 1.8 does: an existing chain cannot be made again, a missing one cannot be flushed,
 * deleted or appended to, a rule not there cannot be checked or deleted, a chain still jumped to or
 * not empty cannot be deleted. Simpler: only what firewall.sh asks (-N -F -X -A -I -C -D -S).
 */
function statefulIptables(bin: string, table: string): void {
    fs.mkdirSync(table, { recursive: true });
    fs.writeFileSync(path.join(table, "INPUT"), "");
    fs.writeFileSync(
        path.join(bin, "iptables"),
        [
            "#!/bin/bash",
            `t=${JSON.stringify(table)}`,
            '[ "$1" = -w ] && shift',
            'op="$1" chain="$2"; shift 2',
            'nochain() { echo "iptables: No chain/target/match by that name." >&2; exit 1; }',
            'badrule() { echo "iptables: Bad rule (does a matching rule exist in that chain?)." >&2; exit 1; }',
            'case "$op" in',
            '  -N) [ -e "$t/$chain" ] && { echo "iptables: Chain already exists." >&2; exit 1; }; : >"$t/$chain" ;;',
            '  -F) [ -e "$t/$chain" ] || nochain; : >"$t/$chain" ;;',
            '  -X) [ -e "$t/$chain" ] || nochain',
            '      grep -qx -- "-j $chain" "$t"/* && { echo "iptables: Too many links." >&2; exit 1; }',
            '      [ -s "$t/$chain" ] && { echo "iptables: Directory not empty." >&2; exit 1; }',
            '      rm "$t/$chain" ;;',
            '  -A) [ -e "$t/$chain" ] || nochain; echo "$*" >>"$t/$chain" ;;',
            '  -I) [ -e "$t/$chain" ] || nochain; shift; target="${*: -1}"',
            '      [ -e "$t/$target" ] || { echo "iptables v1.8.9 (legacy): Couldn\'t load target \\`$target\':No such file or directory" >&2; exit 2; }',
            '      { echo "$*"; cat "$t/$chain"; } >"$t/.new" && mv "$t/.new" "$t/$chain" ;;',
            '  -C) [ -e "$t/$chain" ] || nochain; grep -qxF -- "$*" "$t/$chain" || badrule ;;',
            '  -D) [ -e "$t/$chain" ] || nochain; n="$(grep -nxF -- "$*" "$t/$chain" | head -n 1 | cut -d: -f1)"; [ -n "$n" ] || badrule; sed -i "${n}d" "$t/$chain" ;;',
            '  -S) [ -e "$t/$chain" ] || nochain; sed "s/^/-A $chain /" "$t/$chain" ;;',
            '  *) echo "iptables stand-in: not modelled: $op" >&2; exit 70 ;;',
            "esac",
        ].join("\n") + "\n",
        { mode: 0o755 },
    );
}

describe.runIf(process.getuid?.() === 0)("firewall.sh with its rules half there or gone: apply and remove converge", () => {
    const chain = firewallChain("spark-duo");
    const config = parseFleetConfig({ ...sparkDuo, security: { firewall: true } });
    const program = (action: "apply" | "remove", marker: string) =>
        scriptProgram("firewall", {
            ACTION: action,
            CHAIN: chain,
            FABRIC_SUBNET: config.fabric.subnet,
            OPEN_PORTS: ["22"],
            CLIENT_PORTS: [String(config.vllm.port)],
            CLIENTS: ["0.0.0.0/0"],
            CLOSED_PORTS: closedPorts(config),
            MARKER: marker,
            REVISION: "r2",
        });
    /** What the table and the marker hold before: chain rules (undefined: no chain), INPUT, marker. */
    const STATES: Record<string, { chain?: string[]; input: string[]; marker?: string }> = {
        "nothing (never applied, or a reboot)": { input: [] },
        "the chain alone, empty (an apply cut short)": { chain: [], input: [] },
        "the chain with some of its rules, no jump (an apply cut short)": { chain: ["-i lo -j RETURN"], input: [] },
        "applied (an earlier revision)": { chain: ["-i lo -j RETURN", "-p tcp --dport 6379 -j REJECT --reject-with tcp-reset"], input: [`-j ${chain}`], marker: "r1" },
        "the jump and an empty chain (a remove cut short)": { chain: [], input: [`-j ${chain}`] },
        "the jump, not first in INPUT (a rule of someone else's before it)": { chain: [], input: ["-p tcp --dport 9 -j DROP", `-j ${chain}`] },
        "the marker alone (the rules flushed by hand)": { input: [], marker: "r1" },
    };

    it.each(Object.keys(STATES))("%s", (name) => {
        const state = STATES[name];
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fw-states-"));
        try {
            const bin = path.join(dir, "bin");
            const table = path.join(dir, "table");
            fs.mkdirSync(bin);
            statefulIptables(bin, table);
            const marker = path.join(dir, "marker");
            fs.writeFileSync(path.join(table, "INPUT"), state.input.map((rule) => `${rule}\n`).join(""));
            if (state.chain) fs.writeFileSync(path.join(table, chain), state.chain.map((rule) => `${rule}\n`).join(""));
            if (state.marker) fs.writeFileSync(marker, `${state.marker}\n`);
            const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
            const read = (file: string) => (fs.existsSync(path.join(table, file)) ? fs.readFileSync(path.join(table, file), "utf8").trim().split("\n").filter(Boolean) : undefined);

            execFileSync("bash", ["-c", program("apply", marker)], { env, encoding: "utf8" });
            const rules = read(chain)!;
            expect(rules[0]).toBe("-i lo -j RETURN");
            expect(rules).toHaveLength(9); // exactly the rules of this revision, none of the last one's twice
            expect(read("INPUT")!.filter((rule) => rule === `-j ${chain}`)).toHaveLength(1);
            expect(fs.readFileSync(marker, "utf8")).toBe("r2\n");

            execFileSync("bash", ["-c", program("remove", marker)], { env, encoding: "utf8" });
            expect(read(chain)).toBeUndefined();
            expect(read("INPUT")!.filter((rule) => rule.includes(chain))).toEqual([]);
            expect(fs.existsSync(marker)).toBe(false);
            // A second remove finds nothing to remove, and succeeds.
            execFileSync("bash", ["-c", program("remove", marker)], { env, encoding: "utf8" });
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
