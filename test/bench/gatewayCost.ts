/**
 * The gateway's cost (issue 23): the time to the first token (TTFT, p50) of streamed requests through
 * the gateway against the same service asked directly, at concurrency 1 and 16, in one run, with
 * the load test's client (tools/loadtest). The two paths take turns, level by level, so that drift of
 * a shared machine hits both alike. Target: at most 5 ms more through the gateway at each level.
 */
import { RequestRecord } from "../../tools/loadtest/client";
import { runLoadtest } from "../../tools/loadtest/run";
import { percentile } from "../../tools/loadtest/stats";

/** The concurrencies of issue 23's target. */
export const GATEWAY_LEVELS = [1, 16] as const;
/** The most TTFT p50 the gateway may add, at each level (issue 23, on the stand-in). */
export const GATEWAY_ADDED_TTFT_LIMIT_MS = 5;

/** The two ways to one service's model. */
export interface GatewayPaths {
    /** The service's own endpoint (`http://<node>:<port>/v1`). */
    readonly direct: string;
    /** The gateway's endpoint. */
    readonly gateway: string;
    /** The model asked (the service's served name). */
    readonly model: string;
    readonly apiKey: string;
}

/** Every request of one path at one level, over the turns. */
export interface GatewayLevelSamples {
    readonly concurrency: number;
    readonly direct: readonly RequestRecord[];
    readonly gateway: readonly RequestRecord[];
}

/** One level's verdict. */
export interface GatewayLevelCost {
    readonly concurrency: number;
    readonly directTtftP50Ms: number | null;
    readonly gatewayTtftP50Ms: number | null;
    /** gateway − direct, null when either had no successful request. */
    readonly addedMs: number | null;
    readonly directRequests: number;
    readonly gatewayRequests: number;
    readonly errors: { readonly direct: number; readonly gateway: number };
    readonly passed: boolean;
}

const ttfts = (records: readonly RequestRecord[]) => records.flatMap((record) => (record.error || record.ttftMs === null ? [] : [record.ttftMs]));

/** The TTFT p50 of each path at each level and what the gateway added; passed when ≤ the limit and no request failed. */
export function gatewayCost(samples: readonly GatewayLevelSamples[]): GatewayLevelCost[] {
    return samples.map(({ concurrency, direct, gateway }) => {
        const directP50 = percentile(ttfts(direct), 50);
        const gatewayP50 = percentile(ttfts(gateway), 50);
        const addedMs = directP50 === null || gatewayP50 === null ? null : gatewayP50 - directP50;
        const errors = { direct: direct.filter((record) => record.error).length, gateway: gateway.filter((record) => record.error).length };
        return {
            concurrency,
            directTtftP50Ms: directP50,
            gatewayTtftP50Ms: gatewayP50,
            addedMs,
            directRequests: direct.length,
            gatewayRequests: gateway.length,
            errors,
            passed: addedMs !== null && addedMs <= GATEWAY_ADDED_TTFT_LIMIT_MS && errors.direct === 0 && errors.gateway === 0,
        };
    });
}

/** The report's lines for the gateway's cost. */
export function renderGatewayCost(costs: readonly GatewayLevelCost[], service: string): string[] {
    const ms = (value: number | null) => (value === null ? "–" : `${value.toFixed(1)} ms`);
    return [
        `TTFT p50 of streamed completions to service ${service}, through the gateway and directly, the two taking turns in one run ` +
            `(the vLLM stand-in's numbers: they measure the path, not a model). Target: at most ${GATEWAY_ADDED_TTFT_LIMIT_MS} ms more through the gateway.`,
        "",
        "| concurrency | direct | through the gateway | added | requests (direct / gateway) | failed | result |",
        "|---:|---:|---:|---:|---:|---:|---|",
        ...costs.map(
            (cost) =>
                `| ${cost.concurrency} | ${ms(cost.directTtftP50Ms)} | ${ms(cost.gatewayTtftP50Ms)} | ${cost.addedMs === null ? "–" : `${cost.addedMs >= 0 ? "+" : ""}${cost.addedMs.toFixed(1)} ms`} | ` +
                `${cost.directRequests} / ${cost.gatewayRequests} | ${cost.errors.direct} / ${cost.errors.gateway} | ${cost.passed ? "pass" : "**FAIL**"} |`,
        ),
    ];
}

/**
 * Measures both paths: at each level, `turns` times a load test of `requests` requests directly,
 * then the same through the gateway (after one untimed request on each path, so that neither pays
 * for opening its first connection).
 */
export async function measureGatewayCost(paths: GatewayPaths, options: { readonly requests?: number; readonly turns?: number } = {}): Promise<GatewayLevelSamples[]> {
    const requests = options.requests ?? 32;
    const turns = options.turns ?? 2;
    const run = (endpoint: string, concurrency: number, count: number) =>
        runLoadtest({ endpoint, model: paths.model, apiKey: paths.apiKey, levels: [concurrency], requests: count, maxTokens: 16 }).then((report) => report.levels[0].requests);
    await run(paths.direct, 1, 1);
    await run(paths.gateway, 1, 1);
    const samples: GatewayLevelSamples[] = [];
    for (const concurrency of GATEWAY_LEVELS) {
        const direct: RequestRecord[] = [];
        const gateway: RequestRecord[] = [];
        for (let turn = 0; turn < turns; turn++) {
            direct.push(...(await run(paths.direct, concurrency, requests)));
            gateway.push(...(await run(paths.gateway, concurrency, requests)));
        }
        samples.push({ concurrency, direct, gateway });
    }
    return samples;
}
