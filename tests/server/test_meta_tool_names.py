"""Everything the server says names meta-tools as it serves them: with `tool_names: "dotted"` no
instruction, description, hint or error points an agent at `awb_call`, and by default none at `awb.call`.

Through the official SDK client, in memory and over stdio (where the style comes from `AWB_TOOL_NAMES`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from awb.clock import ManualClock
from awb.config import Config, SearchConfig
from awb.meta_tools import META_VERBS, MetaVerb, ToolNames, meta_tool_name
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from support import add_tool, awb_env

pytestmark = pytest.mark.anyio

STYLES: tuple[ToolNames, ...] = ("dotted", "underscore")
OTHER: dict[ToolNames, ToolNames] = {"dotted": "underscore", "underscore": "dotted"}

#: A root combinator: callable, but not servable as a tool of its own.
COMBINATOR_SCHEMA = {"type": "object", "anyOf": [{"required": ["x"]}, {"required": ["a"]}]}
HAS_X = {
    "name": "has_key_x",
    "description": "Say whether the key x was given",
    "code": "def run(params):\n    return 'x' in params\n",
    "input_schema": COMBINATOR_SCHEMA,
    "examples": [{"params": {"x": 1}, "expected": True}],
}


def misnamed(style: ToolNames) -> re.Pattern[str]:
    """Any meta-tool's name in the style this server does not serve."""
    other = meta_tool_name("call", OTHER[style]).removesuffix("call")
    return re.compile(re.escape(other) + "(" + "|".join(META_VERBS) + r")(?![A-Za-z0-9_])")


class Tour:
    """Calls a server through a client, keeping every answer (results, hints, errors, their structured
    payloads and text copies) to check what it names."""

    def __init__(self, client: Client, style: ToolNames) -> None:
        self.client = client
        self.style = style
        self.served: list[str] = []

    def name(self, verb: MetaVerb) -> str:
        return meta_tool_name(verb, self.style)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        self.served.append(result.model_dump_json())
        assert result.structured_content is not None
        return {"is_error": True, **result.structured_content} if result.is_error else result.structured_content

    async def meta(self, verb: MetaVerb, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.name(verb), arguments)

    async def error(self, verb: MetaVerb, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        answer = await self.meta(verb, arguments)
        assert answer.get("is_error"), answer
        assert answer["error"]["code"] == code, answer
        return dict(answer["error"])


async def tour(client: Client, style: ToolNames, archive: Callable[[], Awaitable[None]] | None = None) -> list[str]:
    """Every path whose words name a meta-tool; returns all that was served on the way."""
    t = Tour(client, style)
    call = t.name("call")
    assert client.instructions is not None
    t.served.append(client.instructions)
    assert all(t.name(verb) in client.instructions for verb in ("search", "craft", "call", "equip", "update"))
    listed = await client.list_tools()
    t.served.append(listed.model_dump_json())
    descriptions = {tool.name: tool.description or "" for tool in listed.tools}
    assert t.name("inspect") in descriptions[t.name("rollback")]
    assert call in descriptions[t.name("unequip")]

    # Equip and unequip on a session that hears no list_changed: the hint names `call`.
    adder = await t.meta("craft", add_tool("add_numbers"))
    assert "is_error" not in adder, adder
    assert call in (await t.meta("equip", {"name": "add_numbers"}))["hint"]
    assert call in (await t.meta("unequip", {"name": "add_numbers"}))["hint"]

    # A root combinator: warned at craft, refused at equip, and an equipped tool cannot be updated to one.
    picker = await t.meta("craft", HAS_X)
    assert "is_error" not in picker, picker
    assert call in picker["warnings"][0]
    assert call in (await t.error("equip", {"name": HAS_X["name"]}, "not_equippable"))["message"]
    await t.meta("equip", {"name": "add_numbers"})
    refused = await t.error("update", {"name": "add_numbers", "input_schema": COMBINATOR_SCHEMA}, "not_equippable")
    assert call in refused["message"]

    # dedupe "reject": the duplicate is pointed at `update`.
    duplicate = await t.error("craft", add_tool("sum_numbers"), "duplicate_tool")
    assert t.name("update") in duplicate["message"]

    # A name nothing serves, and arguments a meta-tool refuses.
    unknown = await t.call("no_such_tool", {})
    assert unknown["error"]["code"] == "tool_not_found" and call in unknown["error"]["message"]
    assert t.name("craft") in (await t.error("craft", {}, "invalid_params"))["message"]
    # A meta-tool's name in another case (and, on a dotted server, style) is refused, naming it as served.
    reserved = await t.error("craft", add_tool("AWB_CALL"), "invalid_params")
    assert f"the meta-tool {call}'s" in reserved["message"]

    if archive is not None:
        await archive()
        archived = await t.error("equip", {"name": HAS_X["name"]}, "not_equippable")
        assert "archived" in archived["message"] and call in archived["message"]
    return t.served


async def other_style_names_point_at_the_served_ones(client: Client, style: ToolNames) -> None:
    """A meta-tool called by the other style's name is not served, and the error says which name is."""
    for verb in ("craft", "call"):
        result = await client.call_tool(meta_tool_name(verb, OTHER[style]), {})
        assert result.is_error and result.structured_content is not None
        error = result.structured_content["error"]
        assert error["code"] == "tool_not_found"
        assert error["details"]["served_as"] == meta_tool_name(verb, style)
        assert meta_tool_name(verb, style) in error["message"]


def assert_named_as_served(served: list[str], style: ToolNames) -> None:
    wrong = misnamed(style)
    found = sorted({match.group(0) for text in served for match in wrong.finditer(text)})
    assert found == [], f"{style} server named meta-tools it does not serve: {found}"
    assert meta_tool_name("call", style) in json.dumps(served)


@pytest.mark.parametrize("style", STYLES)
async def test_every_word_served_in_memory_names_meta_tools_as_served(tmp_path: Path, style: ToolNames) -> None:
    config = Config(
        inventory_path=tmp_path / "inv.db", tool_names=style, dedupe="reject", search=SearchConfig(mode="text")
    )
    clock = ManualClock()

    async def archive() -> None:
        clock.advance(days=config.memory.archive_days_short + 1)
        workbench.maintain()

    with anyio.fail_after(60):
        async with Workbench(config, clock=clock) as workbench, Client(McpFace(workbench).server) as client:
            served = await tour(client, style, archive)
            await other_style_names_point_at_the_served_ones(client, style)
    assert_named_as_served(served, style)


@pytest.mark.parametrize("style", STYLES)
async def test_every_word_served_over_stdio_names_meta_tools_as_served(tmp_path: Path, style: ToolNames) -> None:
    env = awb_env(tmp_path, AWB_TOOL_NAMES=style, AWB_DEDUPE="reject", AWB_SEARCH__MODE="text")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "awb", "start", "--transport", "stdio"], env=env, cwd=tmp_path
    )
    with anyio.fail_after(90):
        async with Client(params) as client:
            served = await tour(client, style)
            await other_style_names_point_at_the_served_ones(client, style)
    assert_named_as_served(served, style)
