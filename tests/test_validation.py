"""Tool schemas hold against their author: no reference leaves the schema, patterns cannot backtrack,
and a validation that runs away is stopped with a structured error while the server keeps answering."""

from __future__ import annotations

import http.server
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from awb import validation
from awb.errors import InvalidParams
from awb.schema_bounds import PatternCache, SchemaTooExpensive
from awb.server.mcp import McpFace
from awb.validation import MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, ToolSchema
from awb.workbench import Workbench
from journey import call
from support import add_tool, loopback_http

pytestmark = pytest.mark.anyio

SECRET = "LOCAL-FILE-SECRET-7f3a"


class Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "string", "description": "fetched"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that serves a schema and records every request it gets."""
    hits: list[str] = []
    handler = type("Handler", (Recorder,), {"hits": hits})
    with loopback_http(handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits


@pytest.fixture
def secret_schema(tmp_path: Path) -> Path:
    path = tmp_path / "secret.json"
    path.write_text(json.dumps({"type": "string", "description": SECRET}))
    return path


def outside_refs(base: str, file: Path) -> list[dict[str, Any]]:
    """Schemas that point outside themselves, every way a reference can be written."""
    return [
        {"type": "object", "properties": {"a": {"$ref": f"{base}/schema.json"}}},
        {"type": "object", "properties": {"a": {"$ref": file.as_uri()}}},
        {"type": "object", "properties": {"a": {"$ref": str(file)}}},
        {"type": "object", "$id": f"{base}/root.json", "properties": {"a": {"$ref": "other.json"}}},
        {"type": "object", "properties": {"a": {"$dynamicRef": f"{base}/schema.json#meta"}}},
        {"type": "object", "$defs": {"x": {"allOf": [{"$ref": f"{base}/deep.json"}]}}},
    ]


async def test_schemas_referring_outside_themselves_are_refused_and_nothing_is_fetched_or_read(
    workbench: Workbench, schema_host: tuple[str, list[str]], secret_schema: Path
) -> None:
    base, hits = schema_host
    for schema in outside_refs(base, secret_schema):
        for field in ("input_schema", "output_schema"):
            with pytest.raises(InvalidParams) as refused:
                await workbench.craft(add_tool("fetcher", **{field: schema}))
            assert refused.value.code == "invalid_params"
            assert refused.value.details["field"] == field
            assert SECRET not in repr(refused.value.to_dict())
    assert hits == []
    assert workbench.store.count_active() == 0


async def test_an_update_to_a_schema_that_refers_outside_is_refused(
    workbench: Workbench, schema_host: tuple[str, list[str]], secret_schema: Path
) -> None:
    base, hits = schema_host
    tool = await workbench.craft(add_tool("kept"))
    for schema in outside_refs(base, secret_schema):
        with pytest.raises(InvalidParams):
            await workbench.update("kept", input_schema=schema)
    assert hits == []
    assert workbench.resolve("kept").version == tool.version


async def test_a_stored_schema_with_an_outside_reference_fetches_nothing_when_validating(
    schema_host: tuple[str, list[str]], secret_schema: Path
) -> None:
    base, hits = schema_host
    # The last one only defines an outside reference; validating never reaches it.
    for schema in outside_refs(base, secret_schema)[:-1]:
        compiled = ToolSchema.compile(schema)
        with pytest.raises(SchemaTooExpensive) as failed:
            compiled.problems({"a": "x"})
        assert SECRET not in str(failed.value)
    assert hits == []


async def test_craft_over_mcp_with_a_remote_reference_is_invalid_params(
    workbench: Workbench, schema_host: tuple[str, list[str]], secret_schema: Path
) -> None:
    base, hits = schema_host
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            for schema in outside_refs(base, secret_schema)[:2]:
                reply = await call(client, "awb_craft", add_tool("remote", input_schema=schema))
                assert reply["error"]["code"] == "invalid_params"
                assert SECRET not in repr(reply)
    assert hits == []


async def test_local_references_still_work(workbench: Workbench) -> None:
    schema = {
        "type": "object",
        "$defs": {"num": {"type": "number"}},
        "properties": {"a": {"$ref": "#/$defs/num"}, "b": {"$ref": "#/$defs/num"}},
        "required": ["a", "b"],
    }
    await workbench.craft(add_tool("local_refs", input_schema=schema))
    assert (await workbench.call("local_refs", {"a": 1, "b": 2})).result == 3
    with pytest.raises(InvalidParams):
        await workbench.call("local_refs", {"a": "one", "b": 2})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a)\\1"}}},
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "(?=a)a"}}},
        {"type": "object", "patternProperties": {"(?<!x)y": {"type": "string"}}},
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "a" * 2000}}},
        {"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False},
    ],
)
async def test_patterns_a_linear_time_engine_cannot_run_are_refused(
    workbench: Workbench, schema: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParams) as refused:
        await workbench.craft(add_tool("patterned", input_schema=schema))
    assert refused.value.details["field"] == "input_schema"
    assert workbench.store.count_active() == 0


async def test_schemas_over_the_size_or_depth_caps_are_refused(workbench: Workbench) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"type": "object", "properties": {"x": deep}}
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_SCHEMA_BYTES // 20)}}
    for schema, words in ((deep, "nests deeper"), (big, "bytes, over")):
        with pytest.raises(InvalidParams, match=words):
            await workbench.craft(add_tool("huge", input_schema=schema))
    assert workbench.store.count_active() == 0


EVIL = "^(a+)+$"


async def test_a_catastrophic_pattern_answers_at_once_while_the_server_keeps_serving(workbench: Workbench) -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": EVIL}, "a": {"type": "number"}, "b": {"type": "number"}},
        "patternProperties": {"^(x+x+)+y$": {"type": "number"}},
        "required": ["s", "a", "b"],
    }
    adversarial = "a" * 100_000 + "!"
    examples = [{"params": {"s": "aaa", "a": 1, "b": 2}, "expected": 3}]
    async with Client(McpFace(workbench).server) as client:
        crafted = await call(client, "awb_craft", add_tool("evil_pattern", input_schema=schema, examples=examples))
        assert "error" not in crafted, crafted
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                replies: dict[str, Any] = {}

                async def evil() -> None:
                    params = {"s": adversarial, "a": 1, "b": 2, "x" * 5000: 1}
                    replies["evil"] = await call(client, "awb_call", {"name": "evil_pattern", "params": params})

                async def other() -> None:
                    replies["list"] = await call(client, "awb_list", {})

                group.start_soon(evil)
                group.start_soon(other)
    assert replies["evil"]["error"]["code"] == "invalid_params"
    assert len(repr(replies["evil"])) < 10_000
    assert replies["list"]["count"] == 1
    assert workbench.resolve("evil_pattern").usage_count == 0


async def test_format_regex_is_checked_on_the_linear_engine(workbench: Workbench) -> None:
    schema = {"type": "object", "properties": {"r": {"type": "string", "format": "regex"}}}
    await workbench.craft(
        add_tool("regex_param", code="def run(params):\n    return 1\n", input_schema=schema, examples=[])
    )
    assert (await workbench.call("regex_param", {"r": "^(a+)+$"})).result == 1
    for value in ("(unclosed", "\\pL{300}"):  # the second compiles past RE2's memory for one pattern
        with pytest.raises(InvalidParams):
            await workbench.call("regex_param", {"r": value})


async def test_a_regex_given_as_a_value_never_enters_the_pattern_cache(workbench: Workbench) -> None:
    """Each distinct value used to be compiled into a cache of 4,096 programs: up to RE2's memory for
    one pattern each (~1 MB, \\pL{48}), so a client sending new ones grew the server by gigabytes."""
    schema = {"type": "object", "properties": {"r": {"type": "string", "format": "regex"}}}
    await workbench.craft(
        add_tool("regex_values", code="def run(params):\n    return 1\n", input_schema=schema, examples=[])
    )
    # Validations run on a few threads, whose allocator arenas keep what the first programs freed for
    # the next ones to reuse: measured after that.
    for n in range(60):
        assert (await workbench.call("regex_values", {"r": "\\pL{48}" + "x" * n})).result == 1
    before = resident_mb()
    for n in range(60, 120):
        assert (await workbench.call("regex_values", {"r": "\\pL{48}" + "x" * n})).result == 1
    assert resident_mb() - before < 20  # kept, sixty more programs would come to ~55 MB more


def resident_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_the_pattern_cache_is_bounded_by_the_size_of_its_programs() -> None:
    cache = PatternCache(budget=200_000)
    for n in range(20):
        assert cache.compile("\\pL{30}" + "x" * n).search("x" * 5) is None
    assert 0 < cache.instructions <= 200_000
    assert len(cache) < 20  # the oldest went
    assert cache.compile("^ab+c$") is cache.compile("^ab+c$")  # small ones are kept and reused


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([{"k": i} for i in range(20_000)], True),
        ([{"k": i} for i in range(20_000)] + [{"k": 7}], False),
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False),  # key order does not matter
        ([1, 1.0], False),  # numbers are equal by value
        ([1, True], True),  # a boolean is not a number
        ([0, False, None, "", [], {}], True),
        ([[1, {"x": [2]}], [1, {"x": [2]}]], False),
    ],
)
async def test_unique_items_is_linear_and_keeps_json_schema_equality(
    workbench: Workbench, items: list[Any], unique: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jsonschema compared objects pairwise in one keyword, past the budget checked between keywords
    (4,000 objects: 29 s; 20,000 would take minutes). 20,000 here take ~0.1 s of CPU; the budget is
    widened from two seconds to eight so that a loaded machine (a CI run at load 9 took over two) does not
    fail what stays a hundred times apart."""
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 8.0)
    schema = ToolSchema.compile({"type": "array", "uniqueItems": True})
    with anyio.fail_after(10):
        problems = await schema.problems_off_loop(items)
    assert (problems == []) is unique, problems


async def test_an_exponential_schema_is_stopped_by_the_time_budget_with_a_structured_error(
    workbench: Workbench,
) -> None:
    branches = [{"type": "array", "items": {"$ref": "#/$defs/n"}}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]
    schema = {"type": "object", "$defs": {"n": {"anyOf": branches}}, "properties": {"x": {"$ref": "#/$defs/n"}}}
    await workbench.craft(
        add_tool("branchy", code="def run(params):\n    return 1\n", input_schema=schema, examples=[])
    )
    nested: Any = "leaf"
    for _ in range(40):
        nested = [nested]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            results: list[str] = []

            async def runaway() -> None:
                with pytest.raises(InvalidParams) as stopped:
                    await workbench.call("branchy", {"x": nested})
                assert stopped.value.details["reason"] == "validation_limit"
                results.append("stopped")

            async def meanwhile() -> None:
                results.append(workbench.search("anything").mode)

            group.start_soon(runaway)
            group.start_soon(meanwhile)
    assert results == ["text", "stopped"]
    assert workbench.resolve("branchy").usage_count == 0


async def test_params_nested_past_the_recursion_limit_are_invalid_params(workbench: Workbench) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/list"}},
        "$defs": {"list": {"type": "array", "items": {"$ref": "#/$defs/list"}}},
    }
    await workbench.craft(add_tool("lists", code="def run(params):\n    return 1\n", input_schema=schema, examples=[]))
    nested: Any = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(InvalidParams, match="cannot be checked"):
        await workbench.call("lists", {"x": nested})


async def test_validation_error_messages_do_not_echo_huge_input(workbench: Workbench) -> None:
    await workbench.craft(add_tool("adder"))
    with pytest.raises(InvalidParams) as refused:
        await workbench.call("adder", {"a": "x" * 5_000_000, "b": 1})
    assert len(repr(refused.value.to_dict())) < 10_000


async def test_examples_that_make_validation_run_away_are_refused_off_the_loop(workbench: Workbench) -> None:
    branches = [{"type": "array", "items": {"$ref": "#/$defs/n"}}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]
    schema = {"type": "object", "$defs": {"n": {"anyOf": branches}}, "properties": {"x": {"$ref": "#/$defs/n"}}}
    nested: Any = "leaf"
    for _ in range(40):
        nested = [nested]
    examples = [{"params": {"x": nested}, "expected": 1}] * 10
    results: list[str] = []

    async def craft() -> None:
        with pytest.raises(InvalidParams, match="cannot be checked"):
            await workbench.craft(add_tool("runaway", input_schema=schema, examples=examples))
        results.append("refused")

    async def meanwhile() -> None:
        results.append(workbench.search("anything").mode)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(craft)
            group.start_soon(meanwhile)
    assert results == ["text", "refused"]
    assert workbench.store.count_active() == 0


async def test_a_reference_to_a_local_file_is_never_opened(workbench: Workbench, tmp_path: Path) -> None:
    # Opening a FIFO with no writer blocks: had the server tried to read the reference, this would hang.
    fifo = tmp_path / "schema.json"
    os.mkfifo(fifo)
    schema = {"type": "object", "properties": {"a": {"$ref": fifo.as_uri()}}}
    with anyio.fail_after(10):
        with pytest.raises(InvalidParams):
            await workbench.craft(add_tool("fifo_ref", input_schema=schema))
        with pytest.raises(SchemaTooExpensive):
            await ToolSchema.compile(schema).problems_off_loop({"a": 1})
