/**
 * `npm run loadtest -- [--endpoint URL] [--stack NAME] [--model NAME] [--concurrency C] ...`: a serving
 * benchmark against any OpenAI-compatible endpoint (vLLM on real DGX Sparks, the simulated cluster,
 * anything that streams server-sent events). It sends streaming completions, first one at a time,
 * then C at a time, and measures per request the time to the first generated token (TTFT), the total
 * time, the output tokens and the tokens per second after the first token; per level the TTFT
 * percentiles, the output tokens per second and the requests per second. Beside the load, every
 * second from the first level's start to the last one's end, it reads what the server saw (requests
 * running and waiting, KV cache usage %): from the stack's Prometheus, else the service's own
 * /metrics (./serverSources.ts); not sampled when neither answers. It writes
 * `<out>/loadtest.json` (every request and the summaries; never the API key) and `<out>/loadtest.svg`,
 * and prints a table. Exit code 0 when every request succeeded, 1 when some failed, 2 when it could
 * not run.
 *
 * The endpoint defaults to the `endpoint` output of the selected (or `--stack`) Pulumi stack, and the
 * API key to that stack's secret output `apiKey` (its vllm-fleet:vllmApiKey, or the key it made; read through
 * the Pulumi CLI like `npm run status` does), else the variable VLLM_API_KEY (`--api-key-env NAME`
 * names another variable, which then comes first).
 *
 * For other programs (the bench): runLoadtest (./run.ts), renderLoadtestSvg (./svg.ts),
 * formatLoadtestTable and writeLoadtestOutputs (./report.ts). Only Node's built-ins are used.
 */
import { invocationDir, runCommand } from "../command";
import { LOADTEST_USAGE, parseLoadtestArgs } from "./cli";
import { formatLoadtestTable, writeLoadtestOutputs } from "./report";
import { levelsOf, runLoadtest } from "./run";
import { resolveTarget } from "./target";

async function main(argv: readonly string[]): Promise<number> {
    const args = parseLoadtestArgs(argv, invocationDir());
    if (args.help) {
        console.log(LOADTEST_USAGE);
        return 0;
    }
    const target = await resolveTarget(args, process.env);
    const levels = levelsOf({ concurrency: args.concurrency });
    console.log(
        `loadtest ${target.endpoint}${target.stack ? ` (stack ${target.stack})` : ""}: levels ${levels.join(", ")}, ${args.requests} requests each, ` +
            `key ${target.apiKeySource}`,
    );
    let done = 0;
    const report = await runLoadtest({
        endpoint: target.endpoint,
        model: target.model,
        apiKey: target.apiKey,
        apiKeySource: target.apiKeySource,
        api: args.api,
        concurrency: args.concurrency,
        requests: args.requests,
        maxTokens: args.maxTokens,
        prompt: args.prompt,
        timeoutMs: args.timeoutMs,
        server: target.server,
        onRequest: (record) => {
            done++;
            if (process.stderr.isTTY) {
                process.stderr.write(`\r  concurrency ${record.concurrency}: ${done} requests done${record.error ? `, last failed (${record.error.kind})` : ""}   `);
            }
        },
    });
    if (process.stderr.isTTY) {
        process.stderr.write("\n");
    }
    const written = writeLoadtestOutputs(report, args.out);
    console.log(formatLoadtestTable(report));
    console.log(`wrote ${written.json} and ${written.svg}`);
    return report.levels.some((level) => level.summary.errors > 0) ? 1 : 0;
}

if (require.main === module) {
    runCommand("loadtest", main);
}
