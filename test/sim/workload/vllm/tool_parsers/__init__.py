# STAND-IN: vllm/tool_parsers (ToolParserManager) of vLLM (vllm-fleet proving ground). The names
# are the registered tool call parsers of the release the stand-in models (vllm/version.py), as
# ToolParserManager.list_registered() gives them in the real 0.17.1, 0.33.0 and 0.34.0; lookups fail
# with vLLM's KeyError. A --tool-parser-plugin is imported as vLLM does (0.17.1: a file; 0.33 and
# 0.34: a module, else a file) and registers its names with register_module. Simpler than real: no
# parser classes (the stand-in generates no tool calls).
from vllm.utils.import_utils import import_parser_plugin
from vllm.version import RELEASE

TOOL_PARSERS_BY_RELEASE = {
    "0.17.1": (
        "deepseek_v3", "deepseek_v31", "deepseek_v32", "ernie45", "functiongemma", "gigachat3",
        "glm45", "glm47", "granite", "granite-20b-fc", "hermes", "hunyuan_a13b", "internlm",
        "jamba", "kimi_k2", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "minimax",
        "minimax_m2", "mistral", "olmo3", "openai", "phi4_mini_json", "pythonic", "qwen3_coder",
        "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam",
    ),
    "0.33.0": (
        "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31",
        "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma",
        "gemma4", "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4", "hermes",
        "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm", "jamba", "k2_horizon",
        "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic",
        "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse",
        "muse_glimmer", "musespark1x", "olmo3", "openai", "phi4_mini_json", "plamo3",
        "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json", "qwen3_xml", "seed_oss", "step3",
        "step3p5", "step5", "xlam",
    ),
    "0.34.0": (
        "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31",
        "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma",
        "gemma4", "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4",
        "granite_toolcall_parser", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
        "internlm", "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json",
        "llama4_json", "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2",
        "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark", "olmo3", "openai",
        "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json",
        "qwen3_xml", "ripple", "seed_oss", "step3", "step3p5", "step5", "xlam", "zaya", "zaya_xml",
    ),
}
TOOL_PARSERS = TOOL_PARSERS_BY_RELEASE[RELEASE]


class ToolParser:
    """Placeholder for vllm.tool_parsers.ToolParser (no parsing is simulated)."""

    def __init__(self, name: str):
        self.name = name


class ToolParserManager:
    tool_parsers: dict = {}
    lazy_parsers: dict = {name: (f"vllm.tool_parsers.{name}", "ToolParser") for name in TOOL_PARSERS}

    @classmethod
    def get_tool_parser(cls, name: str):
        if name in cls.tool_parsers:
            return cls.tool_parsers[name]
        if name in cls.lazy_parsers:
            parser = ToolParser(name)
            cls.tool_parsers[name] = parser
            return parser
        raise KeyError(f"Tool parser '{name}' not found.")

    @classmethod
    def list_registered(cls) -> list:
        return sorted(set(cls.tool_parsers.keys()) | set(cls.lazy_parsers.keys()))

    @classmethod
    def register_module(cls, name=None, force: bool = True, module=None):
        """Registers a parser class under `name` (or its class name); usable as a decorator."""
        def register(parser_class):
            for key in [name] if isinstance(name, str) or name is None else name:
                cls.tool_parsers[key or parser_class.__name__] = parser_class
            return parser_class

        return register(module) if module is not None else register

    @classmethod
    def import_tool_parser(cls, plugin_path: str) -> None:
        import_parser_plugin(plugin_path)


__all__ = ["ToolParser", "ToolParserManager"]
