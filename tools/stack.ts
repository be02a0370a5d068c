/**
 * The stack a tool (`npm run status`, `npm run loadtest`) works on, through the Pulumi CLI in the
 * project directory: the one named, else the selected one (undefined when none is).
 */
import { Workspace } from "@pulumi/pulumi/automation";
import { findProjectRoot } from "../infra/core/project";

export async function projectStack(name?: string): Promise<{ workspace: Workspace; stack?: string }> {
    // Loaded here, not at the top: a tool given everything on its command line never needs it.
    const { LocalWorkspace } = await import("@pulumi/pulumi/automation");
    const workspace = await LocalWorkspace.create({ workDir: findProjectRoot(__dirname) });
    return { workspace, stack: name ?? (await workspace.stack())?.name };
}
