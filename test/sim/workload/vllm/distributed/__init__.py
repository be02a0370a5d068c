# STAND-IN package of vLLM 0.17.1 (vllm-fleet proving ground); see vllm/__init__.py.
