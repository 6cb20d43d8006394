"""Craft and update are bounded: names match exactly, text fields have limits, admission takes an
execution slot and one time budget, and `max_tools` holds however many crafts race for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.config import Config
from awb.crafting import MAX_EXAMPLE_BYTES, MAX_EXAMPLES, MAX_TAG_CHARS, MAX_TAGS
from awb.errors import AdmissionFailed, AwbError, Busy, InvalidParams, LimitExceeded
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "name", ["tool\n", "tool\r\n", "-rf", "-", "x" * 65, "tab\tbed", "a/b", "\u0430dd", "", "new\nline"]
)
async def test_names_must_match_the_rule_whole(workbench: Workbench, name: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        await workbench.craft(add_tool(name))
    assert refused.value.code == "invalid_params"
    assert refused.value.details["field"] == "name"
    assert workbench.store.count_active() == 0


async def test_a_name_shaped_like_a_tool_id_is_refused_so_a_reference_names_one_tool(workbench: Workbench) -> None:
    """With it, `awb_delete {"name": <first tool's id>}` deleted the first tool, not the one so named."""
    first = await workbench.craft(add_tool("first"))
    for name in (first.tool_id, "tool_0000000000000000"):
        with pytest.raises(InvalidParams, match="may not look like a tool id"):
            await workbench.craft(add_tool(name))
    assert workbench.resolve(first.tool_id).name == "first"
    # Near misses are names like any other.
    for name in ("tool_000000000000000", "tool_0000000000000000x", "tool_ABCDEF0123456789"):
        assert (await workbench.craft(add_tool(name))).name == name


@pytest.mark.parametrize("name", ["_private", "a", "x-y_z", "9lives", "A" * 64])
async def test_names_within_the_rule_are_accepted(workbench: Workbench, name: str) -> None:
    assert (await workbench.craft(add_tool(name))).name == name


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("description", "d" * 16_001),
        ("problem", "p" * 8001),
        ("created_by_agent", "a" * 201),
        ("tags", [f"t{n}" for n in range(MAX_TAGS + 1)]),
        ("tags", ["t" * 65]),
        ("examples", [{"params": {"a": 1, "b": 2}, "expected": 3}] * (MAX_EXAMPLES + 1)),
        ("examples", [{"params": {"a": 1, "b": 2, "pad": "x" * MAX_EXAMPLE_BYTES}, "expected": 3}]),
        ("examples", [{"params": {"a": 1, "b": 2}, "expected": "x" * (MAX_EXAMPLE_BYTES // 2)}] * 10),
    ],
)
async def test_text_fields_over_their_limits_are_refused(workbench: Workbench, field: str, value: Any) -> None:
    with pytest.raises(InvalidParams) as refused:
        await workbench.craft(add_tool("limited", **{field: value}))
    assert refused.value.code == "invalid_params"
    assert field in repr(refused.value.to_dict())
    assert workbench.store.count_active() == 0


async def test_tags_are_trimmed_blank_ones_dropped_and_each_kept_once_where_it_first_appeared(
    workbench: Workbench,
) -> None:
    given = [" db ", "sql", "db", "", "   ", "DB", "sql\t", "db", " " + "t" * MAX_TAG_CHARS + " "]
    kept = ["db", "sql", "DB", "t" * MAX_TAG_CHARS]
    tool = await workbench.craft(add_tool("tagged", tags=given))
    assert tool.metadata.tags == kept
    assert workbench.inspect("tagged").tool.metadata.tags == kept
    assert [t.tags for t in workbench.list_tools()] == [kept]
    # Repeats do not count against the 32 a tool may have.
    many = await workbench.craft(add_tool("many_tags", description="Sum two values", tags=["x"] * (MAX_TAGS + 8)))
    assert many.metadata.tags == ["x"]


async def test_the_spec_metadata_shape_and_the_mcp_face_normalise_tags_too(workbench: Workbench) -> None:
    spec = {k: v for k, v in add_tool("spec_tags").items() if k != "tags"}
    await workbench.craft({**spec, "metadata": {"tags": ["a", " a", "b", "a "]}})
    face = McpFace(workbench)
    crafted = await face.call("awb_craft", add_tool("mcp_tags", description="Sum of two", tags=["m", "m", " m "]))
    assert not crafted.is_error, crafted.structured_content
    assert workbench.resolve("spec_tags").metadata.tags == ["a", "b"]
    listed = await face.call("awb_list", {"tag": "m"})
    assert [t["tags"] for t in (listed.structured_content or {})["tools"]] == [["m"]]


async def test_the_mcp_face_takes_tags_as_the_library_does_limits_counted_after_normalising(
    workbench: Workbench,
) -> None:
    face = McpFace(workbench)
    padded = "  " + "t" * MAX_TAG_CHARS + "  "
    crafted = await face.call("awb_craft", add_tool("long_tag", tags=[padded, *["x"] * (MAX_TAGS + 8)]))
    assert not crafted.is_error, crafted.structured_content
    assert workbench.resolve("long_tag").metadata.tags == ["t" * MAX_TAG_CHARS, "x"]
    over = await face.call(
        "awb_craft",
        add_tool("too_many", description="Sum two", tags=[f"t{i}" for i in range(MAX_TAGS + 1)]),
    )
    assert over.is_error and (over.structured_content or {})["error"]["code"] == "invalid_params"
    too_long = await face.call("awb_craft", add_tool("too_long", description="Sum", tags=["t" * (MAX_TAG_CHARS + 1)]))
    assert too_long.is_error and (too_long.structured_content or {})["error"]["code"] == "invalid_params"


async def test_the_tag_filter_matches_tags_exactly_case_included_once_trimmed(workbench: Workbench) -> None:
    await workbench.craft(add_tool("lower", tags=["db"]))
    await workbench.craft(add_tool("upper", description="Sum two numbers", tags=["DB"]))

    def named(tag: str, query: str | None = None) -> set[str]:
        return {t.name for t in workbench.list_tools(tag=tag, query=query)}

    assert named("db") == {"lower"}
    assert named(" DB ") == {"upper"}
    assert named("Db") == set()
    assert named(" db", query="add numbers") == {"lower"}  # the ranked listing filters the same way
    assert named("  ") == {"lower", "upper"}  # a blank filter filters nothing


@pytest.mark.parametrize("blank", ["", "   ", "\n\t \u3000"])
async def test_a_blank_description_is_refused_on_craft_and_update_as_an_empty_one_is(
    workbench: Workbench, blank: str
) -> None:
    with pytest.raises(InvalidParams) as refused:
        await workbench.craft(add_tool("blank", description=blank))
    assert [error["path"] for error in refused.value.details["errors"]] == ["/description"]
    await workbench.craft(add_tool("described"))
    with pytest.raises(InvalidParams) as refused:
        await workbench.update("described", description=blank)
    assert [error["path"] for error in refused.value.details["errors"]] == ["/description"]
    assert workbench.resolve("described").description == add_tool()["description"]
    assert workbench.store.get_by_name("blank") is None


async def test_an_update_over_the_limits_is_refused_and_the_tool_is_unchanged(workbench: Workbench) -> None:
    await workbench.craft(add_tool("steady"))
    with pytest.raises(InvalidParams):
        await workbench.update("steady", description="d" * 16_001)
    with pytest.raises(InvalidParams):
        await workbench.update("steady", examples=[{"params": {"a": 1, "b": 1}, "expected": 2}] * (MAX_EXAMPLES + 1))
    tool = workbench.resolve("steady")
    assert tool.version == 1 and tool.description == add_tool()["description"]


async def test_crafting_takes_an_execution_slot(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    config.sandbox.max_concurrent = 1
    async with Workbench(config) as workbench:
        with workbench.slots.take():
            with pytest.raises(Busy) as busy:
                await workbench.craft(add_tool("waits"))
            assert busy.value.code == "busy"
        assert workbench.store.count_active() == 0
        await workbench.craft(add_tool("after"))
        assert workbench.store.count_active() == 1


async def test_an_updates_admission_takes_an_execution_slot(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    config.sandbox.max_concurrent = 1
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("evolving"))
        with workbench.slots.take(), pytest.raises(Busy):
            await workbench.update("evolving", description="a new description")
        assert workbench.resolve("evolving").version == 1


SPIN = "def run(params):\n    while True:\n        pass\n"


async def test_the_examples_of_a_craft_share_one_time_budget(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", tool_execution_timeout_ms=1000)
    config.sandbox.admission_timeout_ms = 1500
    # Every example "passes" by timing out: without a total budget this would take ten timeouts.
    examples = [{"params": {"i": i}, "expected_error": "timeout"} for i in range(10)]
    async with Workbench(config) as workbench:
        with anyio.fail_after(8):
            with pytest.raises(AdmissionFailed) as failed:
                await workbench.craft(
                    add_tool("spinner", code=SPIN, input_schema={"type": "object"}, examples=examples)
                )
        assert failed.value.details["check"] == "time"
        assert failed.value.details["limit"] == "sandbox.admission_timeout_ms"
        assert workbench.store.count_active() == 0


async def test_max_tools_holds_under_many_concurrent_crafts(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_tools=3)
    config.sandbox.max_concurrent = 64
    outcomes: list[str] = []
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("first"))

        async def craft(index: int) -> None:
            try:
                await workbench.craft(add_tool(f"racer_{index}", description=f"racer number {index}"))
            except AwbError as exc:
                outcomes.append(exc.code)
            else:
                outcomes.append("crafted")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for index in range(20):
                    group.start_soon(craft, index)
        assert outcomes.count("crafted") == 2
        assert outcomes.count("limit_exceeded") == 18
        assert workbench.store.count_active() == 3


async def test_max_tools_is_checked_where_the_row_is_written(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_tools=1)
    async with Workbench(config) as one, Workbench(config) as other:
        await one.craft(add_tool("taken"))
        tool = one.resolve("taken").model_copy(update={"tool_id": "tool_second", "name": "second"})
        with pytest.raises(LimitExceeded):
            other.store.add_tool(tool, max_active=1)
        assert other.store.count_active() == 1


async def test_an_example_nested_past_the_recursion_limit_is_invalid_params(workbench: Workbench) -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidParams, match="nests too deeply"):
        await workbench.craft(add_tool("deep_example", examples=[{"params": {"a": 1, "b": 2}, "expected": deep}]))
    assert workbench.store.count_active() == 0


async def test_an_example_whose_result_nests_too_deep_fails_admission_with_output_exceeded(
    workbench: Workbench,
) -> None:
    code = "def run(params):\n    x = []\n    for i in range(params['n']):\n        x = [x]\n    return x\n"
    for depth in (100, 3000):
        examples = [{"params": {"n": depth}, "expected": []}]
        with pytest.raises(AdmissionFailed) as failed:
            await workbench.craft(
                add_tool("deep_result", code=code, input_schema={"type": "object"}, examples=examples)
            )
        [entry] = failed.value.details["examples"]
        assert entry["error"]["code"] == "output_exceeded"
    assert workbench.store.count_active() == 0


@pytest.mark.parametrize(
    ("got", "expected", "admitted"),
    [
        ({"a": True}, {"a": 1}, False),  # Python's == says True == 1; JSON does not
        (0, False, False),
        ([1, 2], [1.0, 2.0], True),  # one number type in JSON
        ({"a": 1, "b": [None]}, {"b": [None], "a": 1}, True),
    ],
)
async def test_an_example_passes_only_on_a_json_equal_result(
    workbench: Workbench, got: Any, expected: Any, admitted: bool
) -> None:
    request = add_tool(
        "echo_value",
        code=f"def run(params):\n    return {got!r}\n",
        input_schema={"type": "object"},
        examples=[{"params": {}, "expected": expected}],
    )
    if admitted:
        assert (await workbench.craft(request)).name == "echo_value"
    else:
        with pytest.raises(AdmissionFailed):
            await workbench.craft(request)
