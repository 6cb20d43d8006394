"""Blueprints the REST tests post."""

from __future__ import annotations

from typing import Any


def blueprint(**parts: Any) -> dict[str, Any]:
    """A valid single-agent blueprint; `parts` replace or add top-level parts."""
    data: dict[str, Any] = {
        "name": "researcher",
        "head": {"provider": "openai", "model": "gpt-4o-mini", "system_prompt": "You answer questions."},
        "legs": {"mode": "single_agent"},
    }
    data.update(parts)
    return data


TAVILY = {"type": "tavily_search", "max_results": 3, "search_depth": "advanced"}
