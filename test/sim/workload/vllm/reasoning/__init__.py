# STAND-IN: vllm/reasoning (ReasoningParserManager) of vLLM (vllm-fleet proving ground). The names
# are the registered reasoning parsers of the release the stand-in models (vllm/version.py), as
# ReasoningParserManager.list_registered() gives them in the real 0.17.1, 0.33.0 and 0.34.0; lookups
# fail with vLLM's KeyError. A --reasoning-parser-plugin is imported as vLLM does (0.17.1: a file;
# 0.33 and 0.34: a module, else a file) and registers its names with register_module. Simpler than
# real: no parser classes (the stand-in generates no reasoning).
from vllm.utils.import_utils import import_parser_plugin
from vllm.version import RELEASE

REASONING_PARSERS_BY_RELEASE = {
    "0.17.1": (
        "deepseek_r1", "deepseek_v3", "ernie45", "glm45", "granite", "holo2", "hunyuan_a13b",
        "kimi_k2", "minimax_m2", "minimax_m2_append_think", "mistral", "nemotron_v3", "olmo3",
        "openai_gptoss", "qwen3", "seed_oss", "step3", "step3p5",
    ),
    "0.33.0": (
        "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4",
        "deepseek_v41", "ernie45", "gemma4", "glm45", "glm47", "granite",
        "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
        "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
        "minimax_m2_append_think", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x",
        "nemotron_v3", "olmo3", "openai_gptoss", "plamo3", "poolside_v1", "qwen3", "seed_oss",
        "step3", "step3p5", "step5",
    ),
    "0.34.0": (
        "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4",
        "deepseek_v41", "ernie45", "gemma4", "glm45", "glm47", "granite",
        "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
        "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
        "minimax_m2_append_think", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark",
        "nemotron_v3", "olmo3", "openai_gptoss", "plamo3", "poolside_v1", "qwen3", "ripple",
        "seed_oss", "step3", "step3p5", "step5", "zaya",
    ),
}
REASONING_PARSERS = REASONING_PARSERS_BY_RELEASE[RELEASE]


class ReasoningParser:
    """Placeholder for vllm.reasoning.ReasoningParser (no parsing is simulated)."""

    def __init__(self, name: str):
        self.name = name


class ReasoningParserManager:
    reasoning_parsers: dict = {}
    lazy_parsers: dict = {name: (f"vllm.reasoning.{name}", "ReasoningParser") for name in REASONING_PARSERS}

    @classmethod
    def get_reasoning_parser(cls, name: str):
        if name in cls.reasoning_parsers:
            return cls.reasoning_parsers[name]
        if name in cls.lazy_parsers:
            parser = ReasoningParser(name)
            cls.reasoning_parsers[name] = parser
            return parser
        registered = ", ".join(cls.list_registered())
        raise KeyError(f"Reasoning parser '{name}' not found. Available parsers: {registered}")

    @classmethod
    def list_registered(cls) -> list:
        return sorted(set(cls.reasoning_parsers.keys()) | set(cls.lazy_parsers.keys()))

    @classmethod
    def register_module(cls, name=None, force: bool = True, module=None):
        """Registers a parser class under `name` (or its class name); usable as a decorator."""
        def register(parser_class):
            for key in [name] if isinstance(name, str) or name is None else name:
                cls.reasoning_parsers[key or parser_class.__name__] = parser_class
            return parser_class

        return register(module) if module is not None else register

    @classmethod
    def import_reasoning_parser(cls, plugin_path: str) -> None:
        import_parser_plugin(plugin_path)


__all__ = ["ReasoningParser", "ReasoningParserManager"]
