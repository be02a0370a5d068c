/**
 * The plan: the nodes (nodes.ts), their network (network.ts), the serve arguments (serveArgs.ts),
 * the containers (containers.ts), the firewall (firewall.ts), the preparation of the hosts (hostPrep.ts), the monitoring (monitoring.ts, grafana.ts, dashboard.ts), and the whole fleet's plan, computed
 * once (fleet.ts). Pure.
 */
export * from "./containers";
export * from "./firewall";
export * from "./fleet";
export * from "./hostPrep";
export * from "./network";
export * from "./nodes";
export * from "./serveArgs";
export * from "./cache";
export * from "./budgets";
export * from "./gateway";
export * from "./swaps";
export * from "./monitoring";
export * from "./dashboard";
export * from "./grafana";
