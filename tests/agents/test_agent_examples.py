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


CRAFTING = ROOT / "examples" / "crafting_agent.py"


@pytest.mark.anyio
async def test_crafting_example_crafts_a_workbench_tool_and_answers_with_its_result(tmp_path: Path) -> None:
    namespace = runpy.run_path(str(CRAFTING))
    with anyio.fail_after(30):
        result = await namespace["main"](inventory=tmp_path / "inventory.db")
    assert (result.termination_reason, result.output) == ("done", {"result": 42})
    assert [(c.name, c.ok) for c in result.tool_calls] == [("awb.awb_craft", True), ("awb.awb_call", True)]
    assert (tmp_path / "inventory.db").exists()


def test_crafting_example_runs_as_a_script(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(CRAFTING), run_name="__main__")
    printed = capsys.readouterr().out
    assert printed.startswith("step 1: awb.awb_craft ok=True\nstep 2: awb.awb_call ok=True\n")
    assert json.loads(printed.split("\n", 2)[2])["output"] == {"result": 42}


def test_the_readme_shows_the_crafting_example() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert CRAFTING.read_text() in blocks


def test_the_readme_limits_example_declares_a_budget_and_settings() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    [snippet] = [block for block in blocks if block.startswith("class Careful(Hello)")]
    namespace = runpy.run_path(str(EXAMPLE))
    from awb.agents import Budget, ModelSettings

    exec(snippet, {**namespace, "Budget": Budget, "ModelSettings": ModelSettings}, namespace)
    careful = namespace["Careful"]
    assert careful.budget.max_cost_usd == 0.05
    assert careful.model_settings.timeout_seconds == 60
