"""What checking a tool's schema may cost the server: RE2 holds the GIL while it compiles, so every
compile and every schema's patterns in all are bounded; the check against JSON Schema's own schema
costs per subschema, so their number is bounded and the check runs off the event loop."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
import re2
from mcp import Client

from awb import crafting, schema_bounds, validation
from awb.errors import InvalidParams
from awb.schema_bounds import MAX_SCHEMA_INSTRUCTIONS
from awb.server.mcp import McpFace
from awb.validation import MAX_SCHEMA_NODES
from awb.workbench import Workbench
from journey import call
from support import add_tool

pytestmark = pytest.mark.anyio


def counting_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The patterns RE2 is asked to compile from here on."""
    seen: list[str] = []
    compile_ = re2.compile

    def counted(pattern: str, *args: Any) -> Any:
        seen.append(pattern)
        return compile_(pattern, *args)

    monkeypatch.setattr(schema_bounds.re2, "compile", counted)
    return seen


def patterned(patterns: list[str]) -> dict[str, Any]:
    properties = {f"p{i}": {"type": "string", "pattern": p} for i, p in enumerate(patterns)}
    return {"type": "object", "properties": properties}


async def test_a_pattern_whose_program_is_too_large_is_refused_after_one_bounded_compile(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dozen characters, ~360,000 instructions: ~0.5 s of the GIL each at RE2's default memory, and a
    # schema of 1.2 KB held twenty of them (the server answered no one for 6 s).
    seen = counting_compiles(monkeypatch)
    schema = patterned(["\\pL{300}" + "x" * i for i in range(20)])
    with pytest.raises(InvalidParams, match="too large a program") as refused:
        await workbench.craft(add_tool("letters", input_schema=schema))
    assert refused.value.details["field"] == "input_schema"
    assert len(seen) == 1
    assert workbench.store.count_active() == 0


async def test_the_patterns_of_a_schema_are_bounded_in_all(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each fits in RE2's memory (~36,000 instructions); together they pass the schema's budget.
    seen = counting_compiles(monkeypatch)
    schema = patterned(["\\pL{30}" + "x" * i for i in range(30)])
    with pytest.raises(InvalidParams, match=f"more than {MAX_SCHEMA_INSTRUCTIONS} RE2 instructions") as refused:
        await workbench.craft(add_tool("letters", input_schema=schema))
    assert refused.value.details == {"field": "input_schema", "limit": MAX_SCHEMA_INSTRUCTIONS}
    assert len(seen) <= 2
    output = {"type": "object", "patternProperties": {"\\pL{30}" + "y" * i: {} for i in range(30)}}
    with pytest.raises(InvalidParams, match="RE2 instructions") as refused:
        await workbench.craft(add_tool("letters", output_schema=output))
    assert refused.value.details["field"] == "output_schema"


async def test_typical_patterns_and_one_repeated_many_times_are_within_the_budget(workbench: Workbench) -> None:
    common = ["^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$", "^\\d{4}-\\d{2}-\\d{2}$", "^[^\\x00-\\x1f]{0,1000}$"]
    schema = patterned(common + ["^[a-z]{1,1000}$"] * 200)  # one program, however often it appears
    tool = await workbench.craft(add_tool("typical", input_schema=schema, examples=[]))
    assert tool.input_schema["properties"]["p0"]["pattern"] == common[0]


async def test_a_craft_with_costly_patterns_leaves_other_clients_answered(workbench: Workbench) -> None:
    hostile = patterned(["\\pL{300}" + "x" * i for i in range(20)] + ["\\pL{30}" + "y" * i for i in range(30)])
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                replies: dict[str, Any] = {}

                async def craft() -> None:
                    replies["craft"] = await call(client, "awb_craft", add_tool("letters", input_schema=hostile))

                async def other() -> None:
                    replies["list"] = await call(client, "awb_list", {})

                group.start_soon(craft)
                group.start_soon(other)
    assert replies["craft"]["error"]["code"] == "invalid_params"
    assert replies["list"]["count"] == 0


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "anyOf": [{}] * 15_000},  # 60 KB: 10 s of jsonschema's metaschema check
        {
            "type": "object",
            "properties": {f"p{i}": {"properties": {f"q{j}": {} for j in range(20)}} for i in range(60)},
        },
    ],
    ids=["flat", "nested"],
)
async def test_a_schema_of_too_many_subschemas_is_refused_before_it_is_checked(
    workbench: Workbench, schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(5), pytest.raises(InvalidParams, match="subschemas") as refused:
        await workbench.craft(add_tool("many", input_schema=schema))
    assert refused.value.details == {"field": "input_schema", "limit": MAX_SCHEMA_NODES}
    # The cap's own size is admitted. Its metaschema check takes ~0.7 s of CPU, within the 2 s wall-clock
    # budget on an idle core but not always on a loaded one: that budget is not what is held here.
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 60.0)
    described = {f"p{i}": {"type": "string", "description": f"field {i}"} for i in range(MAX_SCHEMA_NODES - 1)}
    tool = await workbench.craft(
        add_tool("wide", input_schema={"type": "object", "properties": described}, examples=[])
    )
    assert len(tool.input_schema["properties"]) == MAX_SCHEMA_NODES - 1


async def test_a_tool_schema_is_checked_off_the_event_loop(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []
    check = crafting.check_tool_schema

    def watched(schema: Any, field: str) -> None:
        threads.append(threading.current_thread())
        check(schema, field)

    monkeypatch.setattr(crafting, "check_tool_schema", watched)
    await workbench.craft(add_tool("checked", examples=[]))
    assert threads and threading.current_thread() not in threads
    with pytest.raises(InvalidParams, match="not a valid JSON Schema"):
        await workbench.craft(
            add_tool("broken", input_schema={"type": "object", "properties": {"a": {"type": "nope"}}})
        )
