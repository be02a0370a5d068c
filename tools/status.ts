/**
 * `npm run status -- [--stack NAME]`: a read-only look at a deployed stack (the selected stack by
 * default). It reads the stack's settings and secrets through the Pulumi CLI, reads every node the
 * way `pulumi preview` does (components/observer.ts; nothing on a host changes), and prints what
 * tools/statusReport.ts makes of it. Exit code 0 when serving, 1 when not, 2 when it cannot tell.
 */
import { Workspace } from "@pulumi/pulumi/automation";
import { observeOverSsh, readOverSsh } from "../components/observer";
import { scriptProgram } from "../components/shell";
import { CONFIG_KEYS, CONFIG_NAMESPACE, GATEWAY_ROUTER_PORT, parseFleetConfig, serviceConfig } from "../infra/core/config";
import { findProjectRoot } from "../infra/core/project";
import { rawConfigValues, resolvePrivateKeyText } from "../infra/core/config/stackValues";
import { gatewayContainer, serviceContainers } from "../infra/core/names";
import { ofService } from "../infra/core/observe";
import { runCommand } from "./command";
import { projectStack } from "./stack";
import { GatewayLook, GatewayOutputsReport, ImageReport, MonitoringLook, MonitoringOutputsReport, StatusReport, gatewayReport, monitoringReport, statusReport } from "./statusReport";

/** One HTTP call with a deadline: status and body, or why there was no answer. */
async function httpCall(url: string, init: RequestInit = {}): Promise<{ status: number; body: string } | { error: string }> {
    try {
        const response = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
        return { status: response.status, body: await response.text() };
    } catch (error) {
        return { error: (error as Error).message };
    }
}

/**
 * A look at the gateway: the router's workers (`readWorkers`: its admin API answers on the loopback
 * of its node only, so it is asked there, over SSH), and one completion of each model through the
 * gateway from this machine with the stack's key, as a client sees it (read-only, as the watchdog's probe).
 */
export async function lookAtGateway(gateway: GatewayOutputsReport, apiKey: string, readWorkers: () => Promise<string>): Promise<GatewayLook> {
    const workers = await readWorkers().then(
        (json) => ({ json }),
        (error: Error) => ({ error: error.message }),
    );
    const completions: Record<string, { status: number; detail: string }> = {};
    for (const model of Object.keys(gateway.routes)) {
        const answer = await httpCall(`${gateway.endpoint}/completions`, {
            method: "POST",
            headers: { "Content-Type": "application/json", ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
            body: JSON.stringify({ model, prompt: "Say hello.", max_tokens: 4, temperature: 0 }),
        });
        completions[model] = "error" in answer ? { status: 0, detail: answer.error } : { status: answer.status, detail: answer.status === 200 ? "" : answer.body.replace(/\s+/g, " ").slice(0, 120) };
    }
    return { workers, completions };
}

/** A look at Prometheus from this machine, as a client (read-only): its targets and its alerts. */
export async function lookAtMonitoring(endpoint: string): Promise<MonitoringLook> {
    const read = async (route: string) => {
        const answer = await httpCall(`${endpoint}${route}`);
        if ("error" in answer) {
            throw new Error(answer.error);
        }
        if (answer.status !== 200) {
            throw new Error(`HTTP ${answer.status} from ${route}`);
        }
        return JSON.parse(answer.body).data;
    };
    try {
        return { targets: await read("/api/v1/targets?state=active"), alerts: await read("/api/v1/alerts") };
    } catch (error) {
        return { error: (error as Error).message };
    }
}

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
    // Each service reported on its own nodes; each node read once for all the services on it.
    const views = config.services.map((service) => ({ config: serviceConfig(config, service), containers: serviceContainers(service.name) }));
    const observed = await observeOverSsh(views, { privateKey, privateKeyPath, stack: stackName }, { rayNodes: true });
    const reports = config.services.map((service, index) => {
        const { config: view, containers } = views[index];
        const image = images[service.name]?.image ?? (config.services.length === 1 ? (outputs.image?.value as ImageReport | undefined) : undefined);
        return statusReport(view, observed[index].map((observation) => ofService(observation, containers)), containers, image);
    });
    const gateway = outputs.gateway?.value as GatewayOutputsReport | undefined;
    const gatewayNode = config.nodes.find((node) => node.name === gateway?.node);
    const readWorkers = () =>
        gatewayNode
            ? readOverSsh(
                  gatewayNode,
                  config.timeouts.sshConnectSeconds,
                  { privateKey, privateKeyPath, stack: stackName },
                  scriptProgram("gateway-workers", { CONTAINER: gatewayContainer(stackName), PORT: GATEWAY_ROUTER_PORT }),
                  config.timeouts.sshConnectSeconds * 2 + 30,
              )
            : Promise.reject(new Error(`the gateway's node ${gateway?.node} is not in vllm-fleet:nodes`));
    const gatewayRow = gateway ? gatewayReport(gateway, await lookAtGateway(gateway, String(outputs.apiKey?.value ?? ""), readWorkers)) : undefined;
    const services: StatusReport =
        reports.length === 1
            ? reports[0]
            : {
                  text: reports.map((report, index) => `service ${config.services[index].name}\n${report.text.replace(/^/gm, "  ")}`).join("\n"),
                  serving: reports.every((report) => report.serving),
              };
    const withGateway = gatewayRow ? { text: `${services.text}\n${gatewayRow.text}`, serving: services.serving && gatewayRow.serving } : services;
    // The alerts Prometheus fires (monitoring): what an owner looks at, beside the verdict.
    const monitoring = outputs.monitoring?.value as MonitoringOutputsReport | undefined;
    return monitoring ? { ...withGateway, text: `${withGateway.text}\n${monitoringReport(monitoring, await lookAtMonitoring(monitoring.endpoint))}` } : withGateway;
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
