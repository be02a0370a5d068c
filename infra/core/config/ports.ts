/**
 * The ports of the serving containers across one another, sshd's and Ray's own: they use the host's
 * network. Pure.
 */
/** A problem found across keys, at `path` below the namespace. */
export interface CrossKeyIssue {
    readonly path: readonly (string | number)[];
    readonly value: unknown;
    readonly expected: string;
}


/** sshd's port: taken on every node whatever port vllm-fleet reaches it by. */
const SSHD_PORT = 22;

/**
 * The ports `ray start` takes on every node by its defaults, which vllm-fleet keeps: the client
 * server (10001), the dashboard agent (52365) and the range its worker processes listen in.
 */
const RAY_CLIENT_SERVER_PORT = 10001;
const RAY_DASHBOARD_AGENT_PORT = 52365;
const RAY_WORKER_PORTS = { min: 10002, max: 19999 };

/**
 * What Ray's own defaults hold `port` for, with the ray executor; undefined when free. The worker
 * range counts for a port bound after Ray's workers exist (vLLM's), not for Ray's GCS port, which is
 * bound first and which Ray's workers then avoid.
 */
export function rayTakes(port: number, boundAfterWorkers: boolean): string | undefined {
    if (port === RAY_CLIENT_SERVER_PORT) {
        return `Ray's client server port (${RAY_CLIENT_SERVER_PORT})`;
    }
    if (port === RAY_DASHBOARD_AGENT_PORT) {
        return `Ray's dashboard agent port (${RAY_DASHBOARD_AGENT_PORT})`;
    }
    if (boundAfterWorkers && port >= RAY_WORKER_PORTS.min && port <= RAY_WORKER_PORTS.max) {
        return `Ray's worker ports (${RAY_WORKER_PORTS.min}-${RAY_WORKER_PORTS.max})`;
    }
    return undefined;
}

/**
 * The serving containers use the host's network, so vLLM's port, the mp rendezvous port and Ray's
 * GCS port may not be a node's SSH port (nor sshd's 22) nor one another, and with the ray executor
 * vLLM's port and Ray's may not be one Ray takes by default. Ports below 1024 are allowed: the
 * containers run as root, and `vllm serve --port` takes any port (vLLM's 1024-65535 check belongs to
 * its older api_server entry point).
 */
export function portIssues(vllmPort: number, masterPort: number, rayPort: number, nodes: readonly { readonly name: string; readonly port: number }[], executor: "ray" | "mp"): CrossKeyIssue[] {
    // Which of Ray's ports each one may meet with the ray executor (none: the mp rendezvous port is unused then).
    const ports: { path: [string, string]; port: number; ray?: "after-workers" | "first" }[] = [
        { path: ["vllm", "port"], port: vllmPort, ray: "after-workers" },
        { path: ["vllm", "masterPort"], port: masterPort },
        { path: ["ray", "port"], port: rayPort, ray: "first" },
    ];
    const issues: CrossKeyIssue[] = [];
    ports.forEach(({ path: portPath, port, ray }, index) => {
        const taken: string[] = ports
            .slice(0, index)
            .filter((other) => other.port === port)
            .map((other) => other.path.join("."));
        const ssh = nodes.filter((node) => node.port === port).map((node) => node.name);
        if (ssh.length > 0) {
            taken.push(`the SSH port of ${ssh.join(", ")}`);
        } else if (port === SSHD_PORT) {
            taken.push("sshd's port on every node");
        }
        const byRay = executor === "ray" && ray ? rayTakes(port, ray === "after-workers") : undefined;
        if (byRay) {
            taken.push(byRay);
        }
        if (taken.length > 0) {
            issues.push({ path: portPath, value: port, expected: `a port other than ${taken.join(" and ")} (the serving containers use the host's network)` });
        }
    });
    return issues;
}

