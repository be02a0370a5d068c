/**
 * A real terminal for the tests of `npm run top`: tmux runs a command in a session of its own
 * server (-L), the test reads the screen with capture-pane, presses keys, and checks the program
 * ended with 0 and gave the terminal back. Used by the unit test (stand-ins for the services) and
 * the e2e test (a deployed stack).
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { expect } from "vitest";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One tmux server of its own (-L) and a session in it. */
export class Tmux {
    private static count = 0;
    readonly socket = `vllm-fleet-top-test-${process.pid}-${++Tmux.count}`;
    readonly session = `top-${process.pid}-${Tmux.count}`;

    run(...args: string[]): string {
        const result = spawnSync("tmux", ["-L", this.socket, ...args], { encoding: "utf8" });
        if (result.status !== 0) {
            throw new Error(`tmux ${args.join(" ")}: ${result.error?.message ?? result.stderr}`);
        }
        return result.stdout;
    }

    screen(): string {
        return this.run("capture-pane", "-p", "-J", "-t", this.session);
    }

    /** A pane's format variables, e.g. "#{pane_dead}". */
    show(format: string): string {
        return this.run("display-message", "-p", "-t", this.session, format).trim();
    }

    kill(): void {
        spawnSync("tmux", ["-L", this.socket, "kill-session", "-t", this.session]);
        spawnSync("tmux", ["-L", this.socket, "kill-server"]);
        // The server leaves its socket behind.
        fs.rmSync(path.join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.()}`, this.socket), { force: true });
    }
}

/** Polls `look` until it returns something, or fails after `ms` with what `explain` says. */
export async function waitFor<T>(look: () => T | undefined, ms: number, explain: () => string): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
        const found = look();
        if (found !== undefined) {
            return found;
        }
        if (Date.now() > deadline) {
            throw new Error(`gave up after ${ms / 1000} s: ${explain()}`);
        }
        await sleep(150);
    }
}

export const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

/** A program running in a tmux session. */
export interface InTerminal {
    readonly tmux: Tmux;
}

/**
 * Runs `command` in a new tmux session 100×30 (in `cwd`, with `env` added), under a shell that,
 * once the command has ended, prints its status and the terminal's modes (stty -a) up to a line
 * `end of modes`, then sleeps, so that the screen and the terminal's state stay as the command left
 * them (a pane whose shell ended scrolls for tmux's "Pane is dead" line and hides the cursor).
 * `dir` holds tmux's configuration. Kill the session with `tmux.kill()`. Fails at once, saying so,
 * without tmux.
 */
export function startInTerminal(command: readonly string[], options: { dir: string; env?: Record<string, string>; cwd?: string }): InTerminal {
    const version = spawnSync("tmux", ["-V"], { encoding: "utf8" });
    if (version.error || version.status !== 0) {
        throw new Error(`tmux is needed to run the tool in a real terminal, and it is not here (${version.error?.message ?? version.stderr}): apt-get install tmux`);
    }
    const tmux = new Tmux();
    const conf = path.join(options.dir, `${tmux.socket}.conf`);
    // Should the shell end early, the pane stays, so its last screen can be read.
    fs.writeFileSync(conf, "set -g remain-on-exit on\nset -g default-shell /bin/sh\nset -g status off\n");
    const program = `${command.map(quote).join(" ")}; echo "exited $?"; stty -a; echo "end of modes"; exec sleep 3600`;
    const environment = Object.entries(options.env ?? {}).flatMap(([name, value]) => ["-e", `${name}=${value}`]);
    const directory = options.cwd ? ["-c", options.cwd] : [];
    tmux.run("-f", conf, "new-session", "-d", "-s", tmux.session, "-x", "100", "-y", "30", ...directory, ...environment, program);
    return { tmux };
}

/**
 * Presses `key` on the program `startInTerminal` ran; checks it ended with 0 (the status its shell
 * printed) and gave the terminal back as it was (the main screen with nothing of `frameMark` left
 * on it, the cursor shown, line editing and echo on); returns the screen after.
 */
export async function quitWith({ tmux }: InTerminal, key: string, frameMark: string): Promise<string> {
    expect(tmux.show("#{alternate_on} #{cursor_flag}")).toBe("1 0");
    tmux.run("send-keys", "-t", tmux.session, key);
    const after = await waitFor(
        () => {
            const text = tmux.screen();
            return /exited \d+/.test(text) && /^end of modes$/m.test(text) ? text : undefined;
        },
        30_000,
        () => `the screen after ${key}:\n${tmux.screen()}`,
    );
    expect(after).toContain("exited 0");
    expect(tmux.show("#{alternate_on} #{cursor_flag}")).toBe("0 1");
    expect(after).not.toContain(frameMark);
    for (const mode of ["icanon", "echo", "isig", "icrnl"]) {
        expect(after, mode).toMatch(new RegExp(`(^|\\s)${mode}(\\s|$)`, "m"));
    }
    return after;
}
