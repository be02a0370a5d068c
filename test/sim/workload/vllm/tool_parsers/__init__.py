# STAND-IN: vllm/tool_parsers (ToolParserManager) of vLLM 0.17.1 (vllm-fleet proving ground).
# The names are vLLM 0.17.1's registered tool call parsers (its lazy registry in
# vllm/tool_parsers/__init__.py); lookups fail with vLLM's KeyError. Simpler than real: no parser
# classes (the stand-in generates no tool calls), and --tool-parser-plugin files are not loaded.

TOOL_PARSERS = (
    "deepseek_v3", "deepseek_v31", "deepseek_v32", "ernie45", "functiongemma", "gigachat3", "glm45",
    "glm47", "granite", "granite-20b-fc", "hermes", "hunyuan_a13b", "internlm", "jamba", "kimi_k2",
    "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "minimax", "minimax_m2", "mistral",
    "olmo3", "openai", "phi4_mini_json", "pythonic", "qwen3_coder", "qwen3_xml", "seed_oss", "step3",
    "step3p5", "xlam",
)


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


__all__ = ["ToolParser", "ToolParserManager"]
