/**
 * How a long step says how far it got while it runs: a line on its standard error that starts with
 * `progress: ` (the readiness gate's phases of vLLM's start, scripts/vllm-ready.sh). Both runners
 * show it in `pulumi up` as it comes:
 *
 * - `pulumi-command`: the command provider shows every line of a command's output as it comes, on
 *   the resource's row (a status message: it is not kept among the diagnostics at the end).
 * - `builtin`: the dynamic provider has no way to log for its resource, so it prints each progress
 *   line, as `<resource>: <what>`, on its own standard output, which the engine shows as it comes,
 *   as a message of the stack (the row `pulumi:pulumi:Stack`, and among the diagnostics at the end).
 *
 * Pure and self-contained (no imports): the builtin runner's dynamic provider serializes it.
 */

/** The start of a progress line. */
export const PROGRESS_PREFIX = "progress: ";

/**
 * A reader of a step's standard error, chunk by chunk (a line may span chunks), that hands `show`
 * each progress line once it is whole, as `<resource>: <what>`.
 */
export function progressRelay(resource: string, show: (line: string) => void): (chunk: string) => void {
    let partial = "";
    return (chunk: string) => {
        const lines = (partial + chunk).split("\n");
        partial = lines.pop() ?? "";
        for (const line of lines) {
            const text = line.endsWith("\r") ? line.slice(0, -1) : line;
            if (text.startsWith(PROGRESS_PREFIX)) {
                show(`${resource}: ${text.slice(PROGRESS_PREFIX.length)}`);
            }
        }
    };
}
