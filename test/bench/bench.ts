/**
 * The benchmark of issue 6 (`npm run bench -- [--runs K] [--nodes 2,4] [--out DIR]`; with `--fleet`, the
 * fleets of services of issue 23: ./fleet.ts): where the time
 * of a deployment goes, on simulated Sparks, through the real Pulumi engine (Automation API).
 *
 * For each node count, K rounds of: cold `pulumi up`, `pulumi preview` and `pulumi up` with no
 * change, a vLLM-only change (max-model-len), `pulumi destroy`; and a cold `pulumi up --parallel 1`
 * (the sequential baseline of a launcher script, whose solo step times give the dependency graph's
 * bound; with the CPU-seconds over the cores, the floor a cold up is judged against). Rounds interleave the node
 * counts so that drift of the machine hits all alike; ratios are taken between medians of one run of
 * the benchmark. A time is that of the `pulumi` command (start to its last output); the Automation
 * API's follow-up commands are recorded apart. Every up's engine events become a timeline (critical
 * path, time outside it, SVG Gantt chart). The hosts are checked as well: a no-op up only reads
 * each node, once (sshd's log: one session per node), a vLLM-only change leaves every Ray container as it
 * was (id and start time).
 *
 * Before the rounds, on the smallest cluster while it is alone on the machine, the copies over the fabric between its first two nodes
 * (measureFabric): raw TCP, `docker save` and `docker load` alone, the image copy through this
 * machine (the way before), the image copy and the weight sync with the product's scripts, as
 * ratios to raw TCP, and the image bytes that crossed this machine (`--fabric-only`: only that part).
 *
 * Writes DIR (default bench-report/): report.json, report.md, timeline-<N>nodes{,-parallel1,-noop,
 * -vllm-change}.svg (the median run of each), timeline-<N>nodes{,-parallel1}-run<k>.svg (every cold
 * up), and for each median run events-*.jsonl + export-*.json (input of `npm run timeline`).
 * Simulated clusters are named bench<N> and removed at the end, also on failure or Ctrl-C.
 *
 * With `--image-update`, an image update copied to a node that has the build before (issue 24:
 * ./imageUpdate.ts): a report of its own. With `--real`, real vLLM (its CPU build) through the
 * product against the same vLLM started by hand, and warm against cold compile caches (./realVllm.ts).
 */
import * as fs from "fs";
import * as path from "path";
import { simDown } from "../e2e/simCluster";
import { parseBenchArgs } from "./args";
import { measureFabric } from "./fabric";
import { runFleetBench } from "./fleet";
import { runImageUpdateBench } from "./imageUpdate";
import { runRealBench } from "./realVllm";
import { log } from "./log";
import { Deployment, Measurements, baselineRound, prepare, round } from "./rounds";
import { sshRoundTripSeconds } from "./ssh";
import { writeReport } from "./writeReport";

async function main(): Promise<void> {
    const options = parseBenchArgs(process.argv.slice(2));
    if (options.fleet) {
        // Fleets of services (./fleet.ts): a report of its own.
        if (!(await runFleetBench(options))) {
            process.exit(1);
        }
        return;
    }
    if (options.real) {
        if (!(await runRealBench(options))) {
            process.exit(1);
        }
        return;
    }
    if (options.imageUpdate) {
        if (!(await runImageUpdateBench(options))) {
            process.exit(1);
        }
        return;
    }
    const startedAt = new Date();
    const deployments: Deployment[] = [];
    const clusters: string[] = [];
    // One clean-up, whoever asks first (a signal, or the end): the other waits for the same one.
    let cleaning: Promise<void> | undefined;
    const cleanUp = () =>
        (cleaning ??= (async () => {
            for (const name of clusters) {
                try {
                    log(`removing simulated cluster ${name}`);
                    await simDown(name);
                } catch (error) {
                    log(`could not remove ${name}: ${(error as Error).message}`);
                }
            }
            for (const deployment of deployments) {
                fs.rmSync(deployment.workDir, { recursive: true, force: true });
            }
        })());
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
        process.once(signal, () => {
            log(`${signal}: cleaning up`);
            void cleanUp().finally(() => process.exit(130));
        });
    }

    const measurements: Measurements = { samples: [], checks: [], ups: [], sshRoundTripSeconds: {}, loadtests: {} };
    let failure: Error | undefined;
    let pulumiVersion = "?";
    try {
        for (const nodes of options.nodeCounts) {
            clusters.push(`bench${nodes}`);
            const deployment = await prepare(nodes);
            deployments.push(deployment);
            measurements.sshRoundTripSeconds[nodes] = sshRoundTripSeconds(deployment.cluster);
            pulumiVersion = deployment.stack.workspace.pulumiVersion;
            // The copies over the fabric on the smallest cluster while it is alone on the machine.
            if (deployments.length === 1) {
                measurements.fabric = await measureFabric(deployment.cluster);
            }
        }
        for (let run = 1; run <= (options.fabricOnly ? 0 : options.runs); run++) {
            for (const deployment of deployments) {
                await round(deployment, run, measurements);
            }
            // At every node count: its solo step times give that count's floor.
            for (const deployment of deployments) {
                await baselineRound(deployment, run, measurements);
            }
        }
    } catch (error) {
        failure = error as Error;
        log(`FAILED: ${failure.stack ?? failure.message}`);
    } finally {
        await cleanUp();
    }
    const targets = writeReport(options, measurements, startedAt, pulumiVersion, failure);
    console.log(fs.readFileSync(path.join(options.outDir, "report.md"), "utf8"));
    log(`report: ${path.join(options.outDir, "report.md")}`);
    if (failure) {
        process.exit(1);
    }
    // Missed targets are findings, not a failed benchmark: the exit code says whether it ran.
    log(`${targets.filter((result) => result.passed).length} of ${targets.length} targets met`);
}

if (require.main === module) {
    main().catch((error: Error) => {
        console.error(error.stack ?? error.message);
        process.exit(1);
    });
}
