/**
 * `npm run top -- [--stack NAME] [--interval 2] [--once]`: a live view of a deployed stack's
 * services in the terminal, refreshed every `--interval` seconds (2 by default), one row per service
 * (the stack's output `services`): its model, the tokens it generates per second, the requests
 * running and waiting, the KV cache in use and the median time to first token of the last minute.
 * `q` or Ctrl-C quits and gives the terminal back as it was. `--once` prints one frame (after two
 * reads `--interval` apart, so that rates exist) and exits: 0 when every service answered, 1 when
 * one did not (its row says why), 2 when it could not run. Output to a pipe or a file gets one
 * frame after the other, without the screen's control sequences, until interrupted.
 *
 * The figures come from the stack's Prometheus when it has one (the output `monitoring.endpoint`;
 * the queries are SERVICE_QUERIES in ./queries.ts), else from each service's own /metrics (its
 * endpoint without /v1, with the stack's secret output `apiKey` as bearer token when not ""), read
 * into a window of the last minute (./window.ts: Prometheus's rate and histogram_quantile, done here).
 * When Prometheus does not answer, the services' /metrics stand in, and the header says so; a
 * service that does not answer shows why in its row, and the view keeps refreshing.
 *
 * Without a stack (tests, a fleet reached by hand): `--endpoints NAME=URL[,NAME=URL...]` replaces
 * the stack's outputs (URL: the service's API, http://host:port or http://host:port/v1), with
 * `--prometheus URL` for its monitoring and `--api-key-env VAR` for its key (the variable VAR holds
 * it; with a stack, VAR comes before the stack's apiKey). Only Node's built-ins are used.
 */
import { runCommand } from "../command";
import { TOP_USAGE, parseTopArgs } from "./cli";
import { renderFrame } from "./frame";
import { resolveSetup } from "./setup";
import { Sampler } from "./sources";
import { runLive, runPlain } from "./terminal";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(argv: readonly string[]): Promise<number> {
    const args = parseTopArgs(argv);
    if (args.help) {
        console.log(TOP_USAGE);
        return 0;
    }
    const setup = await resolveSetup(args, process.env);
    const intervalMs = args.intervalSeconds * 1000;
    // A read may take as long as a refresh lasts, a second at least and ten at most.
    const sampler = new Sampler(setup, Math.min(Math.max(intervalMs, 1000), 10_000));
    const frame = async (interactive: boolean, width: number) => {
        const sampling = await sampler.sample();
        const header = { stack: setup.stack, time: new Date(), source: sampling.source, intervalSeconds: args.intervalSeconds, interactive };
        return { text: renderFrame(header, sampling.rows, width), failed: sampling.rows.some((row) => row.error !== undefined) };
    };
    if (args.once) {
        const started = Date.now();
        await sampler.sample();
        await sleep(Math.max(0, intervalMs - (Date.now() - started)));
        const last = await frame(false, 80);
        console.log(last.text);
        return last.failed ? 1 : 0;
    }
    if (!process.stdout.isTTY) {
        return runPlain(process.stdout, intervalMs, async (width) => (await frame(false, width)).text);
    }
    return runLive(process.stdin, process.stdout, intervalMs, async (width) => (await frame(true, width)).text);
}

if (require.main === module) {
    runCommand("top", main);
}
