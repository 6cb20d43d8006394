"""The product spec's MCP contract (PRD §8.2 and §9), driven through the official SDK client.

Every example payload of the spec is sent exactly as written (with Python code, the runtime we ship),
and the documented output fields are checked:

- §9.1 `awb.craft` input `{name, description, code, metadata: {tags, problem, created_by_agent}}` and
  the minimal `{name, code}` (only those two are required); output `{tool_id, status: "created",
  memory_level: "short_term"}`.
- §9.2 `awb.call` input `{tool_id, params}`; output `{result, usage_count, memory_level}`; its error
  conditions: tool not found, tool marked deleted, execution timeout, runtime error (structured).
- §9.3 `awb.list` input `{memory_level, tag, query, limit}` (limit a JSON `number`); output
  `{tools: [{tool_id, name, description, memory_level, usage_count}]}`, plus our `total` and paging.
- §9.4 `awb.search` input `{query, top_k}`; output `{results: [{tool_id, name, description, score,
  memory_level, usage_count}]}`.
- §9.5 `awb.delete` input `{tool_id}`; output `{tool_id, status: "deleted"}`.
- §8.2: craft "Output: tool_id, status, memory level"; call "Output: result, updated usage stats".

In memory on both protocol generations, and the craft -> call path over stdio. The SDK client checks
every structuredContent against the tool's outputSchema, so each result also matches what we advertise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from awb.config import Config
from awb.errors import InvalidParams
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from support import awb_env

pytestmark = pytest.mark.anyio

RESIZE_CODE = (
    "def run(params):\n"
    "    scale = params['width'] / params['original_width']\n"
    "    return {'width': params['width'], 'height': round(params['original_height'] * scale)}\n"
)

#: §9.1, as the spec writes it (its metadata block filled in).
SPEC_CRAFT: dict[str, Any] = {
    "name": "resizeImage",
    "description": "Resize image to width and height",
    "code": RESIZE_CODE,
    "metadata": {"tags": ["image", "resize"], "problem": "thumbnails for a gallery", "created_by_agent": "planner"},
}
RESIZE_PARAMS = {"width": 100, "original_width": 400, "original_height": 300}

#: §9.1 with only the required fields: the description comes from the docstring.
MINIMAL_CRAFT: dict[str, Any] = {
    "name": "shout",
    "code": 'def run(params):\n    """Upper-case a text."""\n    return params["text"].upper()\n',
}

SUMMARY_FIELDS = {"tool_id", "name", "description", "memory_level", "usage_count"}


async def spec_contract(client: Client) -> None:
    # §9.1 craft: the spec's shape, and the two required fields alone.
    crafted = await call(client, "awb_craft", SPEC_CRAFT)
    assert crafted["status"] == "created", crafted
    assert crafted["memory_level"] == "short_term"
    tool_id = crafted["tool_id"]
    assert tool_id.startswith("tool_")
    minimal = await call(client, "awb_craft", MINIMAL_CRAFT)
    assert minimal["status"] == "created", minimal
    assert minimal["description"] == "Upper-case a text."

    inspected = await call(client, "awb_inspect", {"tool_id": tool_id})
    assert inspected["tool"]["metadata"] == SPEC_CRAFT["metadata"]

    # §9.2 call.
    for count in range(1, 6):
        called = await call(client, "awb_call", {"tool_id": tool_id, "params": RESIZE_PARAMS})
        assert called["result"] == {"width": 100, "height": 75}
        assert called["usage_count"] == count
    assert called["memory_level"] == "medium_term"
    shouted = await call(client, "awb_call", {"tool_id": minimal["tool_id"], "params": {"text": "hi"}})
    assert (shouted["result"], shouted["usage_count"], shouted["memory_level"]) == ("HI", 1, "short_term")

    # §9.3 list: every filter of the spec, limit as a JSON number.
    listed = await call(
        client, "awb_list", {"memory_level": "medium_term", "tag": "image", "query": "resize", "limit": 10.0}
    )
    assert [t["tool_id"] for t in listed["tools"]] == [tool_id]
    assert set(listed["tools"][0]) >= SUMMARY_FIELDS
    assert (listed["tools"][0]["name"], listed["tools"][0]["usage_count"]) == ("resizeImage", 5)
    assert listed["total"] == 1
    everything = await call(client, "awb_list", {})
    assert everything["total"] == 2 and everything["next_offset"] is None

    # §9.4 search with top_k.
    found = await call(client, "awb_search", {"query": "resize image width height", "top_k": 1})
    assert len(found["results"]) == 1
    best = found["results"][0]
    assert SUMMARY_FIELDS | {"score"} <= set(best)
    assert best["tool_id"] == tool_id and isinstance(best["score"], float)
    assert (best["memory_level"], best["usage_count"]) == ("medium_term", 5)

    # §9.5 delete, then §9.2's error conditions.
    deleted = await call(client, "awb_delete", {"tool_id": tool_id})
    assert deleted == {"tool_id": tool_id, "name": "resizeImage", "status": "deleted"}
    gone = await call(client, "awb_call", {"tool_id": tool_id, "params": RESIZE_PARAMS})
    assert gone["error"]["code"] == "tool_deleted"
    missing = await call(client, "awb_call", {"tool_id": "tool_123", "params": {}})
    assert missing["error"]["code"] == "tool_not_found"
    crash = await call(client, "awb_call", {"tool_id": minimal["tool_id"], "params": {"text": 7}})
    assert crash["error"]["code"] == "runtime_error"
    assert crash["error"]["message"] and "traceback" in crash["error"]["details"]


async def test_every_spec_payload_is_accepted_on_the_2026_protocol(workbench: Workbench) -> None:
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server) as client:
            await spec_contract(client)


async def test_every_spec_payload_is_accepted_on_the_2025_handshake(workbench: Workbench) -> None:
    with anyio.fail_after(60):
        async with Client(McpFace(workbench).server, mode="legacy") as client:
            await spec_contract(client)


async def test_a_spec_call_that_runs_too_long_is_a_structured_timeout(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", tool_execution_timeout_ms=300)
    spin = {"name": "spin", "description": "Never returns", "code": "def run(params):\n    while True:\n        pass\n"}
    with anyio.fail_after(30):
        async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
            crafted = await call(client, "awb_craft", spin)
            timed_out = await call(client, "awb_call", {"tool_id": crafted["tool_id"], "params": {}})
            assert timed_out["error"]["code"] == "timeout"


async def test_the_spec_craft_and_call_work_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "awb", "start", "--transport", "stdio"], env=awb_env(tmp_path), cwd=tmp_path
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            crafted = await call(client, "awb_craft", SPEC_CRAFT)
            assert (crafted["status"], crafted["memory_level"]) == ("created", "short_term")
            called = await call(client, "awb_call", {"tool_id": crafted["tool_id"], "params": RESIZE_PARAMS})
            assert (called["result"], called["usage_count"], called["memory_level"]) == (
                {"width": 100, "height": 75},
                1,
                "short_term",
            )
            minimal = await call(client, "awb_craft", MINIMAL_CRAFT)
            assert minimal["status"] == "created"
            deleted = await call(client, "awb_delete", {"tool_id": crafted["tool_id"]})
            assert deleted["status"] == "deleted"


async def test_the_spec_shape_and_the_flat_shape_give_the_same_record(workbench: Workbench) -> None:
    flat = {k: v for k, v in SPEC_CRAFT.items() if k != "metadata"} | SPEC_CRAFT["metadata"]
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            spec = await call(client, "awb_craft", SPEC_CRAFT)
            again = await call(client, "awb_craft", {**flat, "name": "resizeImageFlat"})
            first = (await call(client, "awb_inspect", {"tool_id": spec["tool_id"]}))["tool"]
            second = (await call(client, "awb_inspect", {"tool_id": again["tool_id"]}))["tool"]
            assert first["metadata"] == second["metadata"] == SPEC_CRAFT["metadata"]
            both_agree = await call(client, "awb_craft", {**SPEC_CRAFT, "name": "both", "tags": ["image", "resize"]})
            assert both_agree["status"] == "created"
            conflict = await call(client, "awb_craft", {**SPEC_CRAFT, "name": "conflict", "tags": ["other"]})
            assert conflict["error"]["code"] == "invalid_params"
            assert "metadata.tags and tags disagree" in conflict["error"]["message"]


async def test_a_craft_with_a_tag_holding_nul_is_refused_naming_the_tag(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            refused = await call(client, "awb_craft", {**SPEC_CRAFT, "metadata": {"tags": ["image", "re\x00size"]}})
            assert refused["error"]["code"] == "invalid_params"
            assert refused["error"]["message"].startswith("the tag 're\\x00size' holds U+0000 at character 3")
            assert (await call(client, "awb_list", {}))["tools"] == []


async def test_craft_without_description_or_docstring_says_what_is_missing(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            bare = await call(client, "awb_craft", {"name": "bare", "code": "def run(params):\n    return 1\n"})
            assert bare["error"]["code"] == "invalid_params"
            assert "description is required" in bare["error"]["message"]


async def test_list_pages_carry_total_and_next_offset(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            for name in ("one", "two", "three"):
                await call(client, "awb_craft", {**MINIMAL_CRAFT, "name": name})
            first = await call(client, "awb_list", {"limit": 2})
            assert (first["count"], first["total"], first["offset"], first["next_offset"]) == (2, 3, 0, 2)
            rest = await call(client, "awb_list", {"limit": 2, "offset": first["next_offset"]})
            assert (rest["count"], rest["total"], rest["next_offset"]) == (1, 3, None)
            assert {t["name"] for t in first["tools"] + rest["tools"]} == {"one", "two", "three"}


async def test_search_limit_and_top_k_must_agree(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            await call(client, "awb_craft", MINIMAL_CRAFT)
            same = await call(client, "awb_search", {"query": "upper case text", "top_k": 3, "limit": 3})
            assert len(same["results"]) == 1
            clash = await call(client, "awb_search", {"query": "upper case text", "top_k": 3, "limit": 2})
            assert clash["error"]["code"] == "invalid_params"


async def test_rolling_back_to_a_version_that_does_not_exist_is_invalid_params(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            crafted = await call(client, "awb_craft", MINIMAL_CRAFT)
            for verb in ("awb_rollback", "awb_update"):
                missing = await call(client, verb, {"tool_id": crafted["tool_id"], "to_version": 7})
                assert missing["error"]["code"] == "invalid_params", missing
                assert missing["error"]["details"]["versions"] == [1]


async def test_the_bounds_the_schemas_advertise_are_the_ones_the_server_keeps(workbench: Workbench) -> None:
    """Each advertised maximum is accepted and one past it refused: a model that reads the schema
    never sends what the server then refuses, and never holds back from what it would take."""
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(60):
            await call(client, "awb_craft", MINIMAL_CRAFT)
            schemas = {tool.name: tool.input_schema["properties"] for tool in (await client.list_tools()).tools}
            cases = [
                ("awb_list", "limit", {}),
                ("awb_list", "offset", {}),
                ("awb_search", "limit", {"query": "upper"}),
                ("awb_search", "top_k", {"query": "upper"}),
            ]
            domain = {"awb_list": workbench.list_page, "awb_search": workbench.search}
            for tool, field, rest in cases:
                highest = schemas[tool][field]["maximum"]
                assert "is_error" not in await call(client, tool, {**rest, field: highest}), (tool, field)
                over = await call(client, tool, {**rest, field: highest + 1})
                assert over["error"]["code"] == "invalid_params", (tool, field, over)
                # The library (and REST, the CLI) keep the same bound, not a wider or narrower one.
                domain[tool](**rest, **{field: highest})
                with pytest.raises(InvalidParams):
                    domain[tool](**rest, **{field: highest + 1})
            for tool in ("awb_list", "awb_search"):
                longest = schemas[tool]["query"]["maxLength"]
                assert "is_error" not in await call(client, tool, {"query": "upper " * (longest // 6)})
                over = await call(client, tool, {"query": "u" * (longest + 1)})
                assert over["error"]["code"] == "invalid_params", (tool, over)
                with pytest.raises(InvalidParams):
                    domain[tool](query="u" * (longest + 1))
