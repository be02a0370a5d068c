# STAND-IN: vllm/version.py. The version is real vLLM's (0.17.1, the release whose CLI, flags
# and Ray env carry-over this package models) with a local label, so nothing mistakes the
# stand-in for the real thing; it is also what `vllm --version`, /version and the dist-info say.
__version__ = "0.17.1+vllm-fleet-standin"
__version_tuple__ = (0, 17, 1, "vllm-fleet-standin")
