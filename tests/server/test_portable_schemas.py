"""Every schema `tools/list` shows is one that MCP and the model APIs accept, checked by structure alone.

The rules: MCP wants `type: "object"` at an input schema's root; Anthropic, OpenAI, Bedrock and Azure refuse
`anyOf`/`oneOf`/`allOf`/`not` there (Gemini drops them, losing `required`); Gemini refuses `required`
names that `properties` does not declare; Claude Desktop and OpenAI want names matching
`^[a-zA-Z0-9_-]{1,64}$`. Meta-tools also type and describe every property.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.inbound import x_mcp_header_map

from awb.schema_rules import PORTABLE_TOOL_NAME, ROOT_COMBINATORS
from awb.server.mcp import McpFace
from awb.server.schemas import INPUT
from awb.workbench import Workbench
from journey import call
from support import ADD_SCHEMA, add_tool

pytestmark = pytest.mark.anyio


def violations(name: str, schema: dict[str, Any]) -> list[str]:
    found = []
    if not PORTABLE_TOOL_NAME.match(name):
        found.append(f"{name}: name")
    if schema.get("type") != "object":
        found.append(f"{name}: root type {schema.get('type')!r}")
    found += [f"{name}: root {k}" for k in ROOT_COMBINATORS if k in schema]
    return found + nested_violations(name, schema)


def nested_violations(where: str, schema: Any) -> list[str]:
    """Gemini's subset, at every level: `type` one string, string enums, `required` names declared."""
    if not isinstance(schema, dict):
        return []
    found = []
    if "type" in schema and not isinstance(schema["type"], str):
        found.append(f"{where}: type list {schema['type']!r}")
    if any(not isinstance(v, str) for v in schema.get("enum", [])):
        found.append(f"{where}: non-string enum")
    declared = schema.get("properties", {})
    found += [f"{where}: required {r!r} undeclared" for r in schema.get("required", []) if r not in declared]
    for prop, sub in declared.items():
        found += nested_violations(f"{where}.{prop}", sub)
    found += nested_violations(f"{where}[]", schema.get("items"))
    return found


def meta_property_violations(name: str, schema: dict[str, Any]) -> list[str]:
    return [
        f"{name}.{prop}: {missing}"
        for prop, spec in schema.get("properties", {}).items()
        for missing in ("type", "description")
        if not spec.get(missing)
    ]


async def test_every_listed_schema_is_a_plain_typed_described_object(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            await call(client, "awb_craft", add_tool("adder"))
            untyped = {"properties": {"x": {"type": "integer"}}, "required": ["x"]}
            code = "def run(params):\n    return str(params['x'])\n"
            await call(
                client, "awb_craft", {"name": "show", "description": "Show x", "code": code, "input_schema": untyped}
            )
            for name in ("adder", "show"):
                assert (await call(client, "awb_equip", {"name": name}))["equipped"]
            listed = (await client.list_tools()).tools
    names = {tool.name for tool in listed}
    assert {"adder", "show", "awb_call", "awb_craft"} <= names
    problems = [v for tool in listed for v in violations(tool.name, tool.input_schema)]
    problems += [
        v
        for tool in listed
        if tool.name.startswith("awb_")
        for v in meta_property_violations(tool.name, tool.input_schema)
    ]
    problems += [f"{tool.name}: output type" for tool in listed if (tool.output_schema or {}).get("type") != "object"]
    # OpenAI caps a function's description at 1024 characters.
    problems += [f"{tool.name}: description" for tool in listed if not 0 < len(tool.description or "") <= 1024]
    assert problems == []


def test_no_meta_tool_input_schema_uses_a_root_combinator() -> None:
    assert [verb for verb, schema in INPUT.items() if set(ROOT_COMBINATORS) & set(schema)] == []
    assert all(schema["type"] == "object" for schema in INPUT.values())


async def test_tool_id_or_name_is_one_rule_the_server_checks(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            crafted = await call(client, "awb_craft", add_tool("adder"))
            neither = await call(client, "awb_call", {"params": {"a": 1, "b": 2}})
            assert neither["error"]["code"] == "invalid_params"
            assert "give tool_id or name" in neither["error"]["message"]
            both = {"tool_id": crafted["tool_id"], "name": "adder", "params": {"a": 1, "b": 2}}
            assert (await call(client, "awb_call", both))["result"] == 3
            mismatch = await call(client, "awb_inspect", {"tool_id": crafted["tool_id"], "name": "other"})
            assert mismatch["error"]["code"] == "invalid_params"
            for verb in ("delete", "inspect", "equip", "unequip", "update", "rollback"):
                extra = {"to_version": 1} if verb == "rollback" else {}
                result = await call(client, f"awb_{verb}", extra)
                assert result["error"]["code"] == "invalid_params", verb


@pytest.mark.parametrize("name", ["awb.craft", "has space", "dotted.name", "x" * 65, "", "ünïcode"])
async def test_crafted_names_must_follow_the_portable_name_rule(workbench: Workbench, name: str) -> None:
    assert not PORTABLE_TOOL_NAME.match(name)
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            refused = await call(client, "awb_craft", add_tool(name))
            assert refused["error"]["code"] == "invalid_params"
            assert (await call(client, "awb_craft", add_tool("x" * 64)))["status"] == "created"


async def test_a_root_combinator_is_crafted_with_a_warning_refused_by_equip_and_still_callable(
    workbench: Workbench,
) -> None:
    either = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    code = "def run(params):\n    return params.get('a', 0) + params.get('b', 0)\n"
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            crafted = await call(
                client,
                "awb_craft",
                {"name": "either", "description": "Add a or b", "code": code, "input_schema": either},
            )
            assert crafted["status"] == "created"
            assert any("anyOf" in w and "awb_call" in w for w in crafted["warnings"])
            refused = await call(client, "awb_equip", {"name": "either"})
            assert refused["error"]["code"] == "not_equippable"
            assert "anyOf" in refused["error"]["message"] and "awb_call" in refused["error"]["message"]
            assert (await call(client, "awb_call", {"name": "either", "params": {"b": 4}}))["result"] == 4
            plain = await call(client, "awb_craft", add_tool("plain", input_schema=ADD_SCHEMA))
            assert plain["warnings"] == []


async def test_an_equipped_tool_cannot_be_updated_to_a_root_combinator(workbench: Workbench) -> None:
    either = {**ADD_SCHEMA, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            await call(client, "awb_craft", add_tool("adder"))
            await call(client, "awb_equip", {"name": "adder"})
            refused = await call(client, "awb_update", {"name": "adder", "input_schema": either})
            assert refused["error"]["code"] == "not_equippable" and "anyOf" in refused["error"]["message"]
            assert "adder" in {tool.name for tool in (await client.list_tools()).tools}
            await call(client, "awb_unequip", {"name": "adder"})
            assert (await call(client, "awb_update", {"name": "adder", "input_schema": either}))["version"] == 2


async def test_the_sdk_checks_mcp_param_headers_against_a_schema_only_where_one_declares_them(
    workbench: Workbench,
) -> None:
    face = McpFace(workbench)
    # No meta-tool's schema declares a header a client mirrors: lent none, the SDK skips a check that finds
    # nothing to check (two walks of the schema on every call).
    for verb, schema in INPUT.items():
        assert x_mcp_header_map(schema) == {}, verb
        assert face._tool_input_schema(face.meta_name(verb)) is None, verb
    # An equipped tool's schema is its author's, declared headers and all: the SDK is lent it.
    region = {**ADD_SCHEMA, "properties": {**ADD_SCHEMA["properties"], "region": {"type": "string"}}}
    region["properties"]["region"]["x-mcp-header"] = "Region"
    tool = await workbench.craft(add_tool("regional", input_schema=region))
    await workbench.lane.call(workbench.equip, tool.tool_id)
    lent = face._tool_input_schema("regional")
    assert lent is not None and x_mcp_header_map(lent) == {("region",): "Region"}
