# STAND-IN: vllm/reasoning (ReasoningParserManager) of vLLM 0.17.1 (vllm-fleet proving ground).
# The names are vLLM 0.17.1's registered reasoning parsers (its lazy registry in
# vllm/reasoning/__init__.py); lookups fail with vLLM's KeyError. Simpler than real: no parser
# classes (the stand-in generates no reasoning), and --reasoning-parser-plugin files are not loaded.

REASONING_PARSERS = (
    "deepseek_r1", "deepseek_v3", "ernie45", "glm45", "granite", "holo2", "hunyuan_a13b", "kimi_k2",
    "minimax_m2", "minimax_m2_append_think", "mistral", "nemotron_v3", "olmo3", "openai_gptoss",
    "qwen3", "seed_oss", "step3", "step3p5",
)


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


__all__ = ["ReasoningParser", "ReasoningParserManager"]
