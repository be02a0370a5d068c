/**
 * The demo (npm run demo), driven through the Automation API so that it runs where no Pulumi
 * language host is installed. Today it previews the `sim` stack (stacks/Pulumi.sim.yaml): the real
 * engine validating the real program and showing what it would do.
 */
import { openStack } from "../infra/automation";

async function main(): Promise<void> {
    const stack = await openStack("sim");
    const preview = await stack.preview({ onOutput: (text) => process.stdout.write(text) });
    console.log(`\npreview of stack sim: ${JSON.stringify(preview.changeSummary)}`);
}

main().catch((error: Error) => {
    console.error(error.message);
    process.exit(1);
});
