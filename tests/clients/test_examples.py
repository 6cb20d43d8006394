"""Each client example, run as written against a real `awb start` over stdio, walks the whole journey.

The frameworks come from the `clients` extra (`make test` installs it); LangChain's adapters, which pin
another MCP SDK major, run from their own virtual environment in test_langchain.py.
"""

from __future__ import annotations

from importlib import metadata

import pytest

from client_support import JOURNEY, RunExample

FRAMEWORKS = [
    # example file, distribution it needs, protocol generation it negotiates with its defaults
    ("official_sdk.py", "mcp", "2026-07-28"),
    ("pydantic_ai_toolset.py", "pydantic-ai-slim", "2026-07-28"),
    ("openai_agents.py", "openai-agents", "2026-07-28"),
    ("fastmcp_client.py", "fastmcp-slim", "2026-07-28"),
    ("agno_tools.py", "agno", "2025-11-25"),
]


def require(distribution: str) -> None:
    """Skip when a framework is not installed. By distribution, not import: this suite's tests/agents
    package shadows the OpenAI Agents SDK's `agents` inside pytest (the examples run in subprocesses)."""
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{distribution} is not installed: the clients extra is missing (pip install -e '.[clients]')")


@pytest.mark.parametrize(("example", "distribution", "protocol"), FRAMEWORKS, ids=[f[0][:-3] for f in FRAMEWORKS])
def test_client_example_crafts_calls_searches_equips_and_calls_the_equipped_tool_directly(
    run_example: RunExample, example: str, distribution: str, protocol: str
) -> None:
    require(distribution)
    assert run_example(example) == [f"protocol: {protocol}", *JOURNEY]
