/**
 * The Prometheus text exposition format (version 0.0.4, what vLLM's /metrics serves through
 * prometheus_client), read strictly: every line is a comment (`# HELP`, `# TYPE`, any other `#`),
 * blank, or one sample `name{label="value",...} value [timestamp]`. Anything else is refused with
 * its line number, so a page that is not /metrics (a proxy's error page, HTML) is said, not misread.
 */

/** One sample: a series (name and labels) and its value. */
export interface Sample {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly value: number;
    /** Milliseconds since the epoch, when the line carries one. */
    readonly timestamp?: number;
}

/** A page of samples, and the `# TYPE` of each family that declared one. */
export interface Exposition {
    readonly samples: readonly Sample[];
    readonly types: ReadonlyMap<string, string>;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

/** A number as Go's ParseFloat reads a sample value (decimal, exponent, NaN, ±Inf). */
export function parseSampleValue(text: string): number | undefined {
    if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
        return Number(text);
    }
    if (/^nan$/i.test(text)) {
        return NaN;
    }
    const inf = /^([+-]?)inf(inity)?$/i.exec(text);
    return inf ? (inf[1] === "-" ? -Infinity : Infinity) : undefined;
}

/** A series' identity: its name and its labels in label-name order. */
export function seriesKey(name: string, labels: Readonly<Record<string, string>>): string {
    const names = Object.keys(labels).sort();
    return `${name}{${names.map((label) => `${label}=${JSON.stringify(labels[label])}`).join(",")}}`;
}

class LineError extends Error {}

/** Reads one sample line (no leading `#`). */
function parseSampleLine(line: string): Sample {
    let rest = line;
    const name = METRIC_NAME.exec(rest)?.[0];
    if (!name) {
        throw new LineError(`expected a metric name, got ${JSON.stringify(line.slice(0, 40))}`);
    }
    rest = rest.slice(name.length);
    // No prototype: a label may be named anything, "constructor" and "__proto__" included.
    const labels: Record<string, string> = Object.create(null);
    if (rest.replace(/^[ \t]+/, "").startsWith("{")) {
        rest = rest.replace(/^[ \t]+/, "").slice(1).replace(/^[ \t]+/, "");
        while (!rest.startsWith("}")) {
            const label = LABEL_NAME.exec(rest)?.[0];
            if (!label) {
                throw new LineError(`${name}: expected a label name or "}", got ${JSON.stringify(rest.slice(0, 20))}`);
            }
            rest = rest.slice(label.length).replace(/^[ \t]+/, "");
            if (!rest.startsWith("=")) {
                throw new LineError(`${name}: expected "=" after the label ${label}`);
            }
            rest = rest.slice(1).replace(/^[ \t]+/, "");
            if (!rest.startsWith('"')) {
                throw new LineError(`${name}: expected a quoted value for the label ${label}`);
            }
            let value = "";
            let index = 1;
            for (; index < rest.length && rest[index] !== '"'; index++) {
                if (rest[index] === "\\") {
                    const escaped = rest[++index];
                    if (escaped === "\\" || escaped === '"') {
                        value += escaped;
                    } else if (escaped === "n") {
                        value += "\n";
                    } else {
                        throw new LineError(`${name}: the label ${label} has an unknown escape \\${escaped ?? ""}`);
                    }
                } else {
                    value += rest[index];
                }
            }
            if (index >= rest.length) {
                throw new LineError(`${name}: the value of the label ${label} is not closed`);
            }
            if (Object.prototype.hasOwnProperty.call(labels, label)) {
                throw new LineError(`${name}: the label ${label} is given twice`);
            }
            labels[label] = value;
            rest = rest.slice(index + 1).replace(/^[ \t]+/, "");
            if (rest.startsWith(",")) {
                rest = rest.slice(1).replace(/^[ \t]+/, "");
            } else if (!rest.startsWith("}")) {
                throw new LineError(`${name}: expected "," or "}" after the label ${label}`);
            }
        }
        rest = rest.slice(1);
    }
    if (!/^[ \t]/.test(rest)) {
        throw new LineError(`${name}: expected a space and a value after the series`);
    }
    const fields = rest.trim().split(/[ \t]+/);
    if (fields.length > 2) {
        throw new LineError(`${name}: expected a value and at most a timestamp, got ${JSON.stringify(rest.trim())}`);
    }
    const value = parseSampleValue(fields[0]);
    if (value === undefined) {
        throw new LineError(`${name}: ${JSON.stringify(fields[0])} is not a number`);
    }
    if (fields.length === 2) {
        if (!/^-?\d+$/.test(fields[1])) {
            throw new LineError(`${name}: the timestamp ${JSON.stringify(fields[1])} is not whole milliseconds`);
        }
        return { name, labels, value, timestamp: Number(fields[1]) };
    }
    return { name, labels, value };
}

/** Parses a /metrics page; throws `line N: ...` at the first line that is not the format. */
export function parseExposition(text: string): Exposition {
    const samples: Sample[] = [];
    const types = new Map<string, string>();
    const seen = new Set<string>();
    const lines = text.split("\n");
    lines.forEach((raw, index) => {
        const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
        try {
            if (line.trim() === "") {
                return;
            }
            if (line.startsWith("#")) {
                const meta = /^#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(line);
                if (!meta) {
                    return; // any other comment
                }
                const [, keyword, family, rest] = meta;
                if (METRIC_NAME.exec(family)?.[0] !== family) {
                    throw new LineError(`# ${keyword}: ${JSON.stringify(family)} is not a metric name`);
                }
                if (keyword === "TYPE") {
                    const type = (rest ?? "").trim();
                    if (!TYPES.has(type)) {
                        throw new LineError(`# TYPE ${family}: expected one of ${[...TYPES].join(", ")}, got ${JSON.stringify(type)}`);
                    }
                    if (types.has(family)) {
                        throw new LineError(`# TYPE ${family}: given twice`);
                    }
                    types.set(family, type);
                }
                return;
            }
            const sample = parseSampleLine(line);
            const key = seriesKey(sample.name, sample.labels);
            if (seen.has(key)) {
                throw new LineError(`${key}: the same series twice`);
            }
            seen.add(key);
            samples.push(sample);
        } catch (error) {
            if (error instanceof LineError) {
                throw new Error(`line ${index + 1}: ${error.message}`);
            }
            throw error;
        }
    });
    return { samples, types };
}
