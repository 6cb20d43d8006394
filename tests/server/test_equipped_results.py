"""An equipped tool called by its own name is as informative as `awb_call`, and equip results say what
is equipped (with a hint when the caller cannot hear that the tool list changed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from awb.calling import CallResult
from awb.config import Config
from awb.sandbox.registry import build_runtimes
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from support import add_tool, awb_env

pytestmark = pytest.mark.anyio

GREET = "def run(params):\n    print('greeting', params['who'])\n    return 'hello ' + params['who']\n"
WHO = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
POINT = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def greeter(name: str, output_schema: dict[str, Any] | None) -> dict[str, Any]:
    request: dict[str, Any] = {
        "name": name,
        "description": f"Greet someone ({name})",
        "code": GREET,
        "input_schema": WHO,
    }
    if output_schema is not None:
        request["output_schema"] = output_schema
    return request


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_direct_calls_return_structured_content_matching_the_listed_output_schema(
    workbench: Workbench, mode: str
) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server, mode=mode) as client:  # type: ignore[arg-type]
            await call(client, "awb_craft", greeter("greet_plain", None))
            await call(client, "awb_craft", greeter("greet_string", {"type": "string"}))
            point_code = "def run(params):\n    return {'x': params['who'].count('o')}\n"
            point = {**greeter("point", POINT), "code": point_code}
            await call(client, "awb_craft", point)
            for name in ("greet_plain", "greet_string", "point"):
                await call(client, "awb_equip", {"name": name})
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            expected = {
                "greet_plain": {"result": "hello bob"},
                "greet_string": {"result": "hello bob"},
                "point": {"x": 1},
            }
            for name, structured in expected.items():
                result = await client.call_tool(name, {"who": "bob"})
                assert not result.is_error, result
                assert result.structured_content == structured
                schema = listed[name].output_schema
                assert schema is not None and schema["type"] == "object"
                assert list(Draft202012Validator(schema).iter_errors(result.structured_content)) == []
                meta = result.meta or {}
                assert meta["call_id"].startswith("call_") and meta["duration_ms"] >= 0
                assert meta["logs"] == ([] if name == "point" else ["greeting bob\n"])
                assert (meta["name"], meta["version"], meta["memory_level"]) == (name, 1, "short_term")
                assert meta["usage_count"] == 1
                recent = (await call(client, "awb_inspect", {"name": name}))["recent_calls"]
                assert [c["call_id"] for c in recent] == [meta["call_id"]]
            assert listed["greet_string"].output_schema == {
                "type": "object",
                "properties": {"result": {"type": "string"}},
                "required": ["result"],
            }
            assert listed["point"].output_schema == POINT


async def test_equip_and_craft_results_carry_the_equipped_tools(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server, mode="legacy") as client:
            first = await call(client, "awb_craft", add_tool("one"))
            assert first["equipped_tools"] == []
            equipped = await call(client, "awb_equip", {"name": "one"})
            assert equipped["equipped_tools"] == ["one"]
            second = await call(client, "awb_craft", {**add_tool("two"), "description": "Another adder entirely"})
            assert second["equipped_tools"] == ["one"]


async def test_a_session_that_hears_list_changes_gets_no_hint(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server, mode="legacy") as client:
            await call(client, "awb_craft", add_tool("one"))
            assert "hint" not in await call(client, "awb_equip", {"name": "one"})
        async with Client(McpFace(workbench).server) as client, client.listen(tools_list_changed=True):
            assert "hint" not in await call(client, "awb_unequip", {"name": "one"})


async def test_a_2026_client_without_a_listen_stream_is_told_to_list_tools_again(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            assert client.protocol_version == "2026-07-28"
            await call(client, "awb_craft", add_tool("one"))
            equipped = await call(client, "awb_equip", {"name": "one"})
            assert "list tools again" in equipped["hint"]
            assert "\n" not in equipped["hint"]
            assert "list tools again" in (await call(client, "awb_unequip", {"name": "one"}))["hint"]


@pytest.mark.parametrize(("mode", "hinted"), [("legacy", False), ("auto", True)])
async def test_over_stdio_only_a_session_that_cannot_hear_changes_gets_the_hint(
    tmp_path: Path, mode: str, hinted: bool
) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "awb", "start", "--transport", "stdio"], env=awb_env(tmp_path), cwd=tmp_path
    )
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
            await call(client, "awb_craft", add_tool("one"))
            equipped = await call(client, "awb_equip", {"name": "one"})
            assert equipped["equipped_tools"] == ["one"]
            assert ("hint" in equipped) is hinted
            direct = await client.call_tool("one", {"a": 2, "b": 3})
            assert direct.structured_content == {"result": 5} and direct.meta is not None
            assert direct.meta["usage_count"] == 1


async def test_an_output_schema_with_local_references_is_served_so_the_sdk_can_resolve_them(
    workbench: Workbench,
) -> None:
    """Wrapped under `properties.result`, the schema's `#/$defs/w` pointed at the wrapper's root, where
    there is no `$defs`: the official SDK refused every call ("PointerToNowhere")."""
    words = {
        "$defs": {"w": {"type": "string"}, "enum": {"$ref": "#/$defs/w"}},
        "type": "array",
        "items": {"$ref": "#/$defs/w"},
        "enum": [["$ref", "#/$defs/w"], ["hello", "bob"]],  # data: left as it is
    }
    code = "def run(params):\n    return ['hello', params['who']]\n"
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            await call(client, "awb_craft", {**greeter("words_ref", words), "code": code})
            await call(client, "awb_equip", {"name": "words_ref"})
            (listed,) = [t for t in (await client.list_tools()).tools if t.name == "words_ref"]
            served = listed.output_schema or {}
            result_schema = served["properties"]["result"]
            assert result_schema["items"] == {"$ref": "#/properties/result/$defs/w"}
            assert result_schema["$defs"]["enum"] == {"$ref": "#/properties/result/$defs/w"}
            assert result_schema["enum"] == words["enum"]
            result = await client.call_tool("words_ref", {"who": "bob"})
            assert not result.is_error, result
            assert result.structured_content == {"result": ["hello", "bob"]}


async def test_awb_call_hands_the_tools_result_on_as_it_came(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result is JSON already (its runtime's output passed encode_output): the face passes that very
    value on, in the record's field order, instead of a mode="json" dump walking every value again on the
    event loop (170 ms for a result of 99,000 empty lists)."""
    nested = [{"a": [1, 2]}, [], "x"]
    result = CallResult(
        call_id="call_0123456789abcdef",
        tool_id="tool_0123456789abcdef",
        name="shaped",
        version=1,
        result=nested,
        logs=["said"],
        duration_ms=1.5,
        memory_level="short_term",
        usage_count=2,
    )

    async def call(ref: str, params: dict[str, Any] | None = None) -> CallResult:
        return result

    monkeypatch.setattr(workbench, "call", call)
    structured = await McpFace(workbench)._call({"name": "shaped", "params": {}})
    assert structured["result"] is nested
    assert structured == result.model_dump(mode="json")
    assert list(structured) == list(CallResult.model_fields)


ROWS = {
    "monty": "def run(params):\n    return [{'id': i, 'name': 'row ' + str(i)} for i in range(params['n'])]\n",
    "cpython": "def run(params):\n    return [{'id': i, 'name': 'row ' + str(i)} for i in range(params['n'])]\n",
    "javascript": "function run(params) { return Array.from({length: params.n}, (_, i) => ({id: i, name: 'row ' + i})); }",
}


@pytest.mark.parametrize("runtime", sorted(ROWS))
async def test_a_results_json_is_encoded_once_and_sent_as_the_text_of_awb_call_and_a_direct_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    """The server encodes the result to check it against the output cap; the text content was a second
    encoding of it (~6 ms of the event loop for a 4 MB result), now it is that first text."""
    import awb.server.mcp as mcp_face

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    config = Config(inventory_path=tmp_path / "inventory.db")
    async with Workbench(config, runtimes=build_runtimes(config)) as workbench:
        face = McpFace(workbench)
        crafted = {"name": "rows", "description": "Rows.", "code": ROWS[runtime], "input_schema": schema}
        await call_face(face, "awb_craft", {**crafted, "runtime": runtime})
        await call_face(face, "awb_equip", {"name": "rows"})
        encoded: list[int] = []
        json_text = mcp_face.json_text

        def counted(value: Any) -> str:
            text = json_text(value)
            encoded.append(len(text))
            return text

        monkeypatch.setattr(mcp_face, "json_text", counted)
        expected = [{"id": i, "name": f"row {i}"} for i in range(2000)]
        wire = json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
        via_call = await face.call("awb_call", {"name": "rows", "params": {"n": 2000}})
        direct = await face.call("rows", {"n": 2000})
    for result in (via_call, direct):
        assert not result.is_error, result
        assert isinstance(result.content[0], types.TextContent)
    assert json.loads(via_call.content[0].text) == via_call.structured_content
    assert via_call.structured_content is not None and via_call.structured_content["result"] == expected
    assert direct.structured_content == {"result": expected}
    assert f'"result":{wire},' in via_call.content[0].text
    assert direct.content[0].text == wire
    # Only the call's record went through the encoder: names, ids, counters.
    assert encoded and max(encoded) < 200


async def call_face(face: McpFace, name: str, arguments: dict[str, Any]) -> None:
    result = await face.call(name, arguments)
    assert not result.is_error, result


def test_a_call_results_json_text_belongs_to_the_value_it_encodes() -> None:
    """A copy of a result with another value has no text: a face would otherwise send the old one."""
    rows = [1, 2]
    result = CallResult(
        call_id="call_0123456789abcdef",
        tool_id="tool_0123456789abcdef",
        name="rows",
        version=1,
        result=rows,
        duration_ms=1.0,
        memory_level="short_term",
        usage_count=1,
    )
    assert result.result_json is None
    result._encoded = (rows, "[1,2]")
    assert result.result_json == "[1,2]"
    assert result.model_copy().result_json == "[1,2]"
    assert result.model_copy(update={"result": [3]}).result_json is None
