"""What a blueprint may name: providers and their models, tool types, execution modes, and the ranges
the validators and the builder's forms share. One table, so the schemas endpoint and the validation
errors can never disagree.
"""

from __future__ import annotations

from typing import Final

#: Provider -> model -> the most output tokens the model accepts (`head.max_tokens` upper bound).
MODELS: Final[dict[str, dict[str, int]]] = {
    "openai": {
        "gpt-4o": 16_384,
        "gpt-4o-mini": 16_384,
        "gpt-4.1": 32_768,
        "gpt-4.1-mini": 32_768,
        "gpt-4.1-nano": 32_768,
        "o4-mini": 100_000,
    },
    "anthropic": {
        "claude-sonnet-4-5": 64_000,
        "claude-haiku-4-5": 64_000,
        "claude-opus-4-1": 32_000,
        "claude-3-5-haiku-latest": 8_192,
    },
}
PROVIDERS: Final = tuple(MODELS)

TOOL_TYPES: Final = ("tavily_search", "mcp", "workbench")
EXECUTION_MODES: Final = ("single_agent", "workflow", "team")
#: What each execution mode needs besides `mode`.
MODE_REQUIREMENTS: Final[dict[str, list[str]]] = {"single_agent": [], "workflow": ["steps"], "team": ["members"]}

SYSTEM_PROMPT_MAX_CHARS: Final = 10_000
TEMPERATURE_RANGE: Final = (0.0, 2.0)
HISTORY_LENGTH_RANGE: Final = (1, 100)
MAX_TOOL_CALLS_RANGE: Final = (1, 100)
TIMEOUT_SECONDS_RANGE: Final = (1, 300)
TAVILY_MAX_RESULTS_RANGE: Final = (1, 20)
TAVILY_SEARCH_DEPTHS: Final = ("basic", "advanced")

#: Ranges by field path (list indexes written `[]`), for the `allowed` part of validation errors.
RANGES: Final[dict[str, tuple[float, float]]] = {
    "head.temperature": TEMPERATURE_RANGE,
    "heart.memory.history_length": HISTORY_LENGTH_RANGE,
    "spine.max_tool_calls": MAX_TOOL_CALLS_RANGE,
    "spine.timeout_seconds": TIMEOUT_SECONDS_RANGE,
    "arms[].max_results": TAVILY_MAX_RESULTS_RANGE,
}
