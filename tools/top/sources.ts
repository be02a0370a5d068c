/**
 * Where `npm run top`'s figures come from: the fleet's Prometheus when the stack has one, else (and
 * whenever it does not answer) each service's own /metrics, read by this process into a minute's window.
 */
import { parseExposition } from "./exposition";
import { Figures, Row } from "./frame";
import { FIGURE_KEYS, SERVICE_QUERIES, parseTargetErrors, parseVector, queryUrl } from "./queries";
import { ServiceWindow } from "./window";

/** A service to show: its name, its model when known, and the URL of its /metrics. */
export interface ServiceTarget {
    readonly name: string;
    readonly model?: string;
    readonly metricsUrl: string;
}

/** What the view is of: from a stack's outputs, or from --endpoints. */
export interface TopSetup {
    /** The stack's name; undefined with --endpoints. */
    readonly stack?: string;
    readonly services: readonly ServiceTarget[];
    /** The key vLLM serves with ("" when none): sent to /metrics as `Authorization: Bearer`. */
    readonly apiKey: string;
    /** Prometheus's base URL (the stack's output monitoring.endpoint), when there is one. */
    readonly prometheus?: string;
}

/** One refresh: a row per service, and where its figures came from. */
export interface Sampling {
    readonly rows: readonly Row[];
    readonly source: string;
}

/** Why an HTTP call got no usable answer, in a few words (the row's width). */
export function shortError(error: unknown, timeoutMs: number): string {
    const failure = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
    if (failure?.name === "TimeoutError" || failure?.name === "AbortError") {
        return `no answer in ${timeoutMs / 1000} s`;
    }
    const code = failure?.cause?.code;
    const words: Record<string, string> = {
        ECONNREFUSED: "connection refused",
        ECONNRESET: "connection reset",
        EHOSTUNREACH: "host unreachable",
        ENETUNREACH: "network unreachable",
        ENOTFOUND: "host not found",
        EAI_AGAIN: "host name lookup failed",
        ETIMEDOUT: "connect timed out",
        UND_ERR_CONNECT_TIMEOUT: "connect timed out",
        UND_ERR_SOCKET: "connection closed",
    };
    if (code) {
        return words[code] ?? code;
    }
    const message = String(failure?.message ?? error).split("\n")[0];
    return message.length > 70 ? `${message.slice(0, 69)}~` : message;
}

/**
 * Prometheus's words for a failed scrape without the request they name: `Get "http://…/metrics":
 * dial tcp 10.0.0.5:8000: connect: connection refused` is "connection refused".
 */
export function scrapeErrorWords(lastError: string): string {
    const words = lastError.replace(/^get "[^"]*": /i, "").replace(/^dial tcp \S+: (connect: )?/, "");
    return words.length > 60 ? `${words.slice(0, 59)}~` : words;
}

/** The base URL of a service's API (".../v1" or its root) to its /metrics. */
export function metricsUrlOf(endpoint: string): string {
    let url: URL;
    try {
        url = new URL(endpoint);
    } catch {
        throw new Error(`expected an http(s) URL such as http://host:8000/v1, got ${JSON.stringify(endpoint)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new Error(`expected an http(s) URL such as http://host:8000/v1, got ${JSON.stringify(endpoint)}`);
    }
    return `${url.origin}${url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "")}/metrics`;
}

/** Refreshes the figures of every service of a setup; keeps each service's window between calls. */
export class Sampler {
    private readonly windows = new Map<string, ServiceWindow>();
    /** Why Prometheus did not answer the last time it was asked; undefined while it answers. */
    private prometheusError?: string;

    constructor(
        private readonly setup: TopSetup,
        private readonly timeoutMs: number,
        private readonly fetchFn: typeof fetch = (input, init) => fetch(input, init),
        private readonly now: () => number = Date.now,
    ) {}

    /** One refresh: from Prometheus when there is one and it answers, else from each /metrics. */
    async sample(): Promise<Sampling> {
        const prometheus = this.setup.prometheus;
        const direct = "each service's /metrics";
        if (prometheus === undefined) {
            return { rows: await this.fromMetrics(), source: direct };
        }
        if (this.prometheusError === undefined) {
            try {
                return { rows: await this.fromPrometheus(prometheus), source: `Prometheus ${prometheus}` };
            } catch (error) {
                this.prometheusError = shortError(error, this.timeoutMs);
                return { rows: await this.fromMetrics(), source: `${direct}: Prometheus ${prometheus} did not answer (${this.prometheusError})` };
            }
        }
        // Prometheus failed before: read the services meanwhile, so their windows fill, and ask it again.
        const [asked, read] = await Promise.allSettled([this.fromPrometheus(prometheus), this.fromMetrics()]);
        if (asked.status === "fulfilled") {
            this.prometheusError = undefined;
            return { rows: asked.value, source: `Prometheus ${prometheus}` };
        }
        this.prometheusError = shortError(asked.reason, this.timeoutMs);
        const rows = read.status === "fulfilled" ? read.value : this.setup.services.map((service) => ({ service: service.name, model: service.model, error: String(read.reason) }));
        return { rows, source: `${direct}: Prometheus ${prometheus} did not answer (${this.prometheusError})` };
    }

    /** A GET with the deadline; `time`: when the answer's head arrived (this.now()). */
    private async get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; time: number }> {
        const response = await this.fetchFn(url, { headers, signal: AbortSignal.timeout(this.timeoutMs) });
        const time = this.now();
        return { status: response.status, body: await response.text(), time };
    }

    /** Each service's /metrics read now into its window, and the window's figures. */
    private fromMetrics(): Promise<Row[]> {
        const headers: Record<string, string> = this.setup.apiKey === "" ? {} : { Authorization: `Bearer ${this.setup.apiKey}` };
        return Promise.all(
            this.setup.services.map(async (service): Promise<Row> => {
                const window = this.windows.get(service.name) ?? new ServiceWindow();
                this.windows.set(service.name, window);
                try {
                    const answer = await this.get(service.metricsUrl, headers);
                    if (answer.status !== 200) {
                        return { service: service.name, model: service.model ?? window.model(), error: `/metrics: HTTP ${answer.status}` };
                    }
                    // Stamped when the answer came (vLLM writes the page as it answers), not when it was
                    // asked for: a first request's connection (or a slow one) would skew the rates.
                    window.add(answer.time, parseExposition(answer.body).samples);
                    return { service: service.name, model: service.model ?? window.model(), figures: window.figures() };
                } catch (error) {
                    const said = error instanceof Error && error.message.startsWith("line ") ? `/metrics unreadable: ${error.message}` : shortError(error, this.timeoutMs);
                    return { service: service.name, model: service.model ?? window.model(), error: said };
                }
            }),
        );
    }

    /** Every query of SERVICE_QUERIES at once; throws when Prometheus does not answer one of them. */
    private async fromPrometheus(prometheus: string): Promise<Row[]> {
        const entries = await Promise.all(
            Object.entries(SERVICE_QUERIES).map(async ([key, query]) => {
                const answer = await this.get(queryUrl(prometheus, query));
                if (answer.status !== 200) {
                    let said = "";
                    try {
                        parseVector(answer.body);
                    } catch (error) {
                        said = `: ${(error as Error).message}`;
                    }
                    throw new Error(`HTTP ${answer.status}${said}`);
                }
                return [key, parseVector(answer.body)] as const;
            }),
        );
        const values = new Map(entries);
        const up = values.get("up")!;
        const down = this.setup.services.filter((service) => up.get(service.name) === 0);
        const scrapeErrors = down.length === 0 ? new Map<string, string>() : await this.targetErrors(prometheus);
        return this.setup.services.map((service): Row => {
            const row = { service: service.name, model: service.model };
            const state = up.get(service.name);
            if (state === undefined) {
                return { ...row, error: `Prometheus does not scrape it (no up{service="${service.name}"})` };
            }
            if (state === 0) {
                const why = scrapeErrors.get(service.name);
                return { ...row, error: `down: ${why ? scrapeErrorWords(why) : "Prometheus's scrape fails"}` };
            }
            const figures: Record<string, number | undefined> = {};
            for (const key of FIGURE_KEYS) {
                const value = values.get(key)!.get(service.name);
                figures[key] = value !== undefined && Number.isFinite(value) ? value : undefined;
            }
            return { ...row, figures: figures as Figures };
        });
    }

    /** The last scrape errors Prometheus recorded, by service; none when it does not say. */
    private async targetErrors(prometheus: string): Promise<Map<string, string>> {
        try {
            const answer = await this.get(`${prometheus.replace(/\/+$/, "")}/api/v1/targets?state=active`);
            return answer.status === 200 ? parseTargetErrors(answer.body) : new Map();
        } catch {
            return new Map();
        }
    }
}
