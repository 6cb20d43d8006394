"""The live progress view `awb agents run` shows on a terminal."""

from __future__ import annotations

import io

import anyio
import pytest
from rich.console import Console

from awb.agents import RunEvent, run_agent
from awb.agents.models import ScriptedModel
from awb.agents.progress import ProgressView

from .agent_fixtures import Reader, files_server


@pytest.mark.anyio
async def test_progress_view_shows_each_step_and_the_ending_on_a_terminal() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    model = ScriptedModel(
        [
            {"action": "call_tool", "tool": "files.read", "arguments": {"path": "missing.txt"}},
            {"action": "done", "output": {"answer": "none"}},
        ]
    )
    with ProgressView(console) as view, anyio.fail_after(10):
        await run_agent(Reader, "q", model=model, servers={"files": files_server()}, on_event=view.handle)
    assert view.lines[0] == 'reader #1 → files.read {"path": "missing.txt"}'
    assert view.lines[1].startswith("reader #1   ✗ tool_error files.read")
    assert view.lines[-1] == "reader finished: done in 2 steps"
    assert "reader finished: done in 2 steps" in screen.getvalue()


def test_progress_view_marks_a_token_total_that_holds_estimates() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    reported = {"input_tokens": 10, "output_tokens": 3, "estimated_replies": 0}
    estimated = {"input_tokens": 20, "output_tokens": 5, "estimated_replies": 1}
    with ProgressView(console) as view:
        view.handle(RunEvent(type="model_reply", agent="reader", step=1, data={"usage": reported}))
        assert "steps/tool calls/tokens: 1/0/13" in screen.getvalue()
        view.handle(RunEvent(type="model_reply", agent="reader", step=2, data={"usage": estimated}))
    assert "steps/tool calls/tokens: 2/0/~38" in screen.getvalue()
