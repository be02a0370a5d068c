/**
 * Draws the timeline of any deployment (npm run timeline -- <event-log.jsonl> [stack-export.json]
 * [-o out.svg] [--title TEXT]): after `pulumi up --event-log events.jsonl` and, for the real
 * dependencies, `pulumi stack export --file state.json`. Prints the critical path, the time outside
 * it and (with the export) the longest dependency chain; writes an SVG Gantt chart (default: the
 * event log's name with .svg).
 */
import * as fs from "fs";
import * as path from "path";
import { invocationDir } from "../command";
import { buildTimeline, longestChain } from "./criticalPath";
import { parseEventLog, resourceGraphFromExport } from "./events";
import { formatSeconds, formatTimelineSummary } from "./summary";
import { renderTimelineSvg } from "./svg";

/** The CLI's arguments. */
export interface TimelineCliArgs {
    readonly eventLog: string;
    readonly stackExport?: string;
    readonly output: string;
    readonly title?: string;
}

const USAGE = "usage: npm run timeline -- <event-log.jsonl> [stack-export.json] [-o out.svg] [--title TEXT]";

/** Parses the command line (paths are resolved against the directory npm was started from). */
export function parseTimelineArgs(argv: readonly string[], cwd: string): TimelineCliArgs {
    const positional: string[] = [];
    let output: string | undefined;
    let title: string | undefined;
    for (let index = 0; index < argv.length; index++) {
        const arg = argv[index];
        if ((arg === "-o" || arg === "--output" || arg === "--title") && argv[index + 1] !== undefined) {
            if (arg === "--title") {
                title = argv[++index];
            } else {
                output = argv[++index];
            }
        } else if (arg.startsWith("-")) {
            throw new Error(`unknown option ${arg}\n${USAGE}`);
        } else {
            positional.push(arg);
        }
    }
    if (positional.length < 1 || positional.length > 2) {
        throw new Error(USAGE);
    }
    const eventLog = path.resolve(cwd, positional[0]);
    return {
        eventLog,
        stackExport: positional[1] === undefined ? undefined : path.resolve(cwd, positional[1]),
        output: output === undefined ? eventLog.replace(/(\.jsonl?|\.log)?$/, ".svg") : path.resolve(cwd, output),
        title,
    };
}

function main(): void {
    const args = parseTimelineArgs(process.argv.slice(2), invocationDir());
    const events = parseEventLog(fs.readFileSync(args.eventLog, "utf8"));
    const graph = args.stackExport ? resourceGraphFromExport(JSON.parse(fs.readFileSync(args.stackExport, "utf8"))) : undefined;
    const timeline = buildTimeline(events, { graph });
    const title = args.title ?? `timeline of ${path.basename(args.eventLog)}`;
    fs.writeFileSync(args.output, renderTimelineSvg(timeline, { title }));
    console.log(formatTimelineSummary(timeline));
    if (graph) {
        const chain = longestChain(timeline, graph);
        console.log(
            `  with these step durations and unlimited parallelism the graph needs ${formatSeconds(chain.ms)} of steps ` +
                `(the longest dependency chain: ${chain.names.join(" → ")})`,
        );
    } else {
        console.log("(no stack export given: the critical path is inferred from the times; pass `pulumi stack export --file state.json` for the real dependencies)");
    }
    console.log(`timeline: ${args.output}`);
}

if (require.main === module) {
    try {
        main();
    } catch (error) {
        console.error((error as Error).message);
        process.exit(1);
    }
}
