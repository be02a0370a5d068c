/** Raw stack configs the unit tests share (keys without the `vllm-fleet:` prefix). */

/** Two DGX Sparks as in the write-ups: Qwen3.5-122B-A10B-FP8, fabric 192.168.200.0/24. */
export const sparkDuo = {
    nodes: [
        { name: "spark1", host: "10.1.230.180" },
        { name: "spark2", host: "10.1.230.181" },
    ],
    ssh: { user: "aurora" },
    fabric: { subnet: "192.168.200.0/24" },
    image: { name: "hellohal2064/vllm-qwen3.5-gb10:latest" },
    model: { path: "/home/aurora/models/Qwen3.5-122B-A10B-FP8" },
};
