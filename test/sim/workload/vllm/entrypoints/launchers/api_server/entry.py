# STAND-IN: vllm/entrypoints/launchers/api_server/entry.py of vLLM 0.33 and 0.34 (vllm-fleet
# proving ground): `vllm serve`'s single API server, run_server (the stand-in's server is in
# vllm/entrypoints/openai/api_server.py, which 0.33 keeps as a deprecated shim of this).
from vllm.entrypoints.openai._server import run_server

__all__ = ["run_server"]
