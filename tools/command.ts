/** What the tools' commands share as processes: where the user typed them, and how they end. */

/** The directory the user typed the command in: npm runs scripts in the package directory and names the other in INIT_CWD. */
export function invocationDir(): string {
    return process.env.INIT_CWD ?? process.cwd();
}

/**
 * Runs a command's `main` on the process's arguments and exits with the code it returns; when it
 * throws, prints `<name>: <message>` and exits with 2 (the command could not run, or cannot tell).
 */
export function runCommand(name: string, main: (argv: readonly string[]) => Promise<number>): void {
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (error: Error) => {
            console.error(`${name}: ${error.message}`);
            process.exit(2);
        },
    );
}
