/**
 * Where the vLLM stand-in may answer the conformance probes (conformance.ts) otherwise than real
 * vLLM, and why. docs/proving-ground.md lists the same probes (test/unit/standInDifferences.test.ts
 * holds the two lists equal).
 */
export const STAND_IN_DIFFERENCES: Readonly<Record<string, string>> = {
    "POST /v1/completions: the fields of the answer":
        "the stand-in answers the fields of vLLM 0.17.1's completion that clients and the product read; real vLLM 0.32 adds more (kv_transfer_params, metrics, token_ids ...), none of which the product reads",
    phases: "the stand-in logs the phases of vLLM's GPU build (0.17.1: weight shards, torch.compile, CUDA graphs); the CPU build logs its own",
    "rank death: the headless rank":
        "the stand-in runs a node's ranks in one process, so the worker killed is the headless rank's vLLM itself (its keeper sees 137), where real vLLM's headless rank ends itself with 0",
};
