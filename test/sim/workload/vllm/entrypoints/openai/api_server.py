# STAND-IN: vllm/entrypoints/openai/api_server.py (vllm-fleet proving ground). In vLLM 0.17.1 the
# API server itself; in 0.33 and 0.34 a deprecated shim of vllm.entrypoints.launchers, which warns
# when imported. The stand-in's server is vllm/entrypoints/openai/_server.py: all of it is here
# (its Server and _HTTPServer too, which test/unit/loadtest.test.ts drives).
import warnings

from vllm.entrypoints.openai import _server
from vllm.version import LAYOUT

globals().update({name: value for name, value in vars(_server).items() if not name.startswith("__")})

if LAYOUT != "0.17.1":
    warnings.warn(
        "`vllm.entrypoints.openai.api_server` is deprecated and will likely be"
        "unsupported in a future version. Use the corresponding function from "
        "`vllm.entrypoints.launchers` instead.",
        DeprecationWarning,
        stacklevel=1,
    )
