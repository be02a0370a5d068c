/**
 * The figures of every service as PromQL, and how Prometheus's HTTP API answers them. The fleet's
 * Prometheus scrapes each service's /metrics with the target labels job="vllm" and
 * service="<the service's name>"; each query gives one value per service.
 */
import { SERVICE_QUERIES as DASHBOARD_SERVICE_QUERIES } from "../../infra/core/plan/dashboard";
import { Figures } from "./frame";

/**
 * One query per figure of `npm run top`: the fleet's Grafana dashboard's own
 * (infra/core/plan/dashboard.ts), each one series per `service`.
 */
export const SERVICE_QUERIES = DASHBOARD_SERVICE_QUERIES satisfies Record<keyof Figures | "up", string>;

/** The figure each query gives (the keys of SERVICE_QUERIES but `up`). */
export const FIGURE_KEYS = ["tokensPerSecond", "running", "waiting", "kvCachePercent", "ttftP50Seconds"] as const satisfies readonly (keyof Figures)[];

/** The URL of an instant query. */
export function queryUrl(prometheus: string, query: string): string {
    return `${prometheus.replace(/\/+$/, "")}/api/v1/query?query=${encodeURIComponent(query)}`;
}

/**
 * An instant query's answer (`{"status":"success","data":{"resultType":"vector","result":[{"metric":
 * {"service":"big"},"value":[1700000000.1,"12.5"]}]}}`) as value by service; a series without the
 * label `service` is left out. Throws on anything else, with Prometheus's own error when it gave one.
 */
export function parseVector(body: string): Map<string, number> {
    let answer: any;
    try {
        answer = JSON.parse(body);
    } catch {
        throw new Error(`not JSON: ${JSON.stringify(body.slice(0, 60))}`);
    }
    if (answer?.status !== "success") {
        throw new Error(answer?.error ? `${answer.errorType ?? "error"}: ${answer.error}` : `status ${JSON.stringify(answer?.status)}`);
    }
    if (answer.data?.resultType !== "vector" || !Array.isArray(answer.data.result)) {
        throw new Error(`expected a vector, got ${JSON.stringify(answer.data?.resultType)}`);
    }
    const values = new Map<string, number>();
    for (const series of answer.data.result) {
        const value = series?.value;
        if (!Array.isArray(value) || value.length !== 2 || typeof value[1] !== "string") {
            throw new Error(`a series without [time, "value"]: ${JSON.stringify(series).slice(0, 80)}`);
        }
        const service = series.metric?.service;
        if (typeof service === "string") {
            // Prometheus writes NaN and ±Inf as "NaN", "+Inf", "-Inf".
            values.set(service, value[1] === "+Inf" ? Infinity : value[1] === "-Inf" ? -Infinity : Number(value[1]));
        }
    }
    return values;
}

/** The active targets' last scrape errors by service (`GET /api/v1/targets?state=active`). */
export function parseTargetErrors(body: string): Map<string, string> {
    const answer = JSON.parse(body);
    const errors = new Map<string, string>();
    for (const target of answer?.data?.activeTargets ?? []) {
        const service = target?.labels?.service;
        if (target?.labels?.job === "vllm" && typeof service === "string" && target.health !== "up" && typeof target.lastError === "string" && target.lastError !== "") {
            errors.set(service, target.lastError);
        }
    }
    return errors;
}
