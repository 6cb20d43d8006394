from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from awb.agents import mcp_http
from awb.agents.actions import Action
from awb.agents.models import ScriptedModel
from awb.agents.models.base import Prompt
from awb.agents.models.functions import refused
from awb.agents.toolbox import ToolSpec
from awb.errors import InvalidParams
from awb.planner.budget import Budget
from awb.planner.task import execute_mcp_task, execute_mcp_task_sync

pytestmark = pytest.mark.anyio

MESSAGES = [{"id": f"m{i}", "label": ["inbox", "billing"][i % 2], "amount": i, "body": "x" * 40} for i in range(2000)]


def mail_server() -> MCPServer:
    server = MCPServer("mail")

    @server.tool()
    def search_mail(query: str, label: str | None = None) -> dict[str, Any]:
        """Search the mailbox for messages; returns {total, messages}."""
        found = [m for m in MESSAGES if label in (None, m["label"])]
        return {"total": len(found), "messages": found}

    @server.tool()
    def send_mail(to: str, subject: str, api_key: str = "") -> dict[str, Any]:
        """Send a message."""
        return {"status": "sent", "to": to}

    return server


def chat_server() -> MCPServer:
    server = MCPServer("chat")

    @server.tool()
    def post_message(channel: str, text: str) -> dict[str, Any]:
        """Post a message to a chat channel."""
        return {"ok": True, "channel": channel}

    return server


def servers() -> dict[str, Any]:
    return {"mail": mail_server(), "chat": chat_server()}


def done(summary: str, data: Any = None) -> dict[str, Any]:
    return {"action": "done", "output": {"summary": summary, "data": data}}


def call(server: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {
        "action": "call_tool",
        "tool": "planner.call_tool",
        "arguments": {"server": server, "tool": tool, "arguments": arguments},
    }


async def test_the_task_comes_with_a_menu_of_searched_tools_and_a_direct_call_finishes_it() -> None:
    model = ScriptedModel([call("chat", "post_message", channel="general", text="hi"), done("posted", {"ok": True})])
    with anyio.fail_after(30):
        result = await execute_mcp_task("post hi to the general chat channel", servers=servers(), model=model)
    assert result.success and result.final_summary == "posted" and result.raw_outputs["result"] == {"ok": True}
    first_prompt, tools = model.seen[0]
    menu = json.loads(first_prompt.body.split("## Task\n", 1)[1].split("\n## Working memory", 1)[0])["tools"]
    assert menu[0]["server"] == "chat" and menu[0]["tool"] == "post_message"
    assert {t.name for t in tools} == {"planner.search_tools", "planner.call_tool"}  # never every server tool
    assert '"channel": "general"' in model.seen[1][0].body
    assert [e["event"] for e in result.logs] == ["mcp.search.run", "mcp.action.called"]
    assert result.budget_usage.steps_taken == 2 and result.budget_usage.tool_calls == 1


async def test_a_blank_task_is_invalid_params_before_any_server_is_connected_or_the_model_asked() -> None:
    model = ScriptedModel([done("nothing")])
    unreachable = {"gone": StdioServerParameters(command=sys.executable, args=["-c", "raise SystemExit(1)"])}
    for task in ("", " \n\t "):
        with anyio.fail_after(10), pytest.raises(InvalidParams, match="the task is empty"):
            await execute_mcp_task(task, servers=unreachable, model=model)
    assert model.seen == []


async def test_code_mode_runs_one_plan_that_aggregates_a_large_result() -> None:
    plan = """
found = await mail.search_mail(query="invoice", label="billing")
total = sum(m["amount"] for m in found["messages"])
await chat.post_message(channel="finance", text=f"total {total}")
return {"count": found["total"], "total": total}
"""
    model = ScriptedModel([{"action": "run_code", "code": plan}, done("billing total posted", {"total": 1000000})])
    with anyio.fail_after(30):
        result = await execute_mcp_task("sum billing amounts and post them", servers=servers(), model=model)
    assert result.success
    observation = model.seen[1][0].body
    assert '"total": 1000000' in observation and '"count": 1000' in observation
    assert len(observation) < 3000  # the 2,000 messages never entered the context
    assert result.budget_usage.code_runs == 1 and result.budget_usage.tool_calls == 2
    sandbox = [e for e in result.logs if e["event"] == "mcp.sandbox.run"]
    assert sandbox[0]["payload"]["success"] is True and sandbox[0]["payload"]["tool_calls"] == 2


async def test_a_plan_calls_events_keep_a_cut_of_long_arguments() -> None:
    """A plan's call with 20 MB of text held the event loop 3 s while its event's copy was redacted,
    twice, and the task's events kept all of it."""
    plan = "await chat.post_message(channel='c', text='word ' * 200_000)\nreturn 1"
    model = ScriptedModel([{"action": "run_code", "code": plan}, done("posted")])
    with anyio.fail_after(30):
        result = await execute_mcp_task("post a long message", servers=servers(), model=model)
    assert result.success
    [called] = [e for e in result.logs if e["event"] == "mcp.action.called"]
    text = called["payload"]["request"]["text"]
    assert text.startswith("word word") and len(text) < 2100, len(text)
    assert text.endswith(f"… [{5 * 200_000 - 2000} more characters]")


async def test_a_large_direct_result_enters_the_context_as_a_summary_and_is_stored(tmp_path: Path) -> None:
    model = ScriptedModel([call("mail", "search_mail", query="all"), done("counted", 2000)])
    with anyio.fail_after(30):
        result = await execute_mcp_task("count my mail", servers=servers(), model=model, workspace=tmp_path)
    observation = model.seen[1][0].body
    assert '"aggregates"' in observation and '"count": 2000' in observation
    assert len(observation) < 8000
    [ref] = result.raw_outputs["storage_refs"]
    assert Path(ref).is_relative_to(tmp_path / "tool-results" / result.task_id)
    assert len(json.loads(Path(ref).read_text())["messages"]) == 2000
    assert "mcp.summary.created" in [e["event"] for e in result.logs]


async def test_without_summaries_the_raw_result_enters_the_context() -> None:
    model = ScriptedModel([call("mail", "search_mail", query="all"), done("counted")])
    with anyio.fail_after(30):
        await execute_mcp_task(
            "count my mail", servers=servers(), model=model, summarize=False, context_chars=1_000_000
        )
    assert model.seen[1][0].body.count('"id": "m') == 2000


async def test_a_refined_search_is_an_action_and_an_unknown_tool_is_an_observation() -> None:
    model = ScriptedModel(
        [
            {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "send email"}},
            call("mail", "no_such_tool"),
            done("searched"),
        ]
    )
    with anyio.fail_after(30):
        result = await execute_mcp_task("something", servers=servers(), model=model)
    assert '"tool": "send_mail"' in model.seen[1][0].body
    assert "no tool 'no_such_tool' on server 'mail'" in model.seen[2][0].body
    assert [e["event"] for e in result.logs].count("mcp.search.run") == 2


async def test_direct_mode_refuses_plans() -> None:
    model = ScriptedModel([{"action": "run_code", "code": "return 1"}, done("no code")])
    with anyio.fail_after(30):
        result = await execute_mcp_task("x", servers=servers(), model=model, mode="direct")
    assert "run_code is not available" in model.seen[1][0].body
    assert "Code mode is off" in model.seen[0][0].system
    assert result.budget_usage.code_runs == 0


@pytest.mark.parametrize(
    ("budget", "script", "limit"),
    [
        (Budget(max_steps=2), [call("chat", "post_message", channel="c", text="t")] * 3, "max_steps"),
        (Budget(max_tool_calls=2), [call("chat", "post_message", channel="c", text="t")] * 4, "max_tool_calls"),
        (Budget(max_code_runs=1), [{"action": "run_code", "code": "return 1"}] * 3, "max_code_runs"),
        (
            Budget(max_tool_calls=3),
            [{"action": "run_code", "code": "for i in range(10):\n    await chat.post_message(channel='c', text='t')"}],
            "max_tool_calls",
        ),
    ],
)
async def test_each_budget_limit_stops_the_task_with_an_error_naming_it(
    budget: Budget, script: list[dict[str, Any]], limit: str
) -> None:
    model = ScriptedModel([*script, done("never")])
    with anyio.fail_after(30):
        result = await execute_mcp_task("post", servers=servers(), model=model, budget=budget)
    assert not result.success
    assert result.error is not None and result.error.startswith(f"budget exceeded: {limit}")
    assert result.final_summary.startswith("(partial)")
    exceeded = [e for e in result.logs if e["event"] == "mcp.budget.exceeded"]
    assert exceeded and exceeded[0]["payload"]["limit"] == limit
    assert result.budget_usage.tool_calls <= budget.max_tool_calls


async def test_a_task_stopped_by_the_tool_call_limit_reports_the_calls_it_made_in_order() -> None:
    """A plan stopped by max_tool_calls reported "nothing was done before the limit", though the calls
    before it had run (and posted messages)."""
    plan = "for i in range(10):\n    await chat.post_message(channel='c', text='t')"
    script = [call("mail", "send_mail", to="a@b.c", subject="s"), {"action": "run_code", "code": plan}, done("never")]
    with anyio.fail_after(30):
        result = await execute_mcp_task(
            "post", servers=servers(), model=ScriptedModel(script), budget=Budget(max_tool_calls=4)
        )
    assert result.error is not None and result.error.startswith("budget exceeded: max_tool_calls")
    first, *rest = result.final_summary.splitlines()
    assert first == (
        "(partial) 4 tool calls ran before the task stopped (their effects stand), in order: "
        "mail.send_mail ok (direct); chat.post_message ×3 ok (in a plan)."
    )
    assert any('"calls": ["chat.post_message ×3 ok"]' in line for line in rest)  # the plan's own report
    assert result.raw_outputs["tool_calls"] == [
        {"server": "mail", "tool": "send_mail", "via": "direct", "outcome": "ok"},
        *[{"server": "chat", "tool": "post_message", "via": "plan", "outcome": "ok"}] * 3,
    ]


async def test_a_task_stopped_before_any_call_says_no_call_ran() -> None:
    search = {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "post"}}
    with anyio.fail_after(30):
        result = await execute_mcp_task(
            "post", servers=servers(), model=ScriptedModel([search, done("x")]), budget=Budget(max_steps=1)
        )
    assert result.error is not None and result.error.startswith("budget exceeded: max_steps")
    assert result.final_summary.startswith("(partial) no tool call ran before the task stopped.\n- tool_result")
    assert result.raw_outputs["tool_calls"] == []


async def test_searching_for_tools_is_not_a_tool_call_of_the_budget() -> None:
    """Three searches under max_tool_calls=2 ended the task before any tool had run."""
    search = {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "post a message"}}
    script = [search, search, search, call("chat", "post_message", channel="c", text="t"), done("posted")]
    with anyio.fail_after(30):
        result = await execute_mcp_task(
            "post", servers=servers(), model=ScriptedModel(script), budget=Budget(max_tool_calls=2)
        )
    assert result.success, result.error
    assert result.budget_usage.tool_calls == 1


class PricedModel(ScriptedModel):
    """A scripted model that reports tokens and names a model the offline price table knows."""

    provider = "openai"
    model = "gpt-4o-mini"

    def __init__(self, script: list[dict[str, Any]], tokens: int) -> None:
        super().__init__(script)
        self.tokens = tokens

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        self.usage.input_tokens += self.tokens
        return await super().call(prompt, tools)


async def test_the_llm_cost_limit_stops_the_task_once_the_priced_usage_passes_it() -> None:
    # gpt-4o-mini input costs $0.15 per million tokens: 1M tokens a reply passes $0.20 on the second.
    model = PricedModel([call("chat", "post_message", channel="c", text="t")] * 5 + [done("x")], tokens=1_000_000)
    with anyio.fail_after(30):
        result = await execute_mcp_task("post", servers=servers(), model=model, budget=Budget(max_llm_cost_usd=0.20))
    assert not result.success and result.error is not None and "max_llm_cost_usd" in result.error
    assert result.budget_usage.llm_cost_usd == pytest.approx(0.30)
    assert result.budget_usage.model_requests == 2


async def test_the_budget_usage_says_how_many_replies_had_estimated_tokens() -> None:
    class Unreported(ScriptedModel):
        """Stands for a provider that sends no usage: its adapter marks each reply estimated."""

        async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
            self.usage.estimated_replies += 1
            return await super().call(prompt, tools)

    model = Unreported([call("chat", "post_message", channel="c", text="t"), done("x")])
    with anyio.fail_after(30):
        result = await execute_mcp_task("post", servers=servers(), model=model)
    assert result.success
    assert (result.budget_usage.model_requests, result.budget_usage.estimated_model_replies) == (2, 2)
    assert result.budget_usage.usage_estimated is True


async def test_telemetry_events_carry_ids_and_are_redacted() -> None:
    model = ScriptedModel(
        [call("mail", "send_mail", to="a@b.c", subject="key sk-ABCDEFGHIJKLMNOPQRSTUVWX", api_key="hunter2"), done("s")]
    )
    with anyio.fail_after(30):
        result = await execute_mcp_task("send", servers=servers(), model=model, user_id="u-7")
    action = next(e for e in result.logs if e["event"] == "mcp.action.called")
    assert action["task_id"] == result.task_id and action["user_id"] == "u-7" and action["step_index"] == 1
    text = json.dumps(result.logs)
    assert "hunter2" not in text and "ABCDEFGHIJKL" not in text


def test_the_sync_wrapper_runs_a_task_without_an_event_loop() -> None:
    model = ScriptedModel([done("nothing to do")])
    result = execute_mcp_task_sync("nothing", servers=servers(), model=model)
    assert result.success and result.final_summary == "nothing to do"


async def test_telemetry_events_are_spans_when_an_otel_sdk_is_configured() -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    from awb.agents.telemetry import use_tracer_provider

    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    use_tracer_provider(provider)
    try:
        model = ScriptedModel([call("chat", "post_message", channel="c", text="t"), done("posted")])
        with anyio.fail_after(30):
            result = await execute_mcp_task("post", servers=servers(), model=model, user_id="u-1")
    finally:
        use_tracer_provider(None)
        provider.shutdown()
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("mcp.")]
    assert [s.name for s in spans] == ["mcp.search.run", "mcp.action.called"]
    assert spans[1].attributes["awb.task_id"] == result.task_id and spans[1].attributes["awb.user_id"] == "u-1"


async def test_a_plan_cut_off_by_the_task_timeout_reports_the_calls_it_made() -> None:
    """The report said no tool call ran, and `tool_calls` was 0, though the plan had posted to chat."""
    plan = "await chat.post_message(channel='general', text='hi')\nwhile True:\n    pass"
    model = ScriptedModel([{"action": "run_code", "code": plan}, done("never")])
    with anyio.fail_after(30):
        result = await execute_mcp_task(
            "post hi to general", servers=servers(), model=model, budget=Budget(timeout_seconds=1.5)
        )
    assert not result.success and result.error is not None and "timeout_seconds" in result.error
    assert result.budget_usage.tool_calls == 1
    posted = {"server": "chat", "tool": "post_message", "via": "plan", "outcome": "ok"}
    assert result.raw_outputs["tool_calls"] == [posted]
    assert "chat.post_message ok (in a plan)" in result.final_summary


async def test_a_stdio_servers_reply_over_the_cap_is_an_observation_and_the_task_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner connects through `awb.agents.mcp_client`: a stdio server's line is capped as an agent run's is."""
    limit = 256 * 1024
    monkeypatch.setattr(mcp_http, "MAX_REPLY_BYTES", limit)
    hostile = Path(__file__).parents[1] / "agents" / "hostile_stdio_server.py"
    server = StdioServerParameters(command=sys.executable, args=[str(hostile), str(8 * limit)])
    model = ScriptedModel([call("far", "flood"), call("far", "echo", text="still here"), done("echoed")])
    with anyio.fail_after(30):
        result = await execute_mcp_task("flood, then echo", servers={"far": server}, model=model, search_mode="text")
    assert result.success and result.final_summary == "echoed"
    assert f"over the {limit}-byte limit" in model.seen[1][0].body
    assert "still here" in model.seen[2][0].body


async def test_a_second_task_over_the_same_servers_embeds_no_tool_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every task embedded every tool of its servers again (~33 s for 500 tools on the local model here)."""
    pytest.importorskip("numpy")

    from .test_discovery import counting_embedders

    embedders = counting_embedders(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for _ in range(2):
        with anyio.fail_after(30):
            result = await execute_mcp_task("post hi", servers=servers(), model=ScriptedModel([done("ok")]))
        assert result.success
    assert len(embedders[0].texts) == 3 * 3 + 1  # three tools, three texts each; the task's query
    assert embedders[1].texts == ["post hi"]
    assert (tmp_path / "awb" / "tool-vectors.sqlite3").is_file()
    with anyio.fail_after(30):
        await execute_mcp_task("post hi", servers=servers(), model=ScriptedModel([done("ok")]), vector_cache="off")
    assert len(embedders[2].texts) == 3 * 3 + 1


async def test_queries_are_embedded_off_the_event_loop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The task's first search and every search_tools step embedded their query on the event loop
    (~10-15 ms each with the local model; the model's first load, ~1 s, when every vector was cached)."""
    pytest.importorskip("numpy")
    import threading

    import awb.planner.discovery as discovery

    from .test_discovery import CountingEmbedder

    embedded_on: list[str] = []

    class Recording(CountingEmbedder):
        def embed(self, texts: Any) -> Any:
            embedded_on.extend(threading.current_thread().name for _ in texts)
            return super().embed(texts)

    embedder = Recording()
    monkeypatch.setattr(discovery, "create_embedder", lambda provider: (embedder, "fake"))
    search = {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "send a message"}}
    with anyio.fail_after(30):
        result = await execute_mcp_task(
            "post hi", servers=servers(), model=ScriptedModel([search, done("ok")]), vector_cache="off"
        )
    assert result.success and {"post hi", "send a message"} <= set(embedder.texts)
    assert embedded_on and threading.current_thread().name not in embedded_on


async def test_a_refusal_is_the_tasks_ending_with_the_models_words_not_a_failure() -> None:
    def decline(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        raise refused("I won't post to that channel.")

    with anyio.fail_after(30):
        result = await execute_mcp_task(
            "post hi to the general chat channel", servers=servers(), model=ScriptedModel(decline)
        )
    assert (result.success, result.termination_reason) == (False, "refused")
    assert result.refusal == "I won't post to that channel."
    assert result.error == "the model refused: I won't post to that channel."
    assert not [e for e in result.logs if e["event"] == "mcp.budget.exceeded"]


async def test_a_task_that_ends_says_why_as_a_run_does() -> None:
    answered = await execute_mcp_task("anything", servers=servers(), model=ScriptedModel([done("ok")]))
    stopped = await execute_mcp_task(
        "anything",
        servers=servers(),
        model=ScriptedModel([call("chat", "post_message", channel="a", text="b")] * 3),
        budget=Budget(max_steps=2),
    )
    assert (answered.termination_reason, answered.refusal) == ("done", None)
    assert (stopped.termination_reason, stopped.refusal) == ("max_iterations", None)
