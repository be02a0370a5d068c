"""STAND-IN: the `vllm` package of vLLM 0.17.1, or of 0.33.0/0.34.0 (vllm/version.py), for the
vllm-fleet proving ground (test/sim).

No model runs here. The package has real vLLM's module layout where a launcher can reach it
(0.17.1: `vllm.entrypoints.cli.main.main`, `vllm.entrypoints.cli.serve.ServeSubcommand`,
`vllm.entrypoints.openai.cli_args`, `vllm.entrypoints.openai.api_server`,
`vllm.reasoning.ReasoningParserManager`, `vllm.tool_parsers.ToolParserManager`,
`vllm.ray.ray_env`, `vllm.v1.executor.ray_utils`; 0.33/0.34: `vllm.entrypoints.common.cli_args`,
`vllm.entrypoints.launchers`, `vllm.v1.executor.ray_executor_v2` in their place), so a script
written against real vLLM runs against it unchanged. Each module says in its header what it models
and where it is simpler. test/sim/README.md has the overview.
"""
from vllm.version import __version__, __version_tuple__

__all__ = ["__version__", "__version_tuple__"]
