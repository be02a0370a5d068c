import { defineConfig } from "vitest/config";

// Tests that drive the real Pulumi engine (and, for the deployment tests, the simulated Sparks).
// One file at a time: they share the Docker engine and the machine's two cores.
export default defineConfig({
    test: {
        include: ["test/e2e/**/*.test.ts"],
        root: ".",
        testTimeout: 15 * 60_000,
        hookTimeout: 15 * 60_000,
        fileParallelism: false,
    },
});
