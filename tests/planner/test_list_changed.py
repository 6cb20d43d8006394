"""Following `tools/list_changed`: a server that says when its tools change is re-read only after it says
so (or after a call of ours), in both protocol generations; a server that cannot say is re-read after a
call of ours, or once its list is `RELIST_AFTER_S` old, or when a call names a tool it is not known to have."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import pytest
from mcp import Client

from agents.agent_fixtures import math_server
from awb.agents import mcp_client
from awb.agents import toolbox as toolbox_module
from awb.agents.models import ScriptedModel
from awb.agents.toolbox import RELIST_AFTER_S, Toolbox
from awb.config import Config
from awb.planner.task import execute_mcp_task
from awb.server.mcp import McpFace
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

SLUG = 'def run(params):\n    return "-".join(params["text"].lower().split())\n'
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


async def craft_and_equip(face: McpFace) -> None:
    """Change the equipped set through a client of its own, not through the toolbox under test."""
    async with Client(face.server) as other:
        crafted = await other.call_tool(
            "awb_craft",
            {
                "name": "slugify_title",
                "description": "Turn a title into a URL slug",
                "code": SLUG,
                "input_schema": SCHEMA,
            },
        )
        assert not crafted.is_error
        assert not (await other.call_tool("awb_equip", {"name": "slugify_title"})).is_error


async def until(condition: Any, what: str) -> None:
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.01)


def watch_of(toolbox: Toolbox, namespace: str) -> Any:
    return toolbox._watches[namespace]


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
async def test_a_change_made_elsewhere_is_read_once_after_the_notice(
    config: Config, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if protocol == "2025-11-25":
        handshake_era(monkeypatch)  # the notice comes as a notification, not on a listen stream
    async with Workbench(config) as workbench:
        face = McpFace(workbench)
        async with face.notifier.running(), mcp_client.connect_servers({"awb": face.server}) as toolbox:
            watch = watch_of(toolbox, "awb")
            assert watch.following and not watch.stale
            assert not await toolbox.refresh()
            assert toolbox.relisted.get("awb", 0) == 0, "an unchanged server that follows is not re-read"
            assert toolbox.resolve("awb.slugify_title", "tool") is None

            await craft_and_equip(face)
            await until(lambda: watch.stale, "the list_changed notice")
            assert await toolbox.refresh()
            assert toolbox.relisted["awb"] == 1
            spec = toolbox.resolve("awb.slugify_title", "tool")
            assert spec is not None
            assert not await toolbox.refresh() and toolbox.relisted["awb"] == 1

            outcome = await toolbox.call(spec, {"text": "Hello There"})
            assert outcome.ok and "hello-there" in str(outcome.payload)
            # A call of ours may change the list with the notice arriving after the answer: read once more.
            assert watch.stale
            await toolbox.refresh()
            assert toolbox.relisted["awb"] == 2


def handshake_era(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connect with the 2025-11-25 handshake, where an SDK server says `listChanged` only when told to
    (at 2026-07-28 every server that serves listen streams says it)."""
    monkeypatch.setattr(mcp_client, "Client", functools.partial(Client, mode="legacy"))


async def test_a_server_that_cannot_tell_is_read_again_after_a_call_or_once_its_list_is_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Such a server was read again at every search step: ~0.55-0.6 s each at 5,000 tools."""
    handshake_era(monkeypatch)
    async with mcp_client.connect_servers({"math": math_server()}) as toolbox:
        now = [toolbox.clock()]
        toolbox.clock = lambda: now[0]
        assert not watch_of(toolbox, "math").following
        await toolbox.refresh()
        assert toolbox.relisted.get("math", 0) == 0, "read a moment ago, when it connected"
        now[0] += RELIST_AFTER_S
        await toolbox.refresh()
        await toolbox.refresh()
        assert toolbox.relisted["math"] == 1
        spec = toolbox.resolve("math.add", "tool")
        assert spec is not None
        assert (await toolbox.call(spec, {"a": 1, "b": 2})).ok
        await toolbox.refresh()
        assert toolbox.relisted["math"] == 2, "a call of ours may have changed its tools"
        await toolbox.refresh(force=True)
        assert toolbox.relisted["math"] == 3


async def test_the_planner_re_reads_only_the_servers_that_may_have_changed(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    handshake_era(monkeypatch)
    # Every search finds the math server's list old enough to read again.
    monkeypatch.setattr(toolbox_module, "RELIST_AFTER_S", 0.0)
    search = {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "add numbers"}}
    model = ScriptedModel([search, search, {"action": "done", "output": {"summary": "found"}}])
    async with Workbench(config) as workbench:
        face = McpFace(workbench)
        with anyio.fail_after(60):
            async with face.notifier.running():
                result = await execute_mcp_task(
                    "find an adder", servers={"awb": face.server, "math": math_server()}, model=model
                )
    assert result.success, result.error
    searches = [e for e in result.logs if e["event"] == "mcp.search.run" and not e["payload"].get("initial")]
    # The workbench follows list_changed and nothing changed: only the math server, which cannot tell,
    # is read again.
    assert [event["payload"]["relisted"] for event in searches] == [1, 1]


async def test_the_planner_reads_a_server_that_cannot_tell_again_only_after_calling_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handshake_era(monkeypatch)
    search = {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "add numbers"}}
    add = {
        "action": "call_tool",
        "tool": "planner.call_tool",
        "arguments": {"server": "math", "tool": "add", "arguments": {"a": 1, "b": 2}},
    }
    model = ScriptedModel([search, search, add, search, {"action": "done", "output": {"summary": "added"}}])
    with anyio.fail_after(60):
        result = await execute_mcp_task("add numbers", servers={"math": math_server()}, model=model)
    assert result.success, result.error
    searches = [e for e in result.logs if e["event"] == "mcp.search.run" and not e["payload"].get("initial")]
    # Well within RELIST_AFTER_S of connecting: read again only after the call.
    assert [event["payload"]["relisted"] for event in searches] == [0, 0, 1]


async def test_a_plan_sees_a_tool_equipped_mid_task_even_after_a_direct_call_read_the_change(
    config: Config,
) -> None:
    """The toolbox is shared: a direct call (or a search) re-reads the server first and takes up the
    change, and the plan's wrappers were then left without the new tool (AttributeError in the plan)."""
    direct = {
        "action": "call_tool",
        "tool": "planner.call_tool",
        "arguments": {"server": "awb", "tool": "slugify_title", "arguments": {"text": "First Try"}},
    }
    plan = {"action": "run_code", "code": "return await awb.slugify_title(text='Hello There')"}
    async with Workbench(config) as workbench:
        face = McpFace(workbench)

        class EquipsFirst(ScriptedModel):
            async def call(self, *args: Any, **kwargs: Any) -> Any:
                if not self.seen:  # before the model's first answer, another client equips the tool
                    await craft_and_equip(face)
                return await super().call(*args, **kwargs)

        model = EquipsFirst([direct, plan, {"action": "done", "output": {"summary": "slugged"}}])
        with anyio.fail_after(60):
            async with face.notifier.running():
                result = await execute_mcp_task("slug a title", servers={"awb": face.server}, model=model)
    assert result.success, result.error
    assert "first-try" in model.seen[1][0].body  # the direct call found the new tool (a forced re-read)
    runs = [e for e in result.logs if e["event"] == "mcp.sandbox.run"]
    assert runs and runs[0]["payload"]["success"] is True, runs
    assert "hello-there" in model.seen[2][0].body
