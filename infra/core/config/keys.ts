/**
 * The keys of the stack configuration: the namespace, the keys read from it, and the secret keys
 * read on their own. Pure.
 */
/** The Pulumi config namespace (the project name). */
export const CONFIG_NAMESPACE = "vllm-fleet";

/** The top-level keys read from stack config, in the order errors are reported. */
export const CONFIG_KEYS = [
    "nodes",
    "ssh",
    "fabric",
    "services",
    "image",
    "containerDriver",
    "commandRunner",
    "swap",
    "executor",
    "model",
    "parallelism",
    "vllm",
    "ray",
    "container",
    "timeouts",
    "supervision",
    "security",
    "hostChecks",
    "hostPrep",
    "cache",
    "gateway",
    "monitoring",
] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];

/**
 * The secret keys the program reads besides {@link CONFIG_KEYS}: never part of {@link FleetConfig},
 * and never printed.
 */
export const SECRET_CONFIG_KEYS = ["sshPrivateKey", "vllmApiKey", "hfToken"] as const;
export type SecretConfigKey = (typeof SECRET_CONFIG_KEYS)[number];
