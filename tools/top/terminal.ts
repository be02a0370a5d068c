/**
 * The live view in a terminal: the alternate screen with the cursor hidden, each frame drawn over
 * the last (cursor home, every line cleared to its end, the rest of the screen cleared: no
 * flicker), keys read raw; `q` or Ctrl-C (or SIGINT, SIGTERM, SIGHUP) ends it and gives the terminal
 * back as it was: raw mode off, cursor shown, alternate screen left.
 */

const ENTER_SCREEN = "\x1b[?1049h\x1b[?25l";
const LEAVE_SCREEN = "\x1b[?25h\x1b[?1049l";

/**
 * What to write to draw `frame` over the one on the screen, `height` lines at most (more would
 * scroll the screen, and the next frame would not land on this one).
 */
export function drawSequence(frame: string, height = Infinity): string {
    return `\x1b[H${frame
        .split("\n")
        .slice(0, Math.max(1, height))
        .map((line) => `${line}\x1b[K`)
        .join("\r\n")}\x1b[J`;
}

/** The exit code for a signal that ends the view (`q` and Ctrl-C end it with 0). */
const SIGNAL_CODES: Readonly<Record<string, number>> = { SIGINT: 0, SIGTERM: 143, SIGHUP: 129 };

/** A frame for a screen `width` columns wide. */
export type FrameSource = (width: number) => Promise<string>;

const errorFrame = (error: unknown) => `vllm-fleet top: ${(error as Error)?.message ?? String(error)}`;

/**
 * Draws `frame` every `intervalMs` (from the start of one refresh to the next; a slow refresh is
 * followed at once by the next) until a quit; resolves with the exit code.
 */
export function runLive(input: NodeJS.ReadStream, output: NodeJS.WriteStream, intervalMs: number, frame: FrameSource): Promise<number> {
    return new Promise<number>((resolve) => {
        let done = false;
        let timer: NodeJS.Timeout | undefined;
        let last = "vllm-fleet top: reading the first figures...";
        const width = () => Math.min(80, output.columns || 80);
        const draw = () => output.write(drawSequence(last, output.rows || 24));
        const restore = () => {
            if (input.isTTY) {
                input.setRawMode(false);
            }
            output.write(LEAVE_SCREEN);
        };
        const onExit = () => restore();
        const onKey = (chunk: Buffer | string) => {
            const text = chunk.toString();
            if (text.includes("q") || text.includes("Q") || text.includes("\x03")) {
                finish(0);
            }
        };
        const onSignal = (signal: NodeJS.Signals) => finish(SIGNAL_CODES[signal] ?? 1);
        const finish = (code: number) => {
            if (done) {
                return;
            }
            done = true;
            clearTimeout(timer);
            input.off("data", onKey);
            input.pause();
            output.off("resize", draw);
            for (const signal of Object.keys(SIGNAL_CODES)) {
                process.off(signal, onSignal);
            }
            process.off("exit", onExit);
            restore();
            resolve(code);
        };
        const tick = async () => {
            const started = Date.now();
            try {
                last = await frame(width());
            } catch (error) {
                last = errorFrame(error);
            }
            if (!done) {
                draw();
                timer = setTimeout(tick, Math.max(0, intervalMs - (Date.now() - started)));
            }
        };
        // Should anything end the process past finish(), the terminal is still given back.
        process.on("exit", onExit);
        for (const signal of Object.keys(SIGNAL_CODES)) {
            process.on(signal, onSignal);
        }
        output.write(ENTER_SCREEN);
        if (input.isTTY) {
            input.setRawMode(true);
        }
        input.on("data", onKey);
        input.resume();
        output.on("resize", draw);
        draw();
        void tick();
    });
}

/** Without a terminal (output to a pipe or file): each frame printed after the last, until a signal. */
export function runPlain(output: NodeJS.WritableStream, intervalMs: number, frame: FrameSource): Promise<number> {
    return new Promise<number>((resolve) => {
        let done = false;
        let timer: NodeJS.Timeout | undefined;
        const finish = (code: number) => {
            done = true;
            clearTimeout(timer);
            for (const name of Object.keys(SIGNAL_CODES)) {
                process.off(name, onSignal);
            }
            resolve(code);
        };
        const onSignal = (signal: NodeJS.Signals) => finish(SIGNAL_CODES[signal] ?? 1);
        for (const signal of Object.keys(SIGNAL_CODES)) {
            process.on(signal, onSignal);
        }
        // The reader went away (`| head`): done, as a pipe's writer ends.
        output.on("error", (error: NodeJS.ErrnoException) => finish(error.code === "EPIPE" ? 0 : 1));
        const tick = async () => {
            const started = Date.now();
            let text: string;
            try {
                text = await frame(80);
            } catch (error) {
                text = errorFrame(error);
            }
            if (!done) {
                output.write(`${text}\n\n`);
                timer = setTimeout(tick, Math.max(0, intervalMs - (Date.now() - started)));
            }
        };
        void tick();
    });
}
