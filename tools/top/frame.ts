/** One frame of `npm run top` as text: a header, a table of the services, a footer; at most `width` columns. */

/** A service's figures; undefined: not known (yet), shown as "-". */
export interface Figures {
    /** Generated tokens per second over the last minute. */
    readonly tokensPerSecond?: number;
    /** Requests running, and waiting, now. */
    readonly running?: number;
    readonly waiting?: number;
    /** KV cache in use, 0..100. */
    readonly kvCachePercent?: number;
    /** The median time to first token of the requests of the last minute, in seconds. */
    readonly ttftP50Seconds?: number;
}

/** A row of the table: a service and its figures, or why it has none. */
export interface Row {
    readonly service: string;
    readonly model?: string;
    readonly figures?: Figures;
    /** Set when the service (or its source) did not answer: shown instead of the figures. */
    readonly error?: string;
}

export interface FrameHeader {
    /** The stack's name; undefined when the services came from --endpoints. */
    readonly stack?: string;
    readonly time: Date;
    /** Where the figures come from, e.g. "Prometheus http://10.230.0.10:9090". */
    readonly source: string;
    readonly intervalSeconds: number;
    /** A live view (a footer saying how to quit) rather than one frame for a script. */
    readonly interactive: boolean;
}

export const FRAME_WIDTH = 80;
const GAP = "  ";

/** The columns holding numbers, their headings and widths (right-aligned). */
const NUMBER_COLUMNS: readonly { readonly heading: string; readonly width: number; readonly of: (figures: Figures) => string }[] = [
    { heading: "tok/s", width: 8, of: (figures) => formatRate(figures.tokensPerSecond) },
    { heading: "run", width: 5, of: (figures) => formatCount(figures.running) },
    { heading: "wait", width: 5, of: (figures) => formatCount(figures.waiting) },
    { heading: "KV %", width: 6, of: (figures) => formatFixed(figures.kvCachePercent, 1) },
    { heading: "TTFT p50", width: 9, of: (figures) => formatSeconds(figures.ttftP50Seconds) },
];

const known = (value: number | undefined): value is number => value !== undefined && Number.isFinite(value);

function formatFixed(value: number | undefined, digits: number): string {
    return known(value) ? value.toFixed(digits) : "-";
}

/** Tokens per second: one decimal, none from 100 000 on. */
export function formatRate(value: number | undefined): string {
    return known(value) ? value.toFixed(Math.abs(value) >= 100_000 ? 0 : 1) : "-";
}

/** A number of requests: whole when it is, else one decimal (a gauge summed over engines may not be). */
export function formatCount(value: number | undefined): string {
    return known(value) ? (Number.isInteger(value) ? String(value) : value.toFixed(1)) : "-";
}

/** A duration: milliseconds under a second, else seconds with two decimals (none from 100 s on). */
export function formatSeconds(value: number | undefined): string {
    if (!known(value)) {
        return "-";
    }
    const ms = Math.round(value * 1000);
    if (ms < 1000) {
        return `${ms} ms`;
    }
    return value >= 100 ? `${Math.round(value)} s` : `${value.toFixed(2)} s`;
}

/** `text` cut to `width` columns, its end marked with "~" when cut. */
function fit(text: string, width: number): string {
    return text.length <= width ? text : width <= 1 ? text.slice(0, width) : `${text.slice(0, width - 1)}~`;
}

/** Local time as YYYY-MM-DD HH:MM:SS. */
export function formatTime(time: Date): string {
    const two = (value: number) => String(value).padStart(2, "0");
    return `${time.getFullYear()}-${two(time.getMonth() + 1)}-${two(time.getDate())} ${two(time.getHours())}:${two(time.getMinutes())}:${two(time.getSeconds())}`;
}

/** The frame's lines joined with "\n" (no trailing newline); no line longer than `width`. */
export function renderFrame(header: FrameHeader, rows: readonly Row[], width = FRAME_WIDTH): string {
    const numbers = NUMBER_COLUMNS.reduce((total, column) => total + GAP.length + column.width, 0);
    const serviceWidth = Math.min(16, Math.max("service".length, ...rows.map((row) => row.service.length)));
    const modelWidth = Math.max("model".length, width - numbers - serviceWidth - GAP.length);
    const line = (service: string, model: string, rest: string) => `${fit(service, serviceWidth).padEnd(serviceWidth)}${GAP}${fit(model, modelWidth).padEnd(modelWidth)}${rest}`;
    const table = [
        line("service", "model", NUMBER_COLUMNS.map((column) => GAP + column.heading.padStart(column.width)).join("")),
        ...rows.map((row) => {
            if (row.error !== undefined || !row.figures) {
                return line(row.service, row.model ?? "-", `${GAP}${row.error ?? "no figures"}`);
            }
            const figures = row.figures;
            return line(row.service, row.model ?? "-", NUMBER_COLUMNS.map((column) => GAP + fit(column.of(figures), column.width).padStart(column.width)).join(""));
        }),
    ];
    const footer = header.interactive
        ? `q quits; refreshed every ${header.intervalSeconds} s; tok/s and TTFT p50 over the last minute`
        : "tok/s and TTFT p50 over the last minute";
    return [
        `vllm-fleet top   ${header.stack === undefined ? "no stack (--endpoints)" : `stack ${header.stack}`}   ${formatTime(header.time)}`,
        `source: ${header.source}`,
        "",
        ...table,
        "",
        footer,
    ]
        .map((text) => fit(text.trimEnd(), width))
        .join("\n");
}
