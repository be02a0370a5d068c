# STAND-IN: vllm/version.py (vllm-fleet proving ground). The stand-in models two releases of real
# vLLM, the one its installed version names: 0.17.1 (the default, the seeds' image) or 0.33.0/0.34.0,
# whose module layout, flags, parser names, Ray executor and messages differ (test/sim/README.md).
# The version is the installed dist-info's (`importlib.metadata.version("vllm")`, what the image
# says), or VLLM_SIM_VERSION's (e.g. `0.34.0`, for a run without the image), with a local label so
# that nothing mistakes the stand-in for the real thing; it is also what `vllm --version`,
# /version and vllm-fleet's argument check report.
import os
from importlib import metadata

LABEL = "vllm-fleet-standin"
# The releases modelled, and the module layout each one has.
RELEASES = {"0.17.1": "0.17.1", "0.33.0": "0.33", "0.34.0": "0.33"}


def _version() -> str:
    chosen = os.environ.get("VLLM_SIM_VERSION", "").strip()
    if chosen:
        return chosen if "+" in chosen else f"{chosen}+{LABEL}"
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return f"0.17.1+{LABEL}"


__version__ = _version()
# The release this stand-in behaves as: the version without its local label, if modelled.
RELEASE = __version__.split("+")[0]
if RELEASE not in RELEASES:
    raise ImportError(f"the vLLM stand-in models vLLM {', '.join(RELEASES)}, not {RELEASE} (VLLM_SIM_VERSION or its dist-info)")
LAYOUT = RELEASES[RELEASE]
__version_tuple__ = (*(int(part) for part in RELEASE.split(".")), LABEL)


def only_in(layout: str, module: str) -> None:
    """Makes a module of one layout absent from the other: importing it fails as for a module
    that is not there (`module` names the first missing part, as Python's message does)."""
    if LAYOUT != layout:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
