/**
 * Monitoring (issue 33): its config (`vllm-fleet:monitoring`) refused with the key named; its plan
 * (the targets from the services, the gateway and the nodes; Prometheus's configuration; the alert
 * rules with each node's fabric interface); and the whole program on mocks: the containers, their
 * images, the firewall, the targets given in place when a service is added, the key never on a
 * command line, the data kept or removed at destroy.
 */
import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../infra/core/config";
import { REVISION_LABEL, ROLE_LABEL, STACK_LABEL, monitoringContainers } from "../../infra/core/names";
import { DASHBOARD_DATASOURCE_UID, SERVICE_QUERIES, alertRules, stackDirectory, dashboardPanels, fleetDashboard, prometheusConfig, scrapeTargets, targetsFileContent } from "../../infra/core/plan";
import { containerRevision, monitoringRevisions } from "../../infra/core/reconcile";
import { unpinnedMonitoringImageWarnings } from "../../infra/imageDeliveries";
import { LiveContainer } from "../../infra/core/observe";
import { configProblems } from "./configErrors";
import { BIG, CODER, GATEWAY, SMALL, fabricIps, fleet as fleetOf, probe } from "./fleetFixtures";
import { MockRun, changedInputs, liveAfter, runProgram, unsecret } from "./mocks";

const MONITORING = { node: "spark1" };
const fleet = (services: readonly object[], monitoring: object | null = MONITORING, gateway: object | null = GATEWAY) => ({
    ...fleetOf(services, gateway),
    ...(monitoring ? { monitoring } : {}),
});

describe("the monitoring's config", () => {
    it("is off without the key, and `monitoring.node` alone turns it on with the official images, pinned by digest", () => {
        expect(parseFleetConfig(fleet([BIG, CODER], null)).monitoring).toBeUndefined();
        expect(parseFleetConfig(fleet([BIG, CODER])).monitoring).toEqual({
            node: "spark1",
            port: 9090,
            scrapeIntervalSeconds: 10,
            retention: "15d",
            dataDir: "/var/lib/vllm-fleet/prometheus",
            removeDataOnDestroy: false,
            image: { name: "prom/prometheus:v3.5.0@sha256:63805ebb8d2b3920190daf1cb14a60871b16fd38bed42b857a3182bc621f4996", source: "pull" },
            nodeExporter: { image: { name: "prom/node-exporter:v1.9.1@sha256:d00a542e409ee618a4edc67da14dd48c5da66726bbd5537ab2af9c1dfc442c8a", source: "pull" }, port: 9100 },
        });
    });

    it("warns at preview about each of its images named by a tag alone, saying how to pin it", () => {
        expect(unpinnedMonitoringImageWarnings(parseFleetConfig(fleet([BIG, CODER], { node: "spark1", grafana: {} })).monitoring)).toEqual([]);
        const tagged = parseFleetConfig(fleet([BIG, CODER], { node: "spark1", image: { name: "prom/prometheus:v3.5.0" }, gpuExporter: {} })).monitoring;
        expect(unpinnedMonitoringImageWarnings(tagged)).toEqual([
            "vllm-fleet:monitoring.image.name prom/prometheus:v3.5.0 is a tag, which can move to another build: pin it by digest (prom/prometheus@sha256:...; " +
                "`docker image inspect --format '{{index .RepoDigests 0}}' prom/prometheus:v3.5.0` on a node that has it prints it)",
            expect.stringMatching(/^vllm-fleet:monitoring\.gpuExporter\.image\.name nvcr\.io\/nvidia\/k8s\/dcgm-exporter:4\.4\.2-4\.7\.0-ubuntu22\.04 is a tag/),
        ]);
        expect(unpinnedMonitoringImageWarnings(undefined)).toEqual([]);
    });

    describe.each([
        ["a node not in nodes", { node: "spark9" }, "vllm-fleet:monitoring.node", "the name of a node in vllm-fleet:nodes (spark1, spark2, spark3, spark4)"],
        ["the port of a service on its node", { node: "spark1", port: 8000 }, "vllm-fleet:monitoring.port", "a port other than vllm-fleet:services[0].vllm.port on spark1"],
        ["the gateway's port on its node", { node: "spark3", port: 4000 }, "vllm-fleet:monitoring.port", "vllm-fleet:gateway.port"],
        ["the gateway router's metrics port there", { node: "spark3", port: 29000 }, "vllm-fleet:monitoring.port", "the gateway router's metrics (29000)"],
        ["a port Ray's workers take where Ray runs", { node: "spark1", port: 12000 }, "vllm-fleet:monitoring.port", "Ray's worker ports (10002-19999) of the Ray cluster there"],
        ["the node exporter's port", { node: "spark1", port: 9100 }, "vllm-fleet:monitoring.port", "vllm-fleet:monitoring.nodeExporter.port"],
        ["an exporter port a service takes on any node", { node: "spark1", nodeExporter: { port: 8001 } }, "vllm-fleet:monitoring.nodeExporter.port", "vllm-fleet:services[1].vllm.port on spark3"],
        ["an exporter port on sshd's", { node: "spark1", nodeExporter: { port: 22 } }, "vllm-fleet:monitoring.nodeExporter.port", "the SSH port of spark1"],
        ["a retention Prometheus cannot read", { node: "spark1", retention: "2 weeks" }, "vllm-fleet:monitoring.retention", "a duration such as 15d"],
        ["a relative data directory", { node: "spark1", dataDir: "prometheus" }, "vllm-fleet:monitoring.dataDir", "an absolute path on the monitoring node"],
        ["a data directory in a kernel file system", { node: "spark1", dataDir: "/proc/prometheus" }, "vllm-fleet:monitoring.dataDir", "a directory on disk, not a path inside /proc"],
        ["a data directory that is a system directory", { node: "spark1", dataDir: "/usr" }, "vllm-fleet:monitoring.dataDir", "(it is written by Prometheus)"],
        ["an image source it cannot do", { node: "spark1", image: { name: "prom/prometheus:v3.5.0", source: "copy" } }, "vllm-fleet:monitoring.image.source", "present"],
        ["a key it does not have", { node: "spark1", retension: "15d" }, "vllm-fleet:monitoring.retension", "retention"],
        ["a GPU exporter port the node exporter takes", { node: "spark1", gpuExporter: { port: 9100 } }, "vllm-fleet:monitoring.gpuExporter.port", "a port other than vllm-fleet:monitoring.nodeExporter.port"],
        ["a GPU exporter port a service takes", { node: "spark1", gpuExporter: { port: 8001 } }, "vllm-fleet:monitoring.gpuExporter.port", "vllm-fleet:services[1].vllm.port on spark3 and vllm-fleet:services[1].vllm.port on spark4 (the GPU exporter runs on every node"],
        ["a GPU exporter port Prometheus takes", { node: "spark1", gpuExporter: { port: 9090 } }, "vllm-fleet:monitoring.gpuExporter.port", "vllm-fleet:monitoring.port"],
    ])("refuses %s, naming the key", (_what, monitoring, key, expected) => {
        it("in one line", () => {
            const lines = configProblems(fleet([BIG, CODER], monitoring));
            const line = lines.find((text) => text.includes(key));
            expect(line, lines.join("\n")).toBeDefined();
            expect(line).toContain(expected);
        });
    });
});

const planned = (name: string, iface = "enp1s0f1np1") => ({ name, fabric: { ip: fabricIps[name], interface: iface } });
const service = (name: string, model: string, node: string, port: number) => ({ name, vllm: { modelId: model }, nodes: [planned(node)], config: { vllm: { port } } });

describe("the monitoring's plan", () => {
    const targets = scrapeTargets([service("big", "big", "spark1", 8000), service("coder", "coder", "spark3", 8001)], { node: "spark3", fabricIp: fabricIps.spark3 }, [planned("spark1"), planned("spark2", "enP2p1s0f1np1")], 9100);

    it("scrapes each service's API on its first node's fabric address, the gateway's router and each node's exporter there", () => {
        expect(targets.map((target) => `${target.job} ${target.address}`)).toEqual([
            "vllm 192.168.200.12:8000",
            "vllm 192.168.200.14:8001",
            "gateway 192.168.200.14:29000",
            "node 192.168.200.12:9100",
            "node 192.168.200.13:9100",
        ]);
        expect(JSON.parse(targetsFileContent(targets, "vllm"))).toEqual([
            { targets: ["192.168.200.12:8000"], labels: { service: "big", model: "big", node: "spark1" } },
            { targets: ["192.168.200.14:8001"], labels: { service: "coder", model: "coder", node: "spark3" } },
        ]);
        expect(JSON.parse(targetsFileContent(targets, "node"))[1]).toEqual({ targets: ["192.168.200.13:9100"], labels: { node: "spark2", fabric_device: "enP2p1s0f1np1" } });
        expect(JSON.parse(targetsFileContent([], "gateway"))).toEqual([]);
    });

    it("configures Prometheus with a job per kind, each reading its targets file, the services' with the key from a file", () => {
        const text = prometheusConfig({ stack: "unit", intervalSeconds: 5, keyed: true, port: 9090 });
        expect(text.split("\n")[0]).toMatch(/^# /);
        const config = JSON.parse(text.split("\n").slice(1).join("\n"));
        expect(config.global).toEqual({ scrape_interval: "5s", scrape_timeout: "5s", evaluation_interval: "5s", external_labels: { stack: "unit" } });
        expect(config.scrape_configs.map((job: { job_name: string }) => job.job_name)).toEqual(["vllm", "gateway", "node", "gpu", "prometheus"]);
        expect(config.scrape_configs[0].authorization).toEqual({ type: "Bearer", credentials_file: "/etc/vllm-fleet/prometheus/state/key" });
        expect(config.scrape_configs[0].file_sd_configs[0].files).toEqual(["/etc/vllm-fleet/prometheus/state/vllm.json"]);
        expect(config.rule_files).toEqual(["/etc/vllm-fleet/prometheus/state/rules.yml"]);
        // A scrape may last no longer than its interval, and not past 10 s.
        expect(JSON.parse(prometheusConfig({ stack: "unit", intervalSeconds: 60, keyed: false, port: 9090 }).split("\n").slice(1).join("\n")).global.scrape_timeout).toBe("10s");
        expect(prometheusConfig({ stack: "unit", intervalSeconds: 5, keyed: false, port: 9090 })).not.toContain("authorization");
    });

    it("ships the alert rules, the fabric's errors on each node's own interface by name", () => {
        const rules = alertRules([planned("spark1"), planned("spark2", "enP2p1s0f1np1")]);
        expect(rules.map((rule) => rule.alert)).toEqual(["ServiceDown", "GatewayDown", "NodeExporterDown", "GpuExporterDown", "KvCacheHigh", "RequestsWaitingGrowing", "NodeMemoryLow", "FabricErrors"]);
        const fabric = rules.find((rule) => rule.alert === "FabricErrors")!.expr;
        expect(fabric).toContain('node_network_receive_errs_total{job="node",node="spark1",device="enp1s0f1np1"}');
        expect(fabric).toContain('node_network_transmit_errs_total{job="node",node="spark2",device="enP2p1s0f1np1"}');
        expect(rules.find((rule) => rule.alert === "KvCacheHigh")).toMatchObject({ expr: 'max by (service) (vllm:kv_cache_usage_perc{job="vllm"}) > 0.9', for: "5m" });
        expect(rules.find((rule) => rule.alert === "ServiceDown")).toMatchObject({ expr: 'up{job="vllm"} == 0', for: "30s" });
    });
});

describe("the monitoring containers' revisions", () => {
    const container = (name: string, running: boolean, revision: string): LiveContainer => ({
        name,
        id: `${name}-id`,
        status: running ? "running" : "exited",
        running,
        restarting: false,
        exitCode: running ? 0 : 137,
        restartCount: 0,
        startedAt: "",
        labels: { [REVISION_LABEL]: revision },
    });
    let counter = 0;
    const fresh = () => `new${++counter}`;

    it("keeps a running container's, replaces a dead one's saying so, and makes a missing one without a word", () => {
        expect(containerRevision({ node: "spark1", containers: [container("p", true, "r1")] }, "p", fresh)).toEqual({ revision: "r1" });
        const dead = containerRevision({ node: "spark1", containers: [container("p", false, "r1")] }, "p", fresh);
        expect(dead.revision).toMatch(/^new/);
        expect(dead.finding).toBe("node spark1: container p is exited (exit 137, 0 restarts); up replaces it");
        expect(containerRevision({ node: "spark1", containers: [] }, "p", fresh)).toEqual({ revision: expect.stringMatching(/^new/) });
    });

    it("decides Prometheus's on its node and each node's exporter", () => {
        const names = monitoringContainers("unit");
        const decided = monitoringRevisions(
            "spark2",
            "unit",
            [
                { node: "spark1", containers: [container(names.exporter, true, "e1")] },
                { node: "spark2", containers: [container(names.prometheus, true, "p2"), container(names.exporter, false, "e2")] },
            ],
            fresh,
        );
        expect(decided.prometheus).toBe("p2");
        expect(decided.exporters.spark1).toBe("e1");
        expect(decided.exporters.spark2).toMatch(/^new/);
        expect(decided.findings).toEqual([`node spark2: container ${names.exporter} is exited (exit 137, 0 restarts); up replaces it`]);
    });
});

/** The inputs of a resource as plain text. */
const inputsOf = (run: MockRun, name: string) => JSON.stringify(unsecret(run.byName(name).inputs));
const program = (run: MockRun, name: string) => String(unsecret(run.byName(name).inputs.create));

describe("the monitoring in the program (mocks)", async () => {
    const two = await runProgram(fleet([BIG, CODER]), probe);
    const where = (resource: string) => (resource.startsWith("coder-") ? "spark3" : "spark1");
    const three = await runProgram(fleet([BIG, CODER, SMALL]), probe, undefined, liveAfter(two, where));

    it("runs Prometheus on its node and an exporter on every node, named after the stack and labelled", () => {
        expect(two.resources.filter((resource) => resource.type === "vllm-fleet:monitoring:Monitoring").map((resource) => resource.name)).toEqual(["monitoring"]);
        const prometheus = program(two, "monitoring-prometheus");
        expect(prometheus).toContain("NAME='vllm-fleet-prometheus-unit'");
        expect(prometheus).toContain(`'--label' '${STACK_LABEL}=unit'`);
        expect(prometheus).toContain(`'--label' '${ROLE_LABEL}=prometheus'`);
        expect(prometheus).toContain("'--volume' '/var/lib/vllm-fleet/prometheus/unit:/prometheus'");
        expect(prometheus).toContain("'--storage.tsdb.retention.time=15d'");
        expect(prometheus).toContain("'prom/prometheus:v3.5.0@sha256:63805ebb8d2b3920190daf1cb14a60871b16fd38bed42b857a3182bc621f4996'");
        for (const node of ["spark1", "spark2", "spark3", "spark4"]) {
            const exporter = program(two, `${node}-node-exporter`);
            expect(exporter).toContain("NAME='vllm-fleet-node-exporter-unit'");
            expect(exporter).toContain(`'--web.listen-address=${fabricIps[node]}:9100'`);
            expect(exporter).toContain("'--volume' '/:/host:ro'");
        }
    });

    it("pulls the official images where they run", async () => {
        const steps = two.resources.filter((resource) => /-(prometheus|node-exporter)-image$/.test(resource.name)).map((resource) => resource.name);
        expect(steps.sort()).toEqual(["spark1-node-exporter-image", "spark1-prometheus-image", "spark2-node-exporter-image", "spark3-node-exporter-image", "spark4-node-exporter-image"]);
        expect(two.byName("spark1-prometheus-image").inputs.create).toContain("IMAGE_KEY='vllm-fleet:monitoring.image.name'");
        const present = await runProgram(fleet([BIG, CODER], { node: "spark1", image: { name: "sim/monitoring:current", source: "present" }, nodeExporter: { image: { name: "sim/monitoring:current", source: "present" } } }), probe);
        expect(present.resources.some((resource) => /-(prometheus|node-exporter)-image$/.test(resource.name))).toBe(false);
    });

    it("gives the running Prometheus its targets, rules and key once every service and the gateway serve, the key off every command line", () => {
        const config = program(two, "monitoring-config");
        expect(config).toContain("CONTAINER='vllm-fleet-prometheus-unit'");
        expect(config).toContain("'vllm 192.168.200.12:8000' 'vllm 192.168.200.14:8001' 'gateway 192.168.200.14:29000'");
        expect(config).toContain("KEY_FILE='/etc/vllm-fleet/prometheus/state/key'");
        // The key travels in the program (on standard input), and docker exec reads it from its own stdin.
        expect(config).toContain("API_KEY='generated-vllm-api-key'");
        expect(config).toContain('printf \'%s\' "$API_KEY" | write_file');
        expect(program(two, "monitoring-prometheus")).not.toContain("generated-vllm-api-key");
        const dependencies = two.byName("monitoring-config").dependencies;
        expect(dependencies).toContain(two.byName("big-vllm-serve").urn);
        expect(dependencies).toContain(two.byName("coder-vllm-ready").urn);
        expect(dependencies).toContain(two.byName("gateway-ready").urn);
        expect(dependencies).toContain(two.byName("monitoring-prometheus").urn);
        expect(two.outputs.monitoring).toEqual({
            node: "spark1",
            endpoint: "http://10.1.230.180:9090",
            targets: ["vllm 192.168.200.12:8000", "vllm 192.168.200.14:8001", "gateway 192.168.200.14:29000", "node 192.168.200.12:9100", "node 192.168.200.13:9100", "node 192.168.200.14:9100", "node 192.168.200.15:9100"],
        });
    });

    it("adds a service's target in place: Prometheus's container, its data step and the exporters stay", () => {
        const changed = changedInputs(two, three);
        expect(changed).toContain("monitoring-config");
        expect(changed.filter((name) => name.startsWith("monitoring") || name.endsWith("node-exporter"))).toEqual(["monitoring-config"]);
        expect(program(three, "monitoring-config")).toContain("'vllm 192.168.200.12:8002'");
    });

    it("makes the router's metrics listen on the gateway node's fabric address, only with monitoring", async () => {
        expect(program(two, "gateway-container")).toContain("'--env' 'GATEWAY_METRICS_HOST=192.168.200.14'");
        const without = await runProgram(fleet([BIG, CODER], null), probe);
        expect(program(without, "gateway-container")).not.toContain("'--env' 'GATEWAY_METRICS_HOST");
        expect(without.resources.some((resource) => resource.name.startsWith("monitoring") || resource.name.endsWith("node-exporter"))).toBe(false);
        expect(without.outputs.monitoring).toBeUndefined();
    });

    it("opens Prometheus's port to the clients and closes the exporters' and the router's metrics to all but the fabric (firewall)", async () => {
        const walled = await runProgram({ ...fleet([BIG, CODER]), security: { firewall: true, clients: ["10.1.230.0/24"] } }, probe);
        const rules = (node: string) => program(walled, `${node}-firewall`);
        expect(rules("spark1")).toMatch(/CLIENT_PORTS=\([^)]*'9090'/);
        expect(rules("spark2")).not.toMatch(/CLIENT_PORTS=\([^)]*'9090'/);
        expect(rules("spark2")).toMatch(/CLOSED_PORTS=\([^)]*'9100'/);
        expect(rules("spark3")).toMatch(/CLOSED_PORTS=\([^)]*'29000'/);
    });

    it("keeps the data at destroy unless told, and then removes it as root in a container of Prometheus's image", async () => {
        expect(String(unsecret(two.byName("monitoring-data").inputs.delete))).toContain("s data kept in /var/lib/vllm-fleet/prometheus/unit (monitoring.removeDataOnDestroy is false)");
        expect(program(two, "monitoring-data")).toContain("OWNER='65534'");
        const removing = await runProgram(fleet([BIG, CODER], { node: "spark1", removeDataOnDestroy: true, dataDir: "/srv/prom/" }), probe);
        const removal = String(unsecret(removing.byName("monitoring-data").inputs.delete));
        expect(removal).toContain("DIR='/srv/prom/unit'");
        expect(removal).toContain("WHAT='Prometheus data'");
        expect(removal).toContain("IMAGE='prom/prometheus:v3.5.0@sha256:63805ebb8d2b3920190daf1cb14a60871b16fd38bed42b857a3182bc621f4996'");
    });

    it("replaces a Prometheus found dead on the next up, and nothing else of the monitoring", async () => {
        const names = monitoringContainers("unit");
        const live = liveAfter(two, where);
        const deadPrometheus = (node: string) => {
            const text = live(node);
            return node === "spark1" ? text.replace(new RegExp(`("name":"/${names.prometheus}".*?)"running":true`), '$1"running":false') : text;
        };
        const again = await runProgram(fleet([BIG, CODER]), probe, undefined, live);
        expect(changedInputs(two, again).filter((name) => name.startsWith("monitoring") || name.endsWith("node-exporter"))).toEqual([]);
        const healed = await runProgram(fleet([BIG, CODER]), probe, undefined, deadPrometheus);
        expect(changedInputs(two, healed).filter((name) => name.startsWith("monitoring") || name.endsWith("node-exporter"))).toEqual(["monitoring-prometheus"]);
        expect(inputsOf(healed, "monitoring-config")).toBe(inputsOf(two, "monitoring-config"));
    });
});

describe("the fleet's dashboard", () => {
    const nodes = [planned("spark1"), planned("spark2", "enP2p1s0f1np1")];

    it("has the services' figures, top's own queries among them, and each node's fabric interface by name", () => {
        const rows = dashboardPanels(nodes);
        expect(rows.map((row) => row.row)).toEqual(["Services", "Nodes"]);
        const exprs = rows.flatMap((row) => row.panels.flatMap((panel) => panel.queries.map((query) => query.expr)));
        for (const query of Object.values(SERVICE_QUERIES)) {
            expect(exprs).toContain(query);
        }
        expect(exprs.some((expr) => expr.includes('histogram_quantile(0.99, sum by (service, le) (rate(vllm:inter_token_latency_seconds_bucket{job="vllm"}[1m])))'))).toBe(true);
        expect(exprs).toContain('rate(node_network_receive_bytes_total{job="node",node="spark1",device="enp1s0f1np1"}[1m]) or rate(node_network_receive_bytes_total{job="node",node="spark2",device="enP2p1s0f1np1"}[1m])');
    });

    it("is a Grafana dashboard whose every panel reads the provisioned Prometheus, laid out without overlap", () => {
        const dashboard = fleetDashboard("unit", nodes) as { uid: string; panels: { id: number; type: string; gridPos: { x: number; y: number; w: number; h: number }; targets?: { refId: string; expr: string; datasource: { uid: string } }[] }[] };
        expect(dashboard.uid).toBe("vllm-fleet-unit");
        const panels = dashboard.panels.filter((panel) => panel.type === "timeseries");
        expect(panels.length).toBe(dashboardPanels(nodes).reduce((sum, row) => sum + row.panels.length, 0));
        expect(new Set(dashboard.panels.map((panel) => panel.id)).size).toBe(dashboard.panels.length);
        for (const panel of panels) {
            expect(panel.targets!.every((target) => target.datasource.uid === DASHBOARD_DATASOURCE_UID && target.expr !== "")).toBe(true);
        }
        const cells = new Set<string>();
        for (const panel of dashboard.panels) {
            for (let x = panel.gridPos.x; x < panel.gridPos.x + panel.gridPos.w; x++) {
                for (let y = panel.gridPos.y; y < panel.gridPos.y + panel.gridPos.h; y++) {
                    expect(cells.has(`${x},${y}`), `panel ${panel.id} overlaps at ${x},${y}`).toBe(false);
                    cells.add(`${x},${y}`);
                }
            }
        }
    });
});

describe("Grafana with monitoring.grafana (mocks)", async () => {
    const withGrafana = await runProgram(fleet([BIG, CODER], { node: "spark1", grafana: {} }), probe);

    it("runs beside Prometheus with the data source and the dashboard provisioned, its password the key, off the command line", () => {
        const grafana = program(withGrafana, "monitoring-grafana");
        expect(grafana).toContain("NAME='vllm-fleet-grafana-unit'");
        expect(grafana).toContain("'grafana/grafana:11.6.0@sha256:62d2b9d20a19714ebfe48d1bb405086081bc602aa053e28cf6d73c7537640dfb'");
        expect(grafana).toContain("'--env' 'GF_SECURITY_ADMIN_PASSWORD'");
        expect(grafana).toContain("SECRET_ENV=('GF_SECURITY_ADMIN_PASSWORD=generated-vllm-api-key')");
        expect(grafana).not.toContain("'--env' 'GF_SECURITY_ADMIN_PASSWORD=");
        expect(grafana).toContain("/etc/grafana/provisioning/datasources/vllm-fleet.yaml");
        expect(grafana).toContain('"url": "http://127.0.0.1:9090"');
        expect(grafana).toContain("/var/lib/vllm-fleet-grafana/dashboards/vllm-fleet.json");
        const ready = program(withGrafana, "monitoring-grafana-ready");
        expect(ready).toContain("DASHBOARD_UID='vllm-fleet-unit'");
        expect(withGrafana.byName("monitoring-grafana-ready").dependencies).toContain(withGrafana.byName("monitoring-grafana").urn);
        expect((withGrafana.outputs.monitoring as { grafana: string }).grafana).toBe("http://10.1.230.180:3000");
        expect(withGrafana.resources.some((resource) => resource.name === "spark1-grafana-image")).toBe(true);
    });

    it("is refused without an API key, and on a port Prometheus takes", () => {
        const keyless = { nodes: fleet([BIG]).nodes, ssh: { user: "aurora" }, fabric: { subnet: "192.168.200.0/24" }, image: { name: "vllm/vllm-openai:v0.17.1" }, model: { path: "/m", servedName: "m" }, vllm: { apiKey: "none" }, monitoring: { node: "spark1", grafana: {} } };
        expect(configProblems(keyless).find((line) => line.includes("vllm-fleet:monitoring.grafana"))).toContain("Grafana's admin password is the stack's key");
        expect(configProblems(fleet([BIG, CODER], { node: "spark1", grafana: { port: 9090 } })).find((line) => line.includes("vllm-fleet:monitoring.grafana.port"))).toContain("vllm-fleet:monitoring.port");
    });
});

describe("the GPU exporter with monitoring.gpuExporter (mocks)", async () => {
    const withGpus = await runProgram(fleet([BIG, CODER], { node: "spark1", gpuExporter: {} }), probe);
    const two = await runProgram(fleet([BIG, CODER]), probe);

    it("is off by default, NVIDIA's DCGM exporter on port 9400 when asked", () => {
        expect(parseFleetConfig(fleet([BIG, CODER])).monitoring?.gpuExporter).toBeUndefined();
        expect(parseFleetConfig(fleet([BIG, CODER], { node: "spark1", gpuExporter: {} })).monitoring?.gpuExporter).toEqual({
            image: { name: "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-ubuntu22.04", source: "pull" },
            port: 9400,
        });
        expect(two.resources.some((resource) => resource.name.includes("gpu-exporter"))).toBe(false);
    });

    it("runs on every node with the GPUs, on the fabric address only, with the image's entrypoint, and is scraped there", () => {
        for (const node of ["spark1", "spark2", "spark3", "spark4"]) {
            const exporter = program(withGpus, `${node}-gpu-exporter`);
            expect(exporter).toContain("NAME='vllm-fleet-gpu-exporter-unit'");
            expect(exporter).toContain("'--gpus' 'all'");
            expect(exporter).toContain(`'--address' '${fabricIps[node]}:9400'`);
            expect(exporter).toContain(`'--label' '${ROLE_LABEL}=gpu-exporter'`);
            expect(exporter).not.toContain("'--entrypoint'");
            expect(withGpus.byName(`${node}-gpu-exporter-image`).inputs.create).toContain("IMAGE_KEY='vllm-fleet:monitoring.gpuExporter.image.name'");
            expect(withGpus.byName("monitoring-config").dependencies).toContain(withGpus.byName(`${node}-gpu-exporter`).urn);
        }
        const targets = (withGpus.outputs.monitoring as { targets: string[] }).targets;
        expect(targets.filter((target) => target.startsWith("gpu "))).toEqual(["gpu 192.168.200.12:9400", "gpu 192.168.200.13:9400", "gpu 192.168.200.14:9400", "gpu 192.168.200.15:9400"]);
    });

    it("comes and goes in place: Prometheus's configuration has the GPU job either way, only its targets change", () => {
        const revisionless = (run: MockRun) => program(run, "monitoring-prometheus").replace(/vllm-fleet\.revision=\w+/g, "");
        expect(revisionless(withGpus)).toBe(revisionless(two));
        expect(program(two, "monitoring-prometheus")).toContain("/etc/vllm-fleet/prometheus/state/gpu.json");
        expect(inputsOf(withGpus, "monitoring-config")).not.toBe(inputsOf(two, "monitoring-config"));
    });

    it("is closed to all but the fabric (firewall), and gets the dashboard a GPUs row", async () => {
        const walled = await runProgram({ ...fleet([BIG, CODER], { node: "spark1", gpuExporter: {} }), security: { firewall: true, clients: ["10.1.230.0/24"] } }, probe);
        expect(program(walled, "spark2-firewall")).toMatch(/CLOSED_PORTS=\([^)]*'9400'/);
        const nodes = [planned("spark1")];
        expect(dashboardPanels(nodes, true).map((row) => row.row)).toEqual(["Services", "Nodes", "GPUs"]);
        const gpuExprs = dashboardPanels(nodes, true)[2].panels.flatMap((panel) => panel.queries.map((query) => query.expr));
        expect(gpuExprs).toContain('DCGM_FI_DEV_GPU_UTIL{job="gpu"}');
        expect(program(await runProgram(fleet([BIG, CODER], { node: "spark1", gpuExporter: {}, grafana: {} }), probe), "monitoring-grafana")).toContain("DCGM_FI_DEV_POWER_USAGE");
        expect(program(await runProgram(fleet([BIG, CODER], { node: "spark1", grafana: {} }), probe), "monitoring-grafana")).not.toContain("DCGM_FI_DEV");
    });
});

describe("the stack's own directory (compile caches, Prometheus's data)", () => {
    it("is <dir>/<stack>, and refused naming the key when the stack's name cannot name a directory", () => {
        expect(stackDirectory("/var/lib/vllm-fleet/prometheus", "spark-duo", "monitoring.dataDir")).toBe("/var/lib/vllm-fleet/prometheus/spark-duo");
        expect(stackDirectory("/", "spark-duo", "monitoring.dataDir")).toBe("/spark-duo");
        expect(() => stackDirectory("/srv", "..", "monitoring.dataDir")).toThrow('the stack name ".." cannot name a directory under vllm-fleet:monitoring.dataDir');
    });
});
