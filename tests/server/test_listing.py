"""One tool can never break `tools/list`: schemas are normalised on craft and update, and a record that
cannot be served is left out of the listing, logged once, and reported by `awb doctor`."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.clock import ManualClock
from awb.config import Config
from awb.inventory.models import Tool
from awb.server.listing import listing_checks
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from support import ADD_CODE, add_tool, awb_env

pytestmark = pytest.mark.anyio

UNTYPED = {"properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}


def stored_tool(name: str, input_schema: dict[str, Any], clock: ManualClock) -> Tool:
    now = clock.now()
    return Tool(
        tool_id=f"tool_{name}",
        name=name,
        description=f"{name}, written straight into the store",
        language="python",
        runtime="monty",
        code=ADD_CODE,
        input_schema=input_schema,
        created_at=now,
        updated_at=now,
        equipped=True,
    )


async def test_a_schema_without_type_is_stored_as_an_object_and_listed(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            crafted = await call(client, "awb_craft", add_tool("untyped", input_schema=UNTYPED))
            assert crafted["status"] == "created", crafted
            await call(client, "awb_equip", {"name": "untyped"})
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert listed["untyped"].input_schema == {"type": "object", **UNTYPED}
            assert (await client.call_tool("untyped", {"a": 1, "b": 2})).structured_content == {"result": 3}
    assert workbench.inspect("untyped").tool.input_schema["type"] == "object"
    updated = await workbench.update("untyped", input_schema={"properties": {"a": {"type": "number"}}})
    assert updated.input_schema == {"type": "object", "properties": {"a": {"type": "number"}}}


@pytest.mark.parametrize(
    ("schema", "shown"),
    [
        ({"type": "string"}, "'string'"),
        ({"type": "array", "items": {}}, "'array'"),
        ({"type": ["object", "null"]}, "null"),
    ],
)
async def test_an_input_schema_whose_root_is_not_an_object_is_refused_saying_what_mcp_requires(
    workbench: Workbench, schema: dict[str, Any], shown: str
) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            refused = await call(client, "awb_craft", add_tool("odd", input_schema=schema))
            assert refused["error"]["code"] == "invalid_params"
            assert (
                'MCP requires a tool\'s input schema to be a JSON Schema object with type: "object"'
                in (refused["error"]["message"])
            )
            assert shown in refused["error"]["message"]
            await call(client, "awb_craft", add_tool("fine"))
            update = await call(client, "awb_update", {"name": "fine", "input_schema": schema})
            assert update["error"]["code"] == "invalid_params" and "MCP requires" in update["error"]["message"]


async def test_a_boolean_schema_is_refused_with_the_mcp_rule(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            refused = await call(client, "awb_craft", {**add_tool("odd"), "input_schema": True})
            assert refused["error"]["code"] == "invalid_params"
            assert "MCP requires" in refused["error"]["message"]
    with pytest.raises(Exception, match="MCP requires"):
        await workbench.craft({**add_tool("odd"), "input_schema": True})


async def test_bad_records_written_into_the_store_are_left_out_and_the_listing_still_answers(
    workbench: Workbench, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    await workbench.craft(add_tool("good"))
    workbench.equip("good")
    workbench.store.add_tool(stored_tool("stringly", {"type": "string"}, clock))
    workbench.store.add_tool(stored_tool("malformed", {"type": "object", "properties": {"a": 5}}, clock))
    face = McpFace(workbench)
    with caplog.at_level(logging.ERROR, logger="awb.mcp.listing"), anyio.fail_after(30):
        for mode in ("legacy", "auto"):
            async with Client(face.server, mode=mode) as client:  # type: ignore[arg-type]
                for _ in range(2):
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    assert "good" in names and "awb_craft" in names
                    assert not {"stringly", "malformed"} & names
    left_out = [r.getMessage() for r in caplog.records if "left out of tools/list" in r.getMessage()]
    assert len(left_out) == 2, left_out
    assert any("tool_stringly" in m for m in left_out) and any("tool_malformed" in m for m in left_out)
    checks = {c["check"]: c for c in listing_checks(workbench)}
    assert checks["equipped tools"]["ok"] is False
    assert "tool_stringly" in checks["equipped tools"]["detail"]


async def test_an_equipped_record_named_like_a_meta_tool_is_neither_listed_nor_called_by_that_name(
    workbench: Workbench, clock: ManualClock
) -> None:
    """Equipped before crafts refused such names (or imported so): it must not stand beside awb_call."""
    workbench.store.add_tool(stored_tool("AWB_CALL", {"type": "object"}, clock))
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert "AWB_CALL" not in names and names.count("awb_call") == 1
            direct = await call(client, "AWB_CALL", {"a": 1, "b": 2})
            assert direct["error"]["code"] == "tool_not_found"
            through_meta = await call(client, "awb_call", {"name": "AWB_CALL", "params": {"a": 1, "b": 2}})
            assert through_meta["result"] == 3
            listed = await call(client, "awb_list", {})
            assert [t["name"] for t in listed["tools"]] == ["AWB_CALL"]
            checks = {c["check"]: c for c in listing_checks(workbench)}
            assert checks["equipped tools"]["ok"] is False
            assert "named like the meta-tool awb_call" in checks["equipped tools"]["detail"]
            unequipped = await call(client, "awb_unequip", {"name": "AWB_CALL"})
            assert unequipped["equipped"] is False
            assert (await call(client, "awb_delete", {"name": "AWB_CALL"}))["status"] == "deleted"
    assert listing_checks(workbench)[0]["ok"] is True


def test_awb_doctor_reports_an_equipped_record_that_cannot_be_listed(tmp_path: Path) -> None:
    async def seed() -> None:
        clock = ManualClock()
        async with Workbench(Config(inventory_path=tmp_path / "inventory.db"), clock=clock) as workbench:
            workbench.store.add_tool(stored_tool("stringly", {"type": "string"}, clock))

    anyio.run(seed)
    done = subprocess.run(
        [sys.executable, "-m", "awb", "doctor", "--json"],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["equipped tools"]["ok"] is False
    assert "tool_stringly" in checks["equipped tools"]["detail"]
    assert checks["tool names"]["ok"] is True and "level" not in checks["tool names"]


def test_awb_start_warns_about_dotted_tool_names(tmp_path: Path) -> None:
    def start(**env: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "awb", "start", "--transport", "stdio"],
            env=awb_env(tmp_path, **env),
            cwd=tmp_path,
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stderr

    dotted = start(AWB_TOOL_NAMES="dotted")
    assert 'tool_names is "dotted"' in dotted and "Claude Desktop" in dotted
    plain = start()
    assert "tool_names is" not in plain


def test_dotted_tool_names_are_warned_by_doctor_and_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", tool_names="dotted")
    workbench = Workbench(config)
    try:
        with caplog.at_level(logging.WARNING, logger="awb.mcp"):
            McpFace(workbench)
        assert any("Claude Desktop" in r.getMessage() for r in caplog.records)
        names = {c["check"]: c for c in listing_checks(workbench)}["tool names"]
        assert names["level"] == "warning" and "^[a-zA-Z0-9_-]{1,64}$" in names["detail"]
    finally:
        workbench.store.close()
