/**
 * Runs the vllm-fleet program through the Pulumi Automation API.
 *
 * The program is handed to the engine in-process (an inline program): the Automation API serves it
 * over the engine's language-runtime protocol itself, so the real Pulumi engine and CLI run it even
 * where no `pulumi-language-nodejs` binary is installed (see test/toolchain/pins.env). The e2e tests, the demo and the benchmark all go through here; on a
 * machine with a regular Pulumi install, `pulumi up -s <stack>` runs the same program.
 */
import { ConfigMap, LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import { fleetProgram } from "../infra/program";
import { findProjectRoot } from "../infra/core/project";

/** The project root (Pulumi.yaml lives there). */
export const REPO_ROOT = findProjectRoot(__dirname);

export interface OpenStackOptions {
    /**
     * Where the project and stack settings live. Default: the repository, so the stack reads
     * stacks/Pulumi.<stack>.yaml. Tests pass a temporary directory and set config themselves.
     */
    readonly workDir?: string;
    /** Config to set on the stack (written to its stack settings file) before running. */
    readonly config?: ConfigMap;
    /** Extra environment for the CLI (backend URL, passphrase, ...); defaults to this process's. */
    readonly envVars?: Record<string, string>;
}

/** Creates or selects `stackName` of the vllm-fleet project with the inline program. */
export async function openStack(stackName: string, options: OpenStackOptions = {}): Promise<Stack> {
    const workDir = options.workDir ?? REPO_ROOT;
    const stack = await LocalWorkspace.createOrSelectStack(
        { stackName, projectName: "vllm-fleet", program: fleetProgram },
        {
            workDir,
            envVars: options.envVars,
            projectSettings:
                workDir === REPO_ROOT
                    ? undefined
                    : { name: "vllm-fleet", runtime: "nodejs", description: "vllm-fleet (temporary workspace)" },
        },
    );
    if (options.config) {
        await stack.setAllConfig(options.config);
    }
    return stack;
}
