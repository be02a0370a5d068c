/**
 * Runs the vllm-fleet program through the Pulumi Automation API.
 *
 * The program is handed to the engine in-process (an inline program): the Automation API serves it
 * over the engine's language-runtime protocol itself, so the real Pulumi engine and CLI run it even
 * where no `pulumi-language-nodejs` binary is installed (see test/toolchain/pins.env). The e2e tests, the demo and the benchmark all go through here; on a
 * machine with a regular Pulumi install, `pulumi up -s <stack>` runs the same program.
 */
import { ConfigMap, LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import * as runtimeSettings from "@pulumi/pulumi/runtime/settings";
import { fleetProgram } from "../infra/program";
import { findProjectRoot } from "../infra/core/project";

/**
 * Gives the gRPC clients of each inline run (to that run's engine and resource monitor) subchannels
 * of their own. grpc-js shares subchannels process-wide by address, and the SDK drops an inline
 * run's clients without closing them: a call made after a run's engine exited (seen after an up that
 * failed) leaves the subchannel to that engine's port in transient failure, where the dropped client
 * keeps reconnecting with backoff, and a later engine the OS gives the same port inherits it, so the
 * run's first call fails at once with "14 UNAVAILABLE: No connection established. Last error: null".
 * The CLI starts a process per run, so `pulumi up` never meets this. The options object is the SDK's
 * own (internal, read each time a client is made): if an SDK upgrade drops it, this fails loudly.
 */
export function ownSubchannelsPerRun(): Record<string, unknown> {
    const options = (runtimeSettings as { grpcClientOptions?: Record<string, unknown> }).grpcClientOptions;
    if (typeof options !== "object" || options === null) {
        throw new Error("@pulumi/pulumi/runtime/settings has no grpcClientOptions: the Automation API's gRPC clients cannot be given their own subchannels");
    }
    options["grpc.use_local_subchannel_pool"] = 1;
    return options;
}
ownSubchannelsPerRun();

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
