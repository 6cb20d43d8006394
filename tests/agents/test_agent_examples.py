"""Every agent example in the docs runs."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hello_agent.py"


def test_hello_agent_example_runs_and_prints_a_typed_result(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    printed = json.loads(capsys.readouterr().out)
    assert printed["termination_reason"] == "done"
    assert printed["output"] == {"greeting": "Hello, Ada!"}
    assert [call["name"] for call in printed["tool_calls"]] == ["greeter.greet"]


def test_the_readme_shows_the_same_example_as_examples_hello_agent() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert EXAMPLE.read_text() in blocks


@pytest.mark.anyio
async def test_hello_agent_example_main_returns_the_run_result() -> None:
    namespace = runpy.run_path(str(EXAMPLE))
    with anyio.fail_after(10):
        result = await namespace["main"]()
    assert result.ok
