/**
 * `npm run status -- [--stack NAME]`: a read-only look at a deployed stack (the selected stack by
 * default). It reads the stack's settings and secrets through the Pulumi CLI, reads every node the
 * way `pulumi preview` does (components/observer.ts; nothing on a host changes), and prints what
 * tools/statusReport.ts makes of it. Exit code 0 when serving, 1 when not, 2 when it cannot tell.
 */
import { Workspace } from "@pulumi/pulumi/automation";
import { observeOverSsh } from "../components/observer";
import { CONFIG_KEYS, CONFIG_NAMESPACE, parseFleetConfig, serviceConfig } from "../infra/core/config";
import { findProjectRoot } from "../infra/core/project";
import { rawConfigValues, resolvePrivateKeyText } from "../infra/core/config/stackValues";
import { serviceContainers } from "../infra/core/names";
import { ofService } from "../infra/core/observe";
import { runCommand } from "./command";
import { projectStack } from "./stack";
import { ImageReport, StatusReport, statusReport } from "./statusReport";

/** Reads a stack's settings and secrets from `workspace`, then every node, and reports. */
export async function stackStatus(workspace: Workspace, stackName: string): Promise<StatusReport> {
    const root = findProjectRoot(__dirname);
    const values = await workspace.getAllConfig(stackName);
    const raw = rawConfigValues((key) => values[`${CONFIG_NAMESPACE}:${key}`]?.value, CONFIG_KEYS);
    const config = parseFleetConfig(raw);
    const secret = values[`${CONFIG_NAMESPACE}:sshPrivateKey`]?.value;
    const { privateKey, privateKeyPath } = resolvePrivateKeyText(config, secret, root);
    const outputs = await workspace.stackOutputs(stackName);
    const images = (outputs.services?.value ?? {}) as Record<string, { image?: ImageReport }>;
    // Each service read and reported on its own nodes, one after the other (over each node's shared connection).
    const reports: StatusReport[] = [];
    for (const service of config.services) {
        const view = serviceConfig(config, service);
        const containers = serviceContainers(service.name);
        const observations = await observeOverSsh(view, { privateKey, privateKeyPath, stack: stackName, containers }, { rayNodes: true });
        const image = images[service.name]?.image ?? (config.services.length === 1 ? (outputs.image?.value as ImageReport | undefined) : undefined);
        reports.push(statusReport(view, observations.map((observation) => ofService(observation, containers)), containers, image));
    }
    if (reports.length === 1) {
        return reports[0];
    }
    return {
        text: reports.map((report, index) => `service ${config.services[index].name}\n${report.text.replace(/^/gm, "  ")}`).join("\n"),
        serving: reports.every((report) => report.serving),
    };
}

async function main(argv: readonly string[]): Promise<number> {
    const stackFlag = argv.indexOf("--stack");
    const { workspace, stack: stackName } = await projectStack(stackFlag >= 0 ? argv[stackFlag + 1] : undefined);
    if (!stackName) {
        console.error("no stack selected: npm run status -- --stack NAME");
        return 2;
    }
    const report = await stackStatus(workspace, stackName);
    console.log(`stack ${stackName}\n${report.text}`);
    return report.serving ? 0 : 1;
}

if (require.main === module) {
    runCommand("status", main);
}
