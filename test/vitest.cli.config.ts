import { defineConfig } from "vitest/config";

// The users' default path (test/cli): the Pulumi CLI and its Node.js language host running the
// project directory's program, with the command and Docker provider plugins, on simulated Sparks.
// Skipped, with the reason, where those plugins are not installed. One file, one test at a time:
// it shares the Docker engine and the machine's cores with everything else.
export default defineConfig({
    test: {
        include: ["test/cli/**/*.test.ts"],
        root: ".",
        testTimeout: 20 * 60_000,
        hookTimeout: 20 * 60_000,
        fileParallelism: false,
    },
});
