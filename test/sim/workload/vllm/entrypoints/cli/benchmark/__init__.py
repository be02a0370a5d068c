# STAND-IN package vllm.entrypoints.cli.benchmark of vLLM 0.17.1 (vllm-fleet proving ground).
