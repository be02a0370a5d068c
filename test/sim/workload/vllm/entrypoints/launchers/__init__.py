# STAND-IN: the package vllm.entrypoints.launchers of vLLM 0.33 and 0.34 (vllm-fleet proving
# ground), where the API server moved from vllm.entrypoints.openai.api_server; absent from 0.17.1.
from vllm.version import only_in

only_in("0.33", __name__)
