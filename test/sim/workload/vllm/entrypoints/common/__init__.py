# STAND-IN: the package vllm.entrypoints.common of vLLM 0.33 and 0.34 (vllm-fleet proving ground),
# absent from 0.17.1.
from vllm.version import only_in

only_in("0.33", __name__)
