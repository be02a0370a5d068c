/**
 * The monitoring (config `monitoring`, the plan's infra/core/plan/monitoring.ts): a node exporter (and
 * with monitoring.gpuExporter NVIDIA's DCGM exporter) on every node, Prometheus on its node with its data directory, and the step that gives the running
 * Prometheus its targets, alert rules and the stack's key (scripts/monitoring-config.sh), in place:
 * a service added or removed keeps the container and its data. Ready when Prometheus has loaded the
 * rules and scraped every target up, so `up` never reports monitoring that does not see the fleet.
 */
import * as pulumi from "@pulumi/pulumi";
import { MonitoringPlan, withGrafanaPassword } from "../infra/core/plan";
import { DIR_REMOVE } from "./compileCache";
import { realizeContainer } from "./container";
import { CommandRunner, hostCommand } from "./hostCommand";
import { SparkNode } from "./sparkNode";
import { scriptProgram, shQuote } from "./shell";

export interface MonitoringArgs {
    /** Every node of the stack, each with its images delivered (a node exporter runs on each). */
    readonly nodes: readonly SparkNode[];
    readonly plan: MonitoringPlan;
    /** The stack's API key (a secret), which Prometheus scrapes the services with; none: they are open. */
    readonly apiKey?: pulumi.Input<string>;
    /** The steps on each node before anything of the stack runs there (its firewall, its preparation). */
    readonly nodeSteps: readonly pulumi.Resource[];
    /** What serves before Prometheus is given its targets: every service (their readiness gates), the gateway. */
    readonly serving: readonly pulumi.Resource[];
    readonly runner: CommandRunner;
    readonly containerDriver: "docker" | "ssh";
}

/** What the monitoring puts out (the stack output `monitoring`). */
export interface MonitoringOutputs {
    readonly node: string;
    /** Prometheus as clients reach it, e.g. http://10.1.230.180:9090. */
    readonly endpoint: string;
    /** Every target, `<job> <host:port>`, as Prometheus scraped it up. */
    readonly targets: string[];
    /** Grafana as clients reach it (user admin, the stack's API key as password); absent without monitoring.grafana. */
    readonly grafana?: string;
}

/** The scripts of the data directory's step: made at create, removed at delete when asked. */
const MONITORING_DATA = ["docker-state", "monitoring-data"];

export class Monitoring extends pulumi.ComponentResource {
    public readonly outputs: pulumi.Output<MonitoringOutputs>;

    constructor(name: string, args: MonitoringArgs, opts?: pulumi.ComponentResourceOptions) {
        super("vllm-fleet:monitoring:Monitoring", name, {}, opts);
        const { plan } = args;
        const nodeOf = (node: string) => args.nodes.find((access) => access.nodeName === node)!;
        const driving = { driver: args.containerDriver, runner: args.runner };
        const exporters = [
            ...plan.exporters.map((exporter) => ({ ...exporter, resource: `${exporter.node}-node-exporter` })),
            ...plan.gpuExporters.map((exporter) => ({ ...exporter, resource: `${exporter.node}-gpu-exporter` })),
        ].map((exporter) =>
            realizeContainer(driving.driver, driving.runner, exporter.resource, nodeOf(exporter.node), pulumi.output(exporter.spec), {
                parent: this,
                dependsOn: [nodeOf(exporter.node), ...args.nodeSteps],
            }),
        );
        const node = nodeOf(plan.node);
        const data = hostCommand(
            args.runner,
            `${name}-data`,
            {
                connection: node.connection,
                create: scriptProgram(MONITORING_DATA, { DIR: plan.data.dir, IMAGE: plan.image.name, OWNER: plan.data.uid }),
                delete: plan.data.removeOnDestroy
                    ? scriptProgram(DIR_REMOVE, { DIR: plan.data.dir, WHAT: "Prometheus data", IMAGE: plan.image.name })
                    : `echo ${shQuote(`Prometheus's data kept in ${plan.data.dir} (monitoring.removeDataOnDestroy is false)`)}`,
            },
            { parent: this, dependsOn: [node, ...args.nodeSteps] },
        );
        const prometheus = realizeContainer(driving.driver, driving.runner, `${name}-prometheus`, node, pulumi.output(plan.spec), { parent: this, dependsOn: [data.resource] });
        const step = plan.configStep;
        const configured = hostCommand(
            args.runner,
            `${name}-config`,
            {
                connection: node.connection,
                create: pulumi.output(args.apiKey ?? "").apply((key) =>
                    scriptProgram(["step-answer", "monitoring-config"], {
                        CONTAINER: step.container,
                        PORT: step.port,
                        FILE_PATHS: step.files.map((file) => file.path),
                        FILE_CONTENTS: step.files.map((file) => file.content),
                        KEY_FILE: key ? step.keyFile : "",
                        API_KEY: key,
                        OWNER: step.uid,
                        ADDRESSES: [...step.addresses],
                        RULE_GROUPS: step.ruleGroups,
                        TIMEOUT: step.timeoutSeconds,
                    }),
                ),
                // A new container gets its targets, rules and key again.
                triggers: [prometheus.revision],
            },
            { parent: this, dependsOn: [prometheus.resource, ...exporters.map((exporter) => exporter.resource), ...args.serving] },
        );
        const grafana = plan.grafana ? this.grafana(name, plan.grafana, node, args, prometheus.resource) : undefined;
        this.outputs = pulumi.all([configured.stdout, grafana ?? ""]).apply(([stdout]) => ({
            node: plan.node,
            endpoint: plan.endpoint,
            targets: stdout
                .split("\n")
                .filter((line) => line.startsWith("target "))
                .map((line) => line.slice("target ".length).replace(/ up$/, "")),
            ...(plan.grafana ? { grafana: plan.grafana.endpoint } : {}),
        }));
        this.registerOutputs({ outputs: this.outputs });
    }

    /** Grafana with its admin password (the stack's key), ready once it shows the dashboard; its answer. */
    private grafana(name: string, grafana: NonNullable<MonitoringPlan["grafana"]>, node: SparkNode, args: MonitoringArgs, prometheus: pulumi.Resource): pulumi.Output<string> {
        const key = pulumi.output(args.apiKey ?? "");
        const container = realizeContainer(args.containerDriver, args.runner, `${name}-grafana`, node, key.apply((password) => withGrafanaPassword(grafana.spec, password)), {
            parent: this,
            dependsOn: [prometheus],
        });
        return hostCommand(
            args.runner,
            `${name}-grafana-ready`,
            {
                connection: node.connection,
                create: key.apply((password) =>
                    scriptProgram(["step-answer", "grafana-ready"], { CONTAINER: grafana.spec.name, PORT: grafana.port, DASHBOARD_UID: grafana.dashboardUid, API_KEY: password, TIMEOUT: grafana.timeoutSeconds }),
                ),
                triggers: [container.revision],
            },
            { parent: this, dependsOn: [container.resource] },
        ).stdout;
    }
}
