"""Every tool schema the server lists, run through the frameworks' own converters and the model APIs' rules.

Claude (Messages API) and OpenAI (function tools) refuse `anyOf`/`oneOf`/`allOf` at the root of a tool's
input schema, and a root that is not `type: object`; Gemini drops a root combinator, so whatever it
required is lost. Names must match `^[a-zA-Z0-9_-]{1,64}$` (Claude Desktop, OpenAI). PydanticAI's Google
transformers are what PydanticAI sends Gemini; `MCPUtil.to_function_tool` is how the OpenAI Agents SDK
offers an MCP tool to the model, in strict mode where the schema allows it.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.config import Config
from awb.server.mcp import McpFace
from awb.workbench import Workbench

pytest.importorskip("pydantic_ai", reason="the clients extra is not installed: pip install -e '.[clients]'")
from pydantic_ai.profiles.google import GoogleJsonSchemaTransformer, GoogleOpenAPISchemaTransformer

ROOT_COMBINATORS = ("anyOf", "oneOf", "allOf", "not")
NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# Free-form objects (`params`, `input_schema`, `output_schema`, examples) stay: OpenAI's strict mode cannot express them.
FREE_FORM = {"awb_craft", "awb_call", "awb_update"}

# A crafted tool with a nested object, equipped so it is listed as a tool of its own.
DISTANCE = {
    "name": "distance",
    "description": "Distance of a point from the origin",
    "code": "def run(params):\n    p = params['point']\n    return {'distance': (p['x'] ** 2 + p['y'] ** 2) ** 0.5}\n",
    "input_schema": {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
                "additionalProperties": False,
            },
        },
        "required": ["point"],
        "additionalProperties": False,
    },
    "output_schema": {"type": "object", "properties": {"distance": {"type": "number"}}, "required": ["distance"]},
    "examples": [{"params": {"point": {"x": 3, "y": 4}}, "expected": {"distance": 5.0}}],
}

META = ["awb_craft", "awb_call", "awb_list", "awb_search", "awb_delete", "awb_inspect", "awb_update",
        "awb_rollback", "awb_equip", "awb_unequip"]  # fmt: skip
TOOLS = [*META, "distance"]
# One listing (a server) for the module: under pytest-xdist, the module runs on one worker.
pytestmark = pytest.mark.xdist_group("client_schemas_listing")


@pytest.fixture(scope="module")
def listing(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """tools/list of a real server (in memory, official SDK client) with `distance` crafted and equipped."""
    directory = tmp_path_factory.mktemp("listing")

    async def listed() -> dict[str, dict[str, Any]]:
        config = Config(inventory_path=directory / "inventory.db", pid_file=directory / "awb.pid")
        with anyio.fail_after(60):
            async with Workbench(config) as workbench, Client(McpFace(workbench).server, cache=None) as client:
                for tool, arguments in (("awb_craft", DISTANCE), ("awb_equip", {"name": "distance"})):
                    result = await client.call_tool(tool, arguments)
                    assert not result.is_error, result
                tools = (await client.list_tools()).tools
        return {tool.name: tool.model_dump(by_alias=True, exclude_none=True) for tool in tools}

    tools = anyio.run(listed)
    assert sorted(tools) == sorted(TOOLS)
    return tools


# The OpenAI Agents SDK's package is `agents`, which this suite's tests/agents package shadows inside pytest:
# its converter runs in a subprocess (isolated mode, so the installed package is imported).
OPENAI_CONVERT = """
import json, sys
import mcp_types
from agents.mcp import MCPServerStdio
from agents.mcp.util import MCPUtil
server = MCPServerStdio({"command": "awb"})
out = {}
for raw in json.load(sys.stdin):
    tool = MCPUtil.to_function_tool(mcp_types.Tool.model_validate(raw), server, convert_schemas_to_strict=True)
    out[tool.name] = {"strict": tool.strict_json_schema, "parameters": tool.params_json_schema}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def openai_tools(listing: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    try:
        metadata.distribution("openai-agents")
    except metadata.PackageNotFoundError:
        pytest.skip("openai-agents is not installed: the clients extra is missing")
    done = subprocess.run(
        [sys.executable, "-I", "-c", OPENAI_CONVERT],
        input=json.dumps(list(listing.values())),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(sys.executable).parent,
    )
    assert done.returncode == 0, done.stderr
    converted: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return converted


def required_sets(schema: Any) -> Counter[frozenset[str]]:
    """Every `required` list anywhere in a schema, as a multiset of name sets."""
    found: Counter[frozenset[str]] = Counter()
    if isinstance(schema, dict):
        if isinstance(schema.get("required"), list):
            found[frozenset(schema["required"])] += 1
        for value in schema.values():
            found += required_sets(value)
    elif isinstance(schema, list):
        for item in schema:
            found += required_sets(item)
    return found


def assert_plain_object_root(schema: dict[str, Any]) -> None:
    assert schema.get("type") == "object", schema
    assert not [key for key in ROOT_COMBINATORS if key in schema], schema


@pytest.mark.parametrize("name", TOOLS)
def test_every_listed_tool_name_passes_the_claude_and_openai_name_rule(
    listing: dict[str, dict[str, Any]], name: str
) -> None:
    assert NAME_RULE.match(listing[name]["name"])


@pytest.mark.parametrize("name", TOOLS)
def test_input_schema_is_a_plain_object_at_the_root_as_claude_and_openai_require(
    listing: dict[str, dict[str, Any]], name: str
) -> None:
    assert_plain_object_root(listing[name]["inputSchema"])


@pytest.mark.parametrize("name", TOOLS)
@pytest.mark.parametrize("transformer", [GoogleJsonSchemaTransformer, GoogleOpenAPISchemaTransformer])
def test_pydantic_ai_google_transformers_keep_every_required(
    listing: dict[str, dict[str, Any]], name: str, transformer: type[GoogleJsonSchemaTransformer]
) -> None:
    schema = listing[name]["inputSchema"]
    transformed = transformer(copy.deepcopy(schema)).walk()
    assert required_sets(transformed) == required_sets(schema)


@pytest.mark.parametrize("name", TOOLS)
@pytest.mark.parametrize("transformer", [GoogleJsonSchemaTransformer, GoogleOpenAPISchemaTransformer])
def test_pydantic_ai_google_transformers_leave_no_root_combinator_for_gemini_to_drop(
    listing: dict[str, dict[str, Any]], name: str, transformer: type[GoogleJsonSchemaTransformer]
) -> None:
    assert_plain_object_root(transformer(copy.deepcopy(listing[name]["inputSchema"])).walk())


@pytest.mark.parametrize("name", TOOLS)
def test_openai_agents_sdk_offers_the_tool_as_a_plain_object_strict_unless_it_has_free_form_objects(
    openai_tools: dict[str, dict[str, Any]], name: str
) -> None:
    offered = openai_tools[name]
    assert_plain_object_root(offered["parameters"])
    assert offered["strict"] is (name not in FREE_FORM)
