"""The loop with a scripted model against small in-memory MCP servers."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from awb.agents import Agent, Budget, run_agent
from awb.agents.actions import Action, CallTool, Done
from awb.agents.models import Prompt, ScriptedModel
from awb.agents.toolbox import ToolSpec
from awb.errors import InvalidParams

from .agent_fixtures import Answer, Question, Reader, files_server, math_server

pytestmark = pytest.mark.anyio


class Arithmetic(Agent):
    mode = "arithmetic"
    tools = ("math",)
    system_prompt = "Do sums."
    Input = Question
    Output = Answer


class Lead(Agent):
    mode = "lead"
    tools = ("files", "math")
    system_prompt = "Delegate sums."
    Input = Question
    Output = Answer
    subagents = (Arithmetic,)


def servers() -> dict[str, object]:
    return {"files": files_server(), "math": math_server()}


async def test_agent_calls_an_mcp_tool_and_returns_typed_output() -> None:
    model = ScriptedModel(
        [
            {"action": "call_tool", "tool": "files.read", "arguments": {"path": "notes.txt"}},
            {"action": "done", "output": {"answer": "42"}},
        ]
    )
    with anyio.fail_after(10):
        result = await run_agent(Reader, {"question": "what is the answer?"}, model=model, servers=servers())
    assert result.termination_reason == "done"
    assert result.output == {"answer": "42"}
    assert result.iterations == 2
    assert [(c.name, c.arguments, c.ok) for c in result.tool_calls] == [("files.read", {"path": "notes.txt"}, True)]
    assert "the answer is 42" in model.seen[1][0].body


async def test_allowlist_hides_tools_of_servers_the_agent_does_not_allow() -> None:
    model = ScriptedModel([CallTool(tool="math.add", arguments={"a": 1, "b": 2}), Done(output={"answer": "none"})])
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    visible = {spec.name for spec in model.seen[0][1]}
    assert visible == {"files.read", "files.listing"}
    assert result.tool_calls == []
    assert "no tool named 'math.add' is available" in model.seen[1][0].body


async def test_subagent_with_narrower_allowlist_runs_and_its_output_is_appended() -> None:
    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> Action | dict[str, object]:
        names = {spec.name for spec in tools}
        if prompt.system == "Do sums.":
            assert names == {"math.add"}
            if "tool_result" not in prompt.body:
                return {"action": "call_tool", "tool": "add", "arguments": {"a": 40, "b": 2}}
            return {"action": "done", "output": {"answer": "42"}}
        assert "arithmetic" in names
        if "subagent_output" not in prompt.body:
            return {"action": "spawn_subagent", "agent": "arithmetic", "input": "what is 40 + 2?"}
        return {"action": "done", "output": {"answer": "lead says 42"}}

    with anyio.fail_after(10):
        result = await run_agent(Lead, "sum", model=ScriptedModel(script), servers=servers())
    assert result.termination_reason == "done"
    assert result.output == {"answer": "lead says 42"}
    [call] = result.subagent_calls
    assert (call.agent, call.termination_reason, call.output) == ("arithmetic", "done", {"answer": "42"})
    assert call.input == {"question": "what is 40 + 2?"}
    assert [c.name for c in call.tool_calls] == ["math.add"]
    assert result.tool_calls == []


async def test_subagent_cannot_spawn_subagents() -> None:
    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, object]:
        if prompt.system == "Do sums.":
            assert all(spec.kind == "tool" for spec in tools)
            if "refused" not in prompt.body:
                return {"action": "spawn_subagent", "agent": "arithmetic", "input": "again"}
            return {"action": "done", "output": {"answer": "could not delegate"}}
        if "subagent_output" not in prompt.body:
            return {"action": "spawn_subagent", "agent": "arithmetic", "input": "sum"}
        return {"action": "done", "output": {"answer": "ok"}}

    with anyio.fail_after(10):
        result = await run_agent(Lead, "sum", model=ScriptedModel(script), servers=servers())
    assert result.termination_reason == "done"
    [call] = result.subagent_calls
    assert call.output == {"answer": "could not delegate"}


async def test_invalid_output_is_fed_back_and_retried_then_fails_with_validation_errors() -> None:
    model = ScriptedModel([Done(output={"wrong": 1})] * 3)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert result.termination_reason == "output_invalid"
    assert result.output is None
    assert result.iterations == 1
    [step] = result.steps
    assert [r.code for r in step.rejected] == ["output_invalid"] * 3
    assert step.action is None
    assert result.error is not None
    assert result.error["details"]["errors"][0]["loc"] == ["answer"]
    assert "output does not match" in model.seen[1][0].body


async def test_invalid_output_corrected_on_retry_finishes_done() -> None:
    model = ScriptedModel([Done(output={"answer": 7}), Done(output={"answer": "7"})])
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert (result.termination_reason, result.output) == ("done", {"answer": "7"})


async def test_malformed_action_from_the_model_is_fed_back_and_retried() -> None:
    model = ScriptedModel([{"action": "dance"}, {"tool": "x"}, {"action": "done", "output": {"answer": "a"}}])
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert result.termination_reason == "done"
    assert "malformed_action" in model.seen[1][0].body


async def test_malformed_actions_past_the_retries_end_in_output_invalid() -> None:
    model = ScriptedModel([{"action": "dance"}] * 3)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert result.termination_reason == "output_invalid"


async def test_max_iterations_ends_the_run() -> None:
    class Short(Reader):
        budget = Budget(max_iterations=3)

    model = ScriptedModel(lambda prompt, tools: {"action": "call_tool", "tool": "files.listing"})
    with anyio.fail_after(10):
        result = await run_agent(Short, "q", model=model, servers=servers())
    assert result.termination_reason == "max_iterations"
    assert result.iterations == 3
    assert len(result.tool_calls) == 3


async def test_max_tool_calls_ends_the_run_before_the_extra_call() -> None:
    class Frugal(Reader):
        budget = Budget(max_tool_calls=2)

    model = ScriptedModel(lambda prompt, tools: {"action": "call_tool", "tool": "files.listing"})
    with anyio.fail_after(10):
        result = await run_agent(Frugal, "q", model=model, servers=servers())
    assert result.termination_reason == "max_tool_calls"
    assert len(result.tool_calls) == 2


async def test_timeout_ends_a_run_whose_model_never_answers() -> None:
    # No servers: the 50 ms also bound their start, which a loaded machine (load 10, two cores) let
    # outlast it, and the run failed with server_unavailable before the model was asked.
    class Hasty(Reader):
        tools = ()
        budget = Budget(timeout_seconds=0.05)

    never = anyio.Event()

    async def stuck(prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        await never.wait()
        raise AssertionError("unreachable")

    with anyio.fail_after(10):
        result = await run_agent(Hasty, "q", model=ScriptedModel(stuck), servers={})
    assert result.termination_reason == "timeout"
    assert result.iterations == 1


async def test_a_tool_call_the_timeout_cuts_off_is_recorded_and_named_in_the_partial_result() -> None:
    """A server's tool that never answers: the result said `timeout` and nothing of the call that was running."""

    class Hasty(Reader):
        tools = ("slow",)
        budget = Budget(timeout_seconds=0.5)

    slow = MCPServer("slow")

    @slow.tool()
    async def wait(seconds: float) -> str:
        """Answer after a while."""
        await anyio.sleep(seconds)
        return "late"

    model = ScriptedModel([{"action": "call_tool", "tool": "slow.wait", "arguments": {"seconds": 3600}}])
    with anyio.fail_after(10):
        result = await run_agent(Hasty, "q", model=model, servers={"slow": slow})
    assert result.termination_reason == "timeout"
    assert [(call.name, call.ok) for call in result.tool_calls] == [("slow.wait", False)]
    error = result.tool_calls[0].error
    assert error is not None and error.code == "cancelled" and "while slow.wait ran" in error.message
    assert result.steps[0].tool_call == result.tool_calls[0]
    assert result.partial is not None and "while slow.wait ran" in result.partial.observations[-1]


async def test_tool_error_result_becomes_an_error_observation() -> None:
    model = ScriptedModel(
        [
            CallTool(tool="files.read", arguments={"path": "missing.txt"}),
            Done(output={"answer": "unknown"}),
        ]
    )
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert result.termination_reason == "done"
    assert [c.ok for c in result.tool_calls] == [False]
    assert "tool_error (files.read): Error executing tool read: no such file: missing.txt" in model.seen[1][0].body


async def test_stop_on_tool_error_ends_the_run_with_tool_error() -> None:
    class Strict(Reader):
        stop_on_tool_error = True

    model = ScriptedModel([CallTool(tool="files.read", arguments={"path": "missing.txt"})])
    with anyio.fail_after(10):
        result = await run_agent(Strict, "q", model=model, servers=servers())
    assert result.termination_reason == "tool_error"
    assert result.error is not None
    assert "no such file" in result.error["details"]["result"]


async def test_run_code_without_a_code_runner_tells_the_model_it_is_not_available() -> None:
    model = ScriptedModel([{"action": "run_code", "code": "print(1)"}, Done(output={"answer": "x"})])
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert result.termination_reason == "done"
    assert "run_code is not available in this run" in model.seen[1][0].body


async def test_a_model_that_fails_ends_the_run_with_model_error() -> None:
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=ScriptedModel([]), servers=servers())
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert result.error["code"] == "model_error"


async def test_notes_proposed_by_the_model_are_kept_in_working_memory() -> None:
    model = ScriptedModel([CallTool(tool="files.listing", note="start with the listing"), Done(output={"answer": "a"})])
    with anyio.fail_after(10):
        await run_agent(Reader, "q", model=model, servers=servers())
    assert "note (model): start with the listing" in model.seen[1][0].body


async def test_invalid_input_is_rejected_before_the_run_starts() -> None:
    with pytest.raises(InvalidParams):
        await run_agent(Reader, {"nope": 1}, model=ScriptedModel([]), servers=servers())


async def test_plain_string_input_fills_the_single_input_field() -> None:
    model = ScriptedModel([Done(output={"answer": "a"})])
    with anyio.fail_after(10):
        await run_agent(Reader, "how are you?", model=model, servers=servers())
    assert '"question": "how are you?"' in model.seen[0][0].body


async def test_an_action_nested_past_the_limit_is_fed_back_and_the_run_goes_on() -> None:
    """Arguments 300 levels deep broke the run's records (pydantic stops at about 250): a ValueError."""
    deep: object = "x"
    for _ in range(300):
        deep = {"a": deep}
    call = {"action": "call_tool", "tool": "files.read", "arguments": {"path": deep}}
    model = ScriptedModel([call, {"action": "done", "output": {"answer": "a"}}])
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers=servers())
    assert result.termination_reason == "done" and result.tool_calls == []
    assert result.steps[0].rejected[0].code == "malformed_action"
    assert "the arguments of the call_tool action nest deeper than 64 levels" in model.seen[1][0].body
    assert len(result.model_dump_json()) < 10_000


def shelf_server(count: int) -> MCPServer:
    server = MCPServer("shelf")
    for index in range(count):

        def tool(index: int = index) -> int:
            return index

        server.add_tool(tool, name=f"item_{index:03}", description=f"Item {index}.")
    return server


async def test_an_unknown_tool_is_answered_with_the_closest_names_and_a_bounded_list() -> None:
    class Shelver(Agent):
        mode = "shelver"
        tools = ("shelf",)
        system_prompt = "Pick items."
        Input = Question
        Output = Answer

    model = ScriptedModel([{"action": "call_tool", "tool": "Shelf.Item_007"}, {"action": "done", "output": "x"}])
    with anyio.fail_after(10):
        result = await run_agent(Shelver, "q", model=model, servers={"shelf": shelf_server(100)})
    [rejected] = result.steps[0].rejected
    assert rejected.message.startswith("no tool named 'Shelf.Item_007' is available; did you mean 'shelf.item_007'")
    assert rejected.message.endswith("'shelf.item_039'] (and 60 more)")
    assert "'shelf.item_040'" not in rejected.message
