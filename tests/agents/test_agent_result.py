"""A run's JSON holds each large value once; events carry large values cut, the result in full."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from awb.agents import Agent, RunEvent, RunResult
from awb.agents.events import Emitter
from awb.agents.loop import run_loop
from awb.agents.models import ScriptedModel
from awb.agents.scope import RunScope
from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec

pytestmark = pytest.mark.anyio

BIG = "Z" * 1_000_000
OUT = "Y" * 1_000_000
ROWS = list(range(200_000))
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class Note(BaseModel):
    text: str


class Saved(BaseModel):
    saved: str


class Writer(Agent):
    mode = "writer"
    tools = ("notes",)
    system_prompt = "Save the note."
    Input = Note
    Output = Saved


class Lead(Agent):
    mode = "lead"
    tools = ("notes",)
    system_prompt = "Have the writer save it."
    Input = Note
    Output = Saved
    subagents = (Writer,)


def notes() -> Toolbox:
    async def save(arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(ok=True, payload={"saved": len(json.dumps(arguments))})

    toolbox = Toolbox()
    toolbox.add(ToolSpec("notes.save", "Save a note.", OBJECT, "notes"), save)
    return toolbox


async def run(agent: type[Agent], script: list[dict[str, Any]]) -> tuple[RunResult, list[RunEvent]]:
    events: list[RunEvent] = []
    scope = RunScope(agent.budget, emit=Emitter(events.append))
    with anyio.fail_after(30):
        result = await run_loop(agent, Note(text="x"), ScriptedModel(script), notes(), scope=scope)
    return result, events


async def test_a_large_tool_argument_is_written_once_in_the_runs_json() -> None:
    """A 5 MB argument was written three times: in `tool_calls`, the step's action and the step's tool call."""
    save = {"action": "call_tool", "tool": "notes.save", "arguments": {"text": BIG, "rows": ROWS, "tag": "small"}}
    result, _ = await run(Writer, [save, {"action": "done", "output": {"saved": OUT}}])
    text = result.model_dump_json()
    assert text.count(BIG) == 1 and text.count(OUT) == 1
    assert text.count(json.dumps(ROWS, separators=(",", ":"))) == 1
    data = json.loads(text)
    assert data["tool_calls"][0]["arguments"] == {"text": BIG, "rows": ROWS, "tag": "small"}
    assert data["output"] == {"saved": OUT}
    step = data["steps"][0]
    assert step["action"]["arguments"]["text"] == "…[a repeat of tool_calls[0].arguments.text: 1000002 characters]"
    assert step["action"]["arguments"]["rows"].startswith("…[a repeat of tool_calls[0].arguments.rows: ")
    assert step["action"]["arguments"]["tag"] == "small"  # small values stay where they are
    assert step["tool_call"]["arguments"]["text"].startswith("…[a repeat of tool_calls[0].arguments.text")
    assert data["steps"][1]["action"]["output"]["saved"] == "…[a repeat of output.saved: 1000002 characters]"
    # Still a RunResult, and the Python object keeps every copy.
    assert RunResult.model_validate_json(text).tool_calls[0].arguments["text"] == BIG
    assert result.steps[0].action is not None and result.steps[0].action["arguments"]["text"] == BIG


async def test_a_subagents_large_argument_is_written_once_too() -> None:
    spawn = {"action": "spawn_subagent", "agent": "writer", "input": {"text": "x"}}
    save = {"action": "call_tool", "tool": "notes.save", "arguments": {"text": BIG}}
    script = [spawn, save, {"action": "done", "output": {"saved": "ok"}}, {"action": "done", "output": {"saved": "ok"}}]
    result, _ = await run(Lead, script)
    assert result.ok
    assert result.model_dump_json().count(BIG) == 1


async def test_events_carry_large_values_cut_and_the_result_in_full_once() -> None:
    save = {"action": "call_tool", "tool": "notes.save", "arguments": {"text": BIG}}
    result, events = await run(Writer, [save, {"action": "done", "output": {"saved": "ok"}}])
    assert result.ok
    stream = "\n".join(event.model_dump_json() for event in events)
    assert stream.count(BIG) == 1  # in the `done` event's result
    reply = next(e for e in events if e.type == "model_reply")
    call = next(e for e in events if e.type == "tool_call")
    for cut in (reply.data["action"]["arguments"]["text"], call.data["arguments"]["text"]):
        assert cut.startswith("ZZZ") and cut.endswith("more characters]") and len(cut) < 5000
    assert len(stream) < len(BIG) + 50_000


async def test_a_subagents_large_values_are_written_once_in_the_event_stream() -> None:
    """The subagent's own `done` carried its result in full, and the lead's `done` again in its record."""
    spawn = {"action": "spawn_subagent", "agent": "writer", "input": {"text": "x"}}
    save = {"action": "call_tool", "tool": "notes.save", "arguments": {"text": BIG}}
    script = [spawn, save, {"action": "done", "output": {"saved": OUT}}, {"action": "done", "output": {"saved": "ok"}}]
    result, events = await run(Lead, script)
    assert result.ok
    stream = "\n".join(event.model_dump_json() for event in events)
    assert stream.count(BIG) == 1 and stream.count(OUT) == 1
    [told] = [event for event in events if event.type == "done" and event.depth == 1]
    final = events[-1].data["result"]
    assert told.agent == "writer" and events.index(told) < len(events) - 1
    where = "…[in the lead run's result at subagent_calls[0]"
    assert told.data["result"]["tool_calls"][0]["arguments"]["text"] == (
        f"{where}.tool_calls[0].arguments.text: 1000002 characters]"
    )
    assert told.data["result"]["output"]["saved"] == f"{where}.output.saved: 1000002 characters]"
    # The places named hold them, and the subagent's ending is still a RunResult a watcher can read.
    assert final["subagent_calls"][0]["tool_calls"][0]["arguments"]["text"] == BIG
    assert final["subagent_calls"][0]["output"]["saved"] == OUT
    ending = RunResult.model_validate(told.data["result"])
    assert (ending.agent, ending.termination_reason, ending.iterations) == ("writer", "done", 2)
    assert ending.tool_calls[0].name == "notes.save" and ending.tool_calls[0].ok


async def test_what_only_a_subagents_ending_holds_stays_in_its_done_event() -> None:
    spawn = {"action": "spawn_subagent", "agent": "writer", "input": {"text": "x"}}
    save = {"action": "call_tool", "tool": "notes.save", "arguments": {"text": "small"}}
    script = [
        spawn,
        save,
        *[{"action": "done", "output": {"wrong": 1}}] * 3,
        {"action": "done", "output": {"saved": "ok"}},
    ]
    result, events = await run(Lead, script)
    assert result.ok and result.subagent_calls[0].termination_reason == "output_invalid"
    [told] = [event for event in events if event.type == "done" and event.depth == 1]
    partial = told.data["result"]["partial"]  # not in the lead's record of the call: kept as it is
    assert partial["last_output"] == {"wrong": 1} and partial["observations"]
