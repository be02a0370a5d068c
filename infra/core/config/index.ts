/**
 * The stack configuration of vllm-fleet: its keys (keys.ts), its schema and the configuration it
 * yields (schema.ts, fields.ts, services.ts, model.ts, ports.ts), the vLLM flags it sets itself
 * (vllmFlags.ts), problems in words (issues.ts), the secrets' checks (secrets.ts), and the parse
 * (parse.ts). Pure: nothing here touches a host, so a stack whose config fails validation never
 * registers a resource.
 */
export { CONFIG_KEYS, CONFIG_NAMESPACE, ConfigKey, SECRET_CONFIG_KEYS, SecretConfigKey } from "./keys";
export { FleetConfig, FleetNode, serviceConfig } from "./schema";
export { ONE_MODEL_KEYS, ServiceConfig, inServiceKeys } from "./services";
export { ConfigError, ConfigIssue, editDistance, nearestKeys, unknownKeyIssues } from "./issues";
export { apiKeyIssues, hfTokenIssues, plainTextSecretIssues, privateKeyProblem, sshPrivateKeyIssues } from "./secrets";
export { MANAGED_VLLM_FLAGS, ManagedFlagUse, managedVllmFlag } from "./vllmFlags";
export { HOST_CHECK_DEFAULTS, HostCheckName, HostCheckPolicy } from "./host";
export { HUB_COMMIT, normalizeAbsolutePath } from "./model";
export { parseFleetConfig } from "./parse";
export { GATEWAY_METRICS_PORT, GATEWAY_ROUTER_PORT, GatewayConfig } from "./gateway";
export { DEFAULT_MONITORING_DATA_DIR, MonitoringConfig, NODE_EXPORTER_IMAGE, PROMETHEUS_IMAGE } from "./monitoring";
export { EVERYONE, SecurityConfig, clientPortsWarning, clientsAreEveryone } from "./security";
