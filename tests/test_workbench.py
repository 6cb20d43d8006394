"""The Workbench domain service: craft rules, limits, calls and their records."""

from __future__ import annotations

from pathlib import Path

import pytest

from awb.config import Config
from awb.errors import (
    AdmissionFailed,
    InvalidOutput,
    InvalidParams,
    LimitExceeded,
    NameConflict,
    OutputExceeded,
    ToolDeleted,
    ToolNotFound,
    ToolRuntimeError,
    ToolTimeout,
)
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["", "has space", "dot.ted", "x" * 65, "ünï"])
async def test_names_outside_the_rules_are_refused(workbench: Workbench, name: str) -> None:
    with pytest.raises(InvalidParams, match="1-64 characters"):
        await workbench.craft(add_tool(name))


async def test_a_64_character_name_with_dashes_and_underscores_is_fine(workbench: Workbench) -> None:
    name = "a-b_" + "c" * 60
    assert (await workbench.craft(add_tool(name))).name == name


async def test_crafting_a_live_name_twice_is_a_name_conflict(workbench: Workbench) -> None:
    await workbench.craft(add_tool("twin"))
    with pytest.raises(NameConflict):
        await workbench.craft(add_tool("twin"))


async def test_max_tools_and_max_code_bytes_are_enforced(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_tools=1, max_code_bytes=100)
    async with Workbench(config) as workbench:
        with pytest.raises(LimitExceeded, match="100-byte") as too_big:
            await workbench.craft(add_tool("big", code="def run(params):\n    return 1\n" + "#" * 100))
        assert too_big.value.details["limit"] == "max_code_bytes"
        await workbench.craft(add_tool("only"))
        with pytest.raises(LimitExceeded, match="maximum of 1") as full:
            await workbench.craft(add_tool("second"))
        assert full.value.details["limit"] == "max_tools"


async def test_an_input_schema_that_is_not_json_schema_is_refused(workbench: Workbench) -> None:
    with pytest.raises(InvalidParams, match="input_schema"):
        await workbench.craft(add_tool(input_schema={"type": "object", "properties": {"a": {"type": 12}}}))


async def test_code_without_a_run_function_is_not_admitted(workbench: Workbench) -> None:
    with pytest.raises(AdmissionFailed, match="does not load"):
        await workbench.craft({"name": "norun", "description": "d", "code": "x = 1\n"})


async def test_code_that_does_not_parse_is_not_admitted(workbench: Workbench) -> None:
    with pytest.raises(AdmissionFailed, match="does not load"):
        await workbench.craft({"name": "broken", "description": "d", "code": "def run(params)\n    pass\n"})


async def test_a_failing_example_rejects_the_craft_with_a_report(workbench: Workbench) -> None:
    request = add_tool(
        examples=[{"params": {"a": 1, "b": 2}, "expected": 3}, {"params": {"a": 1, "b": 1}, "expected": 3}]
    )
    with pytest.raises(AdmissionFailed) as caught:
        await workbench.craft(request)
    report = caught.value.details["examples"]
    assert [entry["ok"] for entry in report] == [True, False]
    assert report[1]["got"] == 2 and report[1]["expected"] == 3
    with pytest.raises(ToolNotFound):
        workbench.resolve("add_numbers")


async def test_an_example_may_expect_an_error_code(workbench: Workbench) -> None:
    request = {
        "name": "strict_div",
        "description": "divide",
        "code": "def run(params):\n    return params['a'] / params['b']\n",
        "examples": [{"params": {"a": 1, "b": 0}, "expected_error": "runtime_error"}],
    }
    assert (await workbench.craft(request)).name == "strict_div"


async def test_a_call_is_recorded_with_duration_and_outcome(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    await workbench.call(tool.tool_id, {"a": 1, "b": 2})
    with pytest.raises(InvalidParams):
        await workbench.call(tool.tool_id, {"a": 1})
    [record] = workbench.inspect(tool.tool_id).recent_calls
    assert record.ok and record.error_code is None and record.duration_ms > 0


async def test_runtime_errors_carry_the_tools_own_traceback(workbench: Workbench) -> None:
    code = "def helper(x):\n    return x['missing']\n\ndef run(params):\n    return helper(params)\n"
    await workbench.craft({"name": "oops", "description": "d", "code": code})
    with pytest.raises(ToolRuntimeError) as caught:
        await workbench.call("oops", {})
    traceback = caught.value.details["traceback"]
    assert any("return helper(params)" in line for line in traceback)
    assert any("x['missing']" in line for line in traceback)
    assert traceback[-1].startswith("KeyError")
    [record] = workbench.inspect("oops").recent_calls
    assert (record.ok, record.error_code) == (False, "runtime_error")


async def test_a_tool_that_runs_too_long_is_stopped_with_timeout(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", tool_execution_timeout_ms=200)
    async with Workbench(config) as workbench:
        await workbench.craft(
            {"name": "spin", "description": "d", "code": "def run(p):\n    while True:\n        pass\n"}
        )
        with pytest.raises(ToolTimeout):
            await workbench.call("spin", {})
        await workbench.craft(add_tool())
        assert (await workbench.call("add_numbers", {"a": 1, "b": 1})).result == 2


async def test_a_result_that_is_not_json_is_a_structured_error(workbench: Workbench) -> None:
    await workbench.craft({"name": "settish", "description": "d", "code": "def run(p):\n    return {1, 2}\n"})
    with pytest.raises(InvalidOutput, match="JSON"):
        await workbench.call("settish", {})


async def test_output_over_the_cap_is_a_structured_error(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_output_bytes=1000)
    async with Workbench(config) as workbench:
        await workbench.craft({"name": "chatty", "description": "d", "code": "def run(p):\n    return 'x' * 5000\n"})
        with pytest.raises(OutputExceeded, match="1000-byte"):
            await workbench.call("chatty", {})


async def test_a_tool_that_allocates_too_much_hits_the_memory_limit(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", tool_memory_mb=16)
    async with Workbench(config) as workbench:
        await workbench.craft({"name": "hog", "description": "d", "code": "def run(p):\n    return len([0] * 10**8)\n"})
        with pytest.raises(Exception) as caught:
            await workbench.call("hog", {})
        assert getattr(caught.value, "code", None) == "memory_exceeded"


async def test_prints_are_returned_as_logs(workbench: Workbench) -> None:
    await workbench.craft(
        {"name": "talker", "description": "d", "code": "def run(p):\n    print('hello')\n    return 1\n"}
    )
    result = await workbench.call("talker", {})
    assert result.logs == ["hello\n"]


async def test_a_deleted_tool_cannot_be_called_but_stays_inspectable(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    workbench.delete("add_numbers")
    with pytest.raises(ToolDeleted):
        await workbench.call(tool.tool_id, {"a": 1, "b": 1})
    with pytest.raises(ToolDeleted):
        workbench.delete(tool.tool_id)
    assert workbench.inspect(tool.tool_id).tool.status == "deleted"


async def test_list_filters_by_level_and_tag_and_caps_the_count(workbench: Workbench) -> None:
    for i in range(4):
        await workbench.craft(add_tool(f"tool{i}", tags=["even" if i % 2 == 0 else "odd"]))
    for _ in range(5):
        await workbench.call("tool3", {"a": 1, "b": 1})
    assert [t.name for t in workbench.list_tools(memory_level="medium_term")] == ["tool3"]
    assert {t.name for t in workbench.list_tools(tag="even")} == {"tool0", "tool2"}
    assert len(workbench.list_tools(limit=2)) == 2
    assert workbench.list_tools()[0].name == "tool3"
    with pytest.raises(InvalidParams):
        workbench.list_tools(limit=0)


@pytest.mark.parametrize(
    "tag", ["a\x00b", "x\ty", "line\nbreak", "esc\x1b[2J", "rtl\u202eoverride", "no\u00a0break", "zero\u200bwidth"]
)
async def test_a_tag_holding_a_character_that_does_not_show_is_refused_naming_it(
    workbench: Workbench, tag: str
) -> None:
    """Such tags were stored; `list_tools(tag=...)` never found one holding NUL, and the rest looked like another tag."""
    with pytest.raises(
        InvalidParams, match=r"^the tag '.+' holds U\+[0-9A-F]{4} at character \d+: tags are text"
    ) as refused:
        await workbench.craft(add_tool("tagged", tags=["fine", tag]))
    assert refused.value.details["field"] == "tags" and "\\" in refused.value.details["tag"]  # escaped, shown
    assert workbench.list_tools() == []


async def test_tags_that_show_are_kept_with_inner_spaces_and_emoji_and_trimmed_at_the_ends(
    workbench: Workbench,
) -> None:
    tags = [" data science\n", "👩\u200d💻", "\tdb"]
    tool = await workbench.craft(add_tool("tagged", tags=tags, created_by_agent="planner 2"))
    assert tool.metadata.tags == ["data science", "👩\u200d💻", "db"]
    assert [t.name for t in workbench.list_tools(tag="👩\u200d💻")] == ["tagged"]


async def test_an_agent_name_holding_a_character_that_does_not_show_is_refused(workbench: Workbench) -> None:
    with pytest.raises(InvalidParams, match=r"^the agent name 'planner\\x00' holds U\+0000 at character 8") as refused:
        await workbench.craft(add_tool("tagged", created_by_agent="planner\x00"))
    assert refused.value.details["field"] == "created_by_agent"


async def test_every_call_starts_from_fresh_globals(workbench: Workbench) -> None:
    # Monty sessions are checked out ahead of calls and handed back afterwards: never reused.
    code = (
        "def run(params):\n"
        "    global marker\n"
        "    try:\n"
        "        before = marker\n"
        "    except NameError:\n"
        "        before = None\n"
        "    marker = params['x']\n"
        "    return before\n"
    )
    tool = await workbench.craft({"name": "stateful", "description": "remembers", "code": code})
    results = [(await workbench.call(tool.tool_id, {"x": i})).result for i in range(5)]
    assert results == [None] * 5


async def test_a_call_after_a_timeout_gets_a_working_session(tmp_path: Path) -> None:
    async with Workbench(Config(inventory_path=tmp_path / "inv.db", tool_execution_timeout_ms=300)) as workbench:
        slow = await workbench.craft(
            {"name": "slow", "description": "spins", "code": "def run(params):\n    while True:\n        pass\n"}
        )
        quick = await workbench.craft(add_tool())
        for _ in range(2):
            with pytest.raises(ToolTimeout):
                await workbench.call(slow.tool_id, {})
            assert (await workbench.call(quick.tool_id, {"a": 1, "b": 2})).result == 3


async def test_a_listing_page_carries_the_total_and_where_the_next_page_starts(workbench: Workbench) -> None:
    for name in ("one", "two", "three"):
        await workbench.craft(add_tool(name, description=f"Add numbers, variant {name}"))
    first = workbench.list_page(limit=2)
    assert (len(first.tools), first.total, first.offset, first.next_offset) == (2, 3, 0, 2)
    rest = workbench.list_page(limit=2, offset=2)
    assert (len(rest.tools), rest.total, rest.next_offset) == (1, 3, None)
    assert {t.name for t in first.tools + rest.tools} == {"one", "two", "three"}
    by_query = workbench.list_page(query="add numbers variant", limit=1, offset=1)
    assert (len(by_query.tools), by_query.total, by_query.next_offset) == (1, 3, 2)
    with pytest.raises(InvalidParams):
        workbench.list_page(offset=-1)
    past = workbench.list_page(offset=10**6)  # past the end: an empty last page, not an error
    assert (past.tools, past.total, past.next_offset) == ([], 3, None)
    with pytest.raises(InvalidParams, match="offset must be between 0 and 2147483647"):
        workbench.list_page(offset=2**70)  # more than the store's integers hold (it was an internal error)


async def test_a_search_query_past_its_length_limit_is_invalid_params_on_every_path(workbench: Workbench) -> None:
    await workbench.craft(add_tool("adder", description="Add numbers"))
    assert workbench.search("add " * 1000).results  # 4,000 characters: a long query still ranks
    # A description longer than a query may be still gets its similar tools (from its start).
    longer = await workbench.craft(add_tool("summer", description="Add numbers together. " + "Really. " * 1000))
    assert [s.name for s in workbench.similar(longer.name, longer.description, exclude=longer.tool_id)] == ["adder"]
    for long in ("add " * 1025, "x" * 2_000_000):
        with pytest.raises(InvalidParams, match="over the 4096-character limit"):
            workbench.search(long)
        with pytest.raises(InvalidParams, match="over the 4096-character limit"):
            workbench.list_page(query=long)


async def test_top_k_is_the_spec_name_of_the_search_limit(workbench: Workbench) -> None:
    for name in ("one", "two", "three"):
        await workbench.craft(add_tool(name, description=f"Add numbers, variant {name}"))
    assert len(workbench.search("add numbers", top_k=2).results) == 2
    assert len(workbench.search("add numbers", limit=1).results) == 1
    with pytest.raises(InvalidParams, match="same setting"):
        workbench.search("add numbers", limit=1, top_k=2)


async def test_compiled_schemas_are_capped_and_an_evicted_one_compiles_again(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server calling many tools keeps a bounded number of compiled schemas, and a call to a tool
    # whose schema was dropped still validates against it.
    monkeypatch.setattr("awb.calling.COMPILED_SCHEMAS", 3)
    tools = [await workbench.craft(add_tool(f"capped-{n}")) for n in range(5)]
    for tool in tools:
        await workbench.call(tool.tool_id, {"a": 1, "b": 2})
    assert len(workbench.caller._compiled) == 3
    assert (tools[0].tool_id, tools[0].version, "input") not in workbench.caller._compiled
    with pytest.raises(InvalidParams, match="input_schema"):
        await workbench.call(tools[0].tool_id, {"a": "one", "b": 2})
    assert (await workbench.call(tools[0].tool_id, {"a": 2, "b": 2})).result == 4


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
async def test_a_blank_listing_query_filters_nothing_as_an_empty_one_does(workbench: Workbench, blank: str) -> None:
    await workbench.craft(add_tool())
    page = workbench.list_page(query=blank)
    assert (page.total, [t.name for t in page.tools]) == (1, ["add_numbers"])
    with pytest.raises(InvalidParams, match="empty"):
        workbench.search(blank or " ")  # a search, unlike a listing, needs something to look for


async def test_entering_a_started_workbench_starts_nothing_again(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HTTP server starts its workbench before it serves (without the embedding model), then holds it
    open with `async with`: that must neither follow a shared store's changes a second time (each change
    would be handled twice) nor start loading the model before the server is ready."""
    workbench = Workbench(config)
    subscribed: list[object] = []
    loading: list[bool] = []
    monkeypatch.setattr(workbench.store, "subscribe_changes", subscribed.append, raising=False)
    monkeypatch.setattr(workbench.search_engine, "warm_up", lambda: loading.append(True))
    await workbench.start(warm_search=False)
    async with workbench:
        assert (len(subscribed), loading) == (1, [])
    assert len(subscribed) == 1
