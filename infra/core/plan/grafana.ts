/**
 * Grafana beside Prometheus (config `monitoring.grafana`): its container, with Prometheus as its data
 * source and the fleet's dashboard (dashboard.ts) provisioned as files, and its admin password (the
 * stack's API key) added where the key is known. Pure.
 */
import { FleetConfig } from "../config";
import { ContainerSpec } from "../containerSpec";
import { REVISION_LABEL, fleetLabels, monitoringContainers } from "../names";
import { DASHBOARD_DATASOURCE_UID, MonitoredNode, fleetDashboard } from "./dashboard";

/** Grafana as planned: its container (data source and dashboard provisioned among its files) and where it answers. */
export interface GrafanaPlan {
    readonly image: { readonly name: string; readonly source: "present" | "pull" };
    readonly spec: ContainerSpec;
    readonly port: number;
    /** Grafana as clients reach it, e.g. http://10.1.230.180:3000. */
    readonly endpoint: string;
    /** The dashboard's uid, which the readiness step asks Grafana for. */
    readonly dashboardUid: string;
    readonly timeoutSeconds: number;
}

/** Where Grafana finds what vllm-fleet provisions (the official image's provisioning directory). */
const GRAFANA_PROVISIONING = "/etc/grafana/provisioning";
const GRAFANA_DASHBOARDS = "/var/lib/vllm-fleet-grafana/dashboards";

/**
 * Grafana on the monitoring node (the image's own entrypoint): Prometheus, on the loopback, as its
 * data source, and the fleet's dashboard (dashboard.ts), both provisioned as files of its container;
 * no anonymous access, no sign-up, no calls home. Its admin password, the stack's API key, is added
 * where the key is known (withGrafanaPassword).
 */
export function planGrafana(
    grafana: NonNullable<NonNullable<FleetConfig["monitoring"]>["grafana"]>,
    stack: string,
    host: string,
    prometheusPort: number,
    nodes: readonly MonitoredNode[],
    gpus: boolean,
    revision: string,
    timeoutSeconds: number,
): GrafanaPlan {
    const dashboard = fleetDashboard(stack, nodes, gpus);
    const datasources = {
        apiVersion: 1,
        datasources: [{ name: "Prometheus (vllm-fleet)", uid: DASHBOARD_DATASOURCE_UID, type: "prometheus", access: "proxy", url: `http://127.0.0.1:${prometheusPort}`, isDefault: true, editable: false }],
    };
    const providers = {
        apiVersion: 1,
        providers: [{ name: "vllm-fleet", folder: "vllm-fleet", type: "file", disableDeletion: true, allowUiUpdates: false, options: { path: GRAFANA_DASHBOARDS } }],
    };
    const spec: ContainerSpec = {
        name: monitoringContainers(stack).grafana,
        image: grafana.image.name,
        command: [],
        env: {
            GF_SERVER_HTTP_PORT: String(grafana.port),
            GF_SECURITY_ADMIN_USER: "admin",
            GF_AUTH_ANONYMOUS_ENABLED: "false",
            GF_USERS_ALLOW_SIGN_UP: "false",
            GF_ANALYTICS_REPORTING_ENABLED: "false",
            GF_ANALYTICS_CHECK_FOR_UPDATES: "false",
        },
        mounts: [],
        networkHost: true,
        ipcHost: false,
        ulimits: [],
        restart: "unless-stopped",
        labels: { ...fleetLabels(stack, "grafana"), [REVISION_LABEL]: revision },
        files: [
            { path: `${GRAFANA_PROVISIONING}/datasources/vllm-fleet.yaml`, content: `${JSON.stringify(datasources, null, 2)}\n` },
            { path: `${GRAFANA_PROVISIONING}/dashboards/vllm-fleet.yaml`, content: `${JSON.stringify(providers, null, 2)}\n` },
            { path: `${GRAFANA_DASHBOARDS}/vllm-fleet.json`, content: `${JSON.stringify(dashboard, null, 2)}\n` },
        ],
    };
    return { image: grafana.image, spec, port: grafana.port, endpoint: `http://${host}:${grafana.port}`, dashboardUid: String(dashboard.uid), timeoutSeconds };
}

/** Grafana's container with its admin password: the stack's API key (a secret variable: never on a command line). */
export function withGrafanaPassword(spec: ContainerSpec, key: string): ContainerSpec {
    return { ...spec, env: { ...spec.env, GF_SECURITY_ADMIN_PASSWORD: key } };
}
