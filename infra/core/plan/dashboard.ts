/**
 * The fleet's Grafana dashboard, from the plan: per service its requests running and waiting, tokens
 * per second, time to first token and inter-token latency (p50, p99) and KV cache usage; per node its
 * memory (available, page cache, swap) and its fabric interface's bytes and errors (each node's
 * interface by name); per GPU, with NVIDIA's DCGM exporter, its utilization, power, temperature and
 * clock. The figures `npm run top` shows are {@link SERVICE_QUERIES}, the same queries.
 * Every panel's query but the GPUs' is run against the proving ground's Prometheus in the e2e (the
 * proving ground has no GPU exporter). Pure.
 */

/** A node as monitoring sees it: its name, and its fabric interface and address. */
export interface MonitoredNode {
    readonly name: string;
    readonly fabric: { readonly ip: string; readonly interface: string };
}

/**
 * One query per figure of a service, each one series per `service` (the target label Prometheus
 * gives each service's series). `up` is Prometheus's own: 1 when the last scrape answered.
 */
export const SERVICE_QUERIES = {
    tokensPerSecond: 'sum by (service) (rate(vllm:generation_tokens_total{job="vllm"}[1m]))',
    running: 'sum by (service) (vllm:num_requests_running{job="vllm"})',
    waiting: 'sum by (service) (vllm:num_requests_waiting{job="vllm"})',
    kvCachePercent: 'max by (service) (vllm:kv_cache_usage_perc{job="vllm"}) * 100',
    ttftP50Seconds: 'histogram_quantile(0.5, sum by (service, le) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1m])))',
    up: 'min by (service) (up{job="vllm"})',
} as const;

/** A histogram's quantile per service over the last minute. */
const quantile = (q: number, histogram: string) => `histogram_quantile(${q}, sum by (service, le) (rate(vllm:${histogram}_bucket{job="vllm"}[1m])))`;

/**
 * An expression over each node's fabric interface by name: `of` given each node's selector
 * (`{job="node",node="spark1",device="enp1s0f1np1"}`), the nodes side by side (`or`). The dashboard's
 * panels and the alert rules read the fabric this one way.
 */
export function perFabric(nodes: readonly MonitoredNode[], of: (selector: string) => string): string {
    return nodes.map((node) => of(`{job="node",node="${node.name}",device="${node.fabric.interface}"}`)).join(" or ");
}

/** The per-second rate of `metric` on each node's fabric interface over the last minute. */
const fabricRate = (nodes: readonly MonitoredNode[], metric: string) => perFabric(nodes, (selector) => `rate(${metric}${selector}[1m])`);

/** A panel: a time series of one or more queries. */
export interface DashboardPanel {
    readonly title: string;
    readonly unit: string;
    readonly queries: readonly { readonly expr: string; readonly legend: string }[];
}

/**
 * The GPUs' panels, from NVIDIA's DCGM exporter (monitoring.gpuExporter): what a GB10 reports
 * (utilization, power, temperature, the SM clock; its memory is the node's, in the Nodes row).
 */
const GPU_PANELS: readonly DashboardPanel[] = [
    { title: "GPU utilization", unit: "percent", queries: [{ expr: 'DCGM_FI_DEV_GPU_UTIL{job="gpu"}', legend: "{{node}} GPU {{gpu}}" }] },
    { title: "GPU power", unit: "watt", queries: [{ expr: 'DCGM_FI_DEV_POWER_USAGE{job="gpu"}', legend: "{{node}} GPU {{gpu}}" }] },
    { title: "GPU temperature", unit: "celsius", queries: [{ expr: 'DCGM_FI_DEV_GPU_TEMP{job="gpu"}', legend: "{{node}} GPU {{gpu}}" }] },
    { title: "GPU SM clock", unit: "hertz", queries: [{ expr: 'DCGM_FI_DEV_SM_CLOCK{job="gpu"} * 1000000', legend: "{{node}} GPU {{gpu}}" }] },
];

/** The panels, in rows: the services', the nodes', and the GPUs' when `gpus` (a GPU exporter runs). */
export function dashboardPanels(nodes: readonly MonitoredNode[], gpus = false): { readonly row: string; readonly panels: readonly DashboardPanel[] }[] {
    return [
        {
            row: "Services",
            panels: [
                { title: "Generated tokens per second", unit: "none", queries: [{ expr: SERVICE_QUERIES.tokensPerSecond, legend: "{{service}}" }] },
                { title: "Prompt tokens per second", unit: "none", queries: [{ expr: 'sum by (service) (rate(vllm:prompt_tokens_total{job="vllm"}[1m]))', legend: "{{service}}" }] },
                {
                    title: "Requests running and waiting",
                    unit: "none",
                    queries: [
                        { expr: SERVICE_QUERIES.running, legend: "{{service}} running" },
                        { expr: SERVICE_QUERIES.waiting, legend: "{{service}} waiting" },
                    ],
                },
                { title: "KV cache usage", unit: "percent", queries: [{ expr: SERVICE_QUERIES.kvCachePercent, legend: "{{service}}" }] },
                {
                    title: "Time to first token",
                    unit: "s",
                    queries: [
                        { expr: SERVICE_QUERIES.ttftP50Seconds, legend: "{{service}} p50" },
                        { expr: quantile(0.99, "time_to_first_token_seconds"), legend: "{{service}} p99" },
                    ],
                },
                {
                    title: "Inter-token latency",
                    unit: "s",
                    queries: [
                        { expr: quantile(0.5, "inter_token_latency_seconds"), legend: "{{service}} p50" },
                        { expr: quantile(0.99, "inter_token_latency_seconds"), legend: "{{service}} p99" },
                    ],
                },
                { title: "Answering", unit: "none", queries: [{ expr: SERVICE_QUERIES.up, legend: "{{service}}" }] },
            ],
        },
        {
            row: "Nodes",
            panels: [
                {
                    title: "Memory",
                    unit: "bytes",
                    queries: [
                        { expr: 'node_memory_MemAvailable_bytes{job="node"}', legend: "{{node}} available" },
                        { expr: 'node_memory_Cached_bytes{job="node"}', legend: "{{node}} page cache" },
                        { expr: 'node_memory_SwapTotal_bytes{job="node"} - node_memory_SwapFree_bytes{job="node"}', legend: "{{node}} swap used" },
                    ],
                },
                {
                    title: "Fabric bytes per second",
                    unit: "Bps",
                    queries: [
                        { expr: fabricRate(nodes, "node_network_receive_bytes_total"), legend: "{{node}} {{device}} in" },
                        { expr: fabricRate(nodes, "node_network_transmit_bytes_total"), legend: "{{node}} {{device}} out" },
                    ],
                },
                {
                    title: "Fabric errors per second",
                    unit: "none",
                    queries: [
                        { expr: fabricRate(nodes, "node_network_receive_errs_total"), legend: "{{node}} {{device}} in" },
                        { expr: fabricRate(nodes, "node_network_transmit_errs_total"), legend: "{{node}} {{device}} out" },
                    ],
                },
            ],
        },
        ...(gpus ? [{ row: "GPUs", panels: GPU_PANELS }] : []),
    ];
}

/** The datasource every panel reads: the stack's Prometheus, provisioned with this uid. */
export const DASHBOARD_DATASOURCE_UID = "vllm-fleet-prometheus";

/** The dashboard as Grafana reads it (its JSON model), for `stack`; the GPUs' row when `gpus`. */
export function fleetDashboard(stack: string, nodes: readonly MonitoredNode[], gpus = false): Record<string, unknown> {
    const datasource = { type: "prometheus", uid: DASHBOARD_DATASOURCE_UID };
    const panels: Record<string, unknown>[] = [];
    let id = 1;
    let y = 0;
    for (const { row, panels: rowPanels } of dashboardPanels(nodes, gpus)) {
        panels.push({ id: id++, type: "row", title: row, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y }, panels: [] });
        y += 1;
        rowPanels.forEach((panel, index) => {
            panels.push({
                id: id++,
                type: "timeseries",
                title: panel.title,
                datasource,
                gridPos: { h: 8, w: 8, x: (index % 3) * 8, y: y + Math.floor(index / 3) * 8 },
                fieldConfig: { defaults: { unit: panel.unit }, overrides: [] },
                options: { legend: { displayMode: "list", placement: "bottom" }, tooltip: { mode: "multi" } },
                targets: panel.queries.map((query, index) => ({ refId: String.fromCharCode(65 + index), datasource, expr: query.expr, legendFormat: query.legend })),
            });
        });
        y += Math.ceil(rowPanels.length / 3) * 8;
    }
    return {
        uid: `vllm-fleet-${stack}`.slice(0, 40),
        title: `vllm-fleet ${stack}`,
        tags: ["vllm-fleet"],
        timezone: "browser",
        refresh: "10s",
        time: { from: "now-1h", to: "now" },
        schemaVersion: 39,
        editable: true,
        panels,
    };
}
