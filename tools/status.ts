/**
 * `npm run status -- [--stack NAME]`: a read-only look at a deployed stack (the selected stack by
 * default). It reads the stack's settings and secrets through the Pulumi CLI, reads every node the
 * way `pulumi preview` does (components/observer.ts; nothing on a host changes), and prints what
 * tools/statusReport.ts makes of it. Exit code 0 when serving, 1 when not, 2 when it cannot tell.
 */
import { LocalWorkspace } from "@pulumi/pulumi/automation";
import { observeOverSsh } from "../components/observer";
import { CONFIG_KEYS, CONFIG_NAMESPACE, ConfigKey, parseFleetConfig } from "../infra/config";
import { findProjectRoot } from "../infra/project";
import { resolvePrivateKeyText } from "../infra/program";
import { statusReport } from "./statusReport";

async function main(argv: readonly string[]): Promise<number> {
    const stackFlag = argv.indexOf("--stack");
    const root = findProjectRoot(__dirname);
    const workspace = await LocalWorkspace.create({ workDir: root });
    const stackName = stackFlag >= 0 ? argv[stackFlag + 1] : (await workspace.stack())?.name;
    if (!stackName) {
        console.error("no stack selected: npm run status -- --stack NAME");
        return 2;
    }
    const values = await workspace.getAllConfig(stackName);
    const raw: Partial<Record<ConfigKey, unknown>> = {};
    for (const key of CONFIG_KEYS) {
        const entry = values[`${CONFIG_NAMESPACE}:${key}`];
        if (entry !== undefined) {
            try {
                raw[key] = JSON.parse(entry.value);
            } catch {
                raw[key] = entry.value;
            }
        }
    }
    const config = parseFleetConfig(raw);
    const secret = values[`${CONFIG_NAMESPACE}:sshPrivateKey`]?.value;
    const { privateKey, privateKeyPath } = resolvePrivateKeyText(config, secret, root);
    const observations = await observeOverSsh(
        config,
        { privateKey, privateKeyPath, apiKey: values[`${CONFIG_NAMESPACE}:vllmApiKey`]?.value ?? "", stack: stackName },
        { rayNodes: true },
    );
    const report = statusReport(config, observations);
    console.log(`stack ${stackName}\n${report.text}`);
    return report.serving ? 0 : 1;
}

main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: Error) => {
        console.error(`status: ${error.message}`);
        process.exit(2);
    },
);
