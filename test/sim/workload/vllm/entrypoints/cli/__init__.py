# STAND-IN package vllm.entrypoints.cli of vLLM 0.17.1 (vllm-fleet proving ground); see
# vllm/__init__.py. (Real vLLM imports its benchmark subcommands here; nothing needs them.)
