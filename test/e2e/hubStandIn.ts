/**
 * The hub stand-in (test/sim/hub/hub-standin.py, a STAND-IN for the Hugging Face Hub) as the e2e
 * tests run it: a container on a simulated cluster's management network (internal, like the
 * cluster's), labelled with the cluster so that `sim.sh down` removes it too, serving repos made on
 * this machine.
 */
import { execFileSync } from "child_process";
import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { findProjectRoot } from "../../infra/core/project";
import { SimCluster } from "./simCluster";

const STANDIN = path.join(findProjectRoot(__dirname), "test/sim/hub/hub-standin.py");
/** The image the stand-in runs in: any with python3; the workload image is on this machine. */
const STANDIN_IMAGE = "vllm-fleet-sim/workload:current";
const PORT = 8080;

/** One repo the stand-in serves. */
export interface HubRepo {
    readonly id: string;
    /** Its files: name -> content. */
    readonly files: Readonly<Record<string, Buffer | string>>;
    readonly commit: string;
    readonly gated?: boolean;
    /** The first GET of `file` breaks off after `after` bytes of its body. */
    readonly dropOnce?: { readonly file: string; readonly after: number };
}

/** A request the stand-in logged. */
export interface HubRequest {
    readonly client: string;
    readonly method: string;
    readonly path: string;
    readonly range: string | null;
    readonly status: number;
    readonly bytes: number;
    readonly auth: boolean;
}

export interface HubStandIn {
    /** HF_ENDPOINT for the nodes: `http://<address on the management network>:8080`. */
    readonly endpoint: string;
    readonly token: string;
    /** Every request so far, in order. */
    requests(): HubRequest[];
    stop(): void;
}

/** A commit id the way the Hub shows them (40 hex digits), derived from `seed`. */
export function commitOf(seed: string): string {
    return crypto.createHash("sha1").update(seed).digest("hex");
}

function docker(args: string[]): string {
    return execFileSync("docker", args, { encoding: "utf8", timeout: 120_000 });
}

/**
 * Starts the hub stand-in for `cluster` serving `repos` at the address .5 of its management subnet.
 * A stand-in left by an earlier run of the same cluster is replaced.
 */
export async function startHubStandIn(cluster: SimCluster, repos: readonly HubRepo[]): Promise<HubStandIn> {
    const name = `${cluster.cluster}-hub`;
    const ip = cluster.mgmtSubnet.replace(/\.0\/24$/, ".5");
    const token = `hf_${crypto.randomBytes(12).toString("hex")}`;
    const stage = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-fleet-hub-"));
    try {
        const root = path.join(stage, "hub");
        const specs = repos.map((repo, index) => {
            const dir = path.join(root, "repos", String(index));
            for (const [file, content] of Object.entries(repo.files)) {
                fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
                fs.writeFileSync(path.join(dir, file), content);
            }
            return { id: repo.id, dir: `/hub/repos/${index}`, commit: repo.commit, branches: { main: repo.commit }, gated: repo.gated ?? false, dropOnce: repo.dropOnce };
        });
        fs.writeFileSync(path.join(root, "repos.json"), JSON.stringify({ port: PORT, token, repos: specs }));
        fs.copyFileSync(STANDIN, path.join(root, "hub-standin.py"));
        execFileSync("docker", ["rm", "-f", name], { stdio: "ignore" });
        docker([
            "create",
            "--name",
            name,
            "--label",
            `vllm-fleet.sim=${cluster.cluster}`,
            "--network",
            `${cluster.cluster}-mgmt`,
            "--ip",
            ip,
            "--entrypoint",
            "python3",
            STANDIN_IMAGE,
            "/hub/hub-standin.py",
            "/hub/repos.json",
        ]);
        docker(["cp", root, `${name}:/`]);
        docker(["start", name]);
    } finally {
        fs.rmSync(stage, { recursive: true, force: true });
    }
    const requests = (): HubRequest[] =>
        docker(["logs", name])
            .split("\n")
            .filter((line) => line.startsWith('{"client"'))
            .map((line) => JSON.parse(line) as HubRequest);
    for (let attempt = 0; ; attempt++) {
        if (docker(["logs", name]).includes('"listening"')) {
            break;
        }
        if (attempt > 100) {
            throw new Error(`the hub stand-in ${name} did not start: ${docker(["logs", name])}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return {
        endpoint: `http://${ip}:${PORT}`,
        token,
        requests,
        stop: () => execFileSync("docker", ["rm", "-f", name], { stdio: "ignore" }),
    };
}
