# STAND-IN: the vllm.compilation package of vLLM (vllm-fleet proving ground); see backends.py.
