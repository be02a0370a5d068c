/**
 * The four-Spark fleet of issue 23 that the unit tests of services and of the gateway run through
 * the whole program on mocks: big (ray, TP 2) on spark1-2, coder (mp, TP 2) on spark3-4, small (mp)
 * beside big on spark1, and the gateway on spark3.
 */
import { sparkProbeOutput } from "./mocks";

export const fabricIps: Record<string, string> = { spark1: "192.168.200.12", spark2: "192.168.200.13", spark3: "192.168.200.14", spark4: "192.168.200.15" };
export const mgmtIps: Record<string, string> = { spark1: "10.1.230.180", spark2: "10.1.230.181", spark3: "10.1.230.182", spark4: "10.1.230.183" };
/** A model of 8 GiB of weights on every node: small enough for two services on one Spark. */
export const probe = (node: string) => sparkProbeOutput(fabricIps[node], mgmtIps[node], { weightBytes: 8 * 1024 ** 3 });

export const model = (servedName: string) => ({ path: "/home/aurora/models/m", servedName });
export const image = { name: "vllm/vllm-openai:v0.17.1" };
export const BIG = { name: "big", nodes: ["spark1", "spark2"], image, executor: "ray", model: model("big"), vllm: { port: 8000, maxModelLen: 32768, gpuMemoryUtilization: 0.6 } };
export const CODER = { name: "coder", nodes: ["spark3", "spark4"], image, executor: "mp", model: model("coder"), vllm: { port: 8001, maxModelLen: 32768 } };
export const SMALL = { name: "small", nodes: ["spark1"], image, executor: "mp", model: model("small"), vllm: { port: 8002, maxModelLen: 8192, masterPort: 29502 } };
export const GATEWAY = { node: "spark3", port: 4000, image: { name: "vllm/vllm-router:0.1.17" } };

export const nodes = Object.keys(mgmtIps).map((name) => ({ name, host: mgmtIps[name] }));

/** The stack's config of these services (builtin runner, ssh driver), with a gateway when given. */
export const fleet = (services: readonly object[], gateway?: object | null) => ({
    nodes,
    ssh: { user: "aurora" },
    fabric: { subnet: "192.168.200.0/24" },
    containerDriver: "ssh",
    commandRunner: "builtin",
    services,
    ...(gateway ? { gateway } : {}),
});
