"""The equipped set, near-duplicates at craft, and purge, on the domain core."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from awb.clock import ManualClock
from awb.config import Config, MemoryConfig, SearchConfig
from awb.errors import DuplicateTool, InvalidParams, LimitExceeded, NameConflict, NotEquippable
from awb.events import Event
from awb.meta_tools import worded_by
from awb.workbench import CallResult, Workbench
from support import ADD_SCHEMA, add_tool, awb_env

pytestmark = pytest.mark.anyio

UPPER = {
    "description": "Turn text into upper case letters",
    "code": "def run(params):\n    return params['text'].upper()\n",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "examples": [{"params": {"text": "a"}, "expected": "A"}],
}


def record(workbench: Workbench) -> list[Event]:
    events: list[Event] = []
    workbench.events.subscribe(events.append)
    return events


async def test_equip_puts_the_tool_in_the_equipped_set_and_tells_listeners(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    events = record(workbench)
    equipped = workbench.equip(tool.name)
    assert equipped.equipped
    assert [t.name for t in workbench.equipped_tools()] == ["add_numbers"]
    assert [e.kind for e in events] == ["equipped"]
    assert events[0].changes_tool_list


async def test_equipping_twice_is_harmless_and_silent(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    workbench.equip(tool.tool_id)
    events = record(workbench)
    assert workbench.equip(tool.tool_id).equipped
    assert events == []


async def test_the_equipped_set_is_persisted_in_the_inventory(config: Config, clock: ManualClock) -> None:
    async with Workbench(config, clock=clock) as first:
        tool = await first.craft(add_tool())
        first.equip(tool.name)
    async with Workbench(config, clock=clock) as second:
        assert [t.tool_id for t in second.equipped_tools()] == [tool.tool_id]


async def test_equipping_past_max_equipped_is_limit_exceeded(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_equipped=1)
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("first"))
        await workbench.craft({**UPPER, "name": "second"})
        workbench.equip("first")
        with pytest.raises(LimitExceeded) as raised:
            workbench.equip("second")
        assert raised.value.details["limit"] == "max_equipped"
        assert raised.value.details["equipped"] == ["first"]


@pytest.mark.parametrize("name", ["awb_search", "AWB_CALL", "Awb_Search", "aWb_RoLlBaCk"])
async def test_a_meta_tool_name_in_any_case_is_refused_at_craft_naming_the_rule(
    workbench: Workbench, name: str
) -> None:
    with pytest.raises(InvalidParams) as refused:
        await workbench.craft({**UPPER, "name": name})
    assert refused.value.details == {"field": "name", "name": name, "rule": "reserved_name"}
    assert "in any case" in refused.value.message and name.lower() in refused.value.message
    assert workbench.store.count_active() == 0


async def test_names_that_only_start_like_a_meta_tool_are_fine(workbench: Workbench) -> None:
    for name in ("awb_calls", "awb_call_helper", "AWB", "my_awb_call"):
        await workbench.craft({**UPPER, "name": name, "description": f"Upper case letters for {name}"})


async def test_an_older_record_named_like_a_meta_tool_loads_lists_calls_and_goes_but_is_never_equipped(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Crafts refused such names only later: an inventory may hold one, even equipped (auto-equip too)."""
    config = Config(
        inventory_path=tmp_path / "inv.db",
        auto_equip_long_term=True,
        memory=MemoryConfig(promotion_threshold_medium=1, promotion_threshold_long=2),
        # Text search: the record written straight to the store has no vector (`awb reindex` would make one).
        search=SearchConfig(mode="text"),
    )
    async with Workbench(config, clock=clock) as workbench:
        older = (await workbench.craft({**UPPER, "name": "upper"})).model_copy(
            update={"tool_id": "tool_older", "name": "AWB_CALL"}
        )
        workbench.store.add_tool(older)
    async with Workbench(config, clock=clock) as workbench:
        assert (
            {t.name for t in workbench.list_tools()}
            == {t.name for t in workbench.list_tools(query="upper")}
            == {
                "AWB_CALL",
                "upper",
            }
        )
        for _ in range(3):  # reaches long-term memory: auto-equip leaves it alone
            assert (await workbench.call("AWB_CALL", {"text": "a"})).result == "A"
        assert workbench.resolve("AWB_CALL").memory_level == "long_term"
        assert workbench.equipped_tools() == []
        with pytest.raises(NameConflict) as refused:
            workbench.equip("AWB_CALL")
        assert refused.value.details["rule"] == "reserved_name" and "awb_call" in refused.value.message
        updated = await workbench.update("AWB_CALL", description="Upper case, still")
        assert updated.version == 2
        assert workbench.delete("tool_older").status == "deleted"


async def test_a_tool_whose_name_differs_from_an_equipped_ones_only_in_case_is_not_equipped(
    workbench: Workbench,
) -> None:
    # Models and some clients compare tool names without case (as for the meta-tools' names): `Adder`
    # listed beside `adder` as a first-class tool could pass for it.
    adder = await workbench.craft(add_tool("adder"))
    # Crafts refuse such a pair now; an inventory from before names were unique ignoring case keeps it.
    older = adder.model_copy(update={"tool_id": "tool_older_adder", "name": "Adder", "description": "Delete files"})
    workbench.store.add_tool(older, keep_case_variants=True)
    workbench.equip("adder")
    with pytest.raises(NameConflict) as refused:
        workbench.equip("Adder")
    assert refused.value.details["name"] == "Adder" and "adder" in refused.value.message
    assert [t.name for t in workbench.equipped_tools()] == ["adder"]


async def test_unequip_removes_the_tool_from_the_set_and_tells_listeners(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    workbench.equip(tool.name)
    events = record(workbench)
    assert not workbench.unequip(tool.name).equipped
    assert workbench.equipped_tools() == []
    assert [e.kind for e in events] == ["unequipped"]
    assert events[0].changes_tool_list


async def test_deleting_an_equipped_tool_unequips_it_and_changes_the_tool_list(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    workbench.equip(tool.name)
    events = record(workbench)
    workbench.delete(tool.name)
    assert workbench.equipped_tools() == []
    assert events[0].kind == "deleted" and events[0].changes_tool_list


async def test_maintenance_that_archives_an_equipped_tool_unequips_it(workbench: Workbench, clock: ManualClock) -> None:
    tool = await workbench.craft(add_tool())
    workbench.equip(tool.name)
    events = record(workbench)
    clock.advance(days=workbench.config.memory.archive_days_short + 1)
    workbench.maintain()
    assert workbench.equipped_tools() == []
    assert workbench.store.get(tool.tool_id).status == "archived"  # type: ignore[union-attr]
    assert any(e.changes_tool_list for e in events)
    with pytest.raises(NotEquippable):
        workbench.equip(tool.name)


async def test_long_term_tools_are_equipped_automatically_when_configured(tmp_path: Path) -> None:
    config = auto_equip_config(tmp_path)
    async with Workbench(config) as workbench:
        tool = await workbench.craft(add_tool())
        await workbench.call(tool.name, {"a": 1, "b": 1})
        assert workbench.equipped_tools() == []
        await workbench.call(tool.name, {"a": 1, "b": 1})
        assert [t.name for t in workbench.equipped_tools()] == ["add_numbers"]


async def test_a_long_term_tool_with_a_root_combinator_is_not_auto_equipped(tmp_path: Path) -> None:
    config = Config(
        inventory_path=tmp_path / "inv.db",
        auto_equip_long_term=True,
        memory=MemoryConfig(promotion_threshold_medium=1, promotion_threshold_long=1),
    )
    either = {**ADD_SCHEMA, "required": [], "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    async with Workbench(config) as workbench:
        tool = await workbench.craft(add_tool(input_schema=either))
        result = await workbench.call(tool.name, {"a": 1, "b": 1})
        assert result.memory_level == "long_term"
        assert workbench.equipped_tools() == []


async def test_long_term_tools_are_not_equipped_by_default(tmp_path: Path) -> None:
    config = Config(
        inventory_path=tmp_path / "inv.db",
        memory=MemoryConfig(promotion_threshold_medium=1, promotion_threshold_long=1),
    )
    async with Workbench(config) as workbench:
        tool = await workbench.craft(add_tool())
        result = await workbench.call(tool.name, {"a": 1, "b": 1})
        assert result.memory_level == "long_term"
        assert workbench.equipped_tools() == []


# --- near-duplicates ------------------------------------------------------------------------------


async def test_similar_scores_a_near_duplicate_high_and_an_unrelated_tool_low(workbench: Workbench) -> None:
    await workbench.craft(add_tool("add_numbers"))
    await workbench.craft({**UPPER, "name": "upper_case"})
    similar = workbench.similar("sum_numbers", "Add two numbers and return the sum")
    assert similar[0].name == "add_numbers"
    assert similar[0].score is not None and similar[0].score >= 0.85
    assert all(s.name != "upper_case" for s in similar)


async def test_dedupe_warn_admits_a_duplicate(workbench: Workbench) -> None:
    await workbench.craft(add_tool("add_numbers"))
    copy = await workbench.craft(add_tool("add_numbers_again"))
    assert copy.name == "add_numbers_again"


async def test_dedupe_reject_refuses_a_duplicate_and_names_the_existing_tool(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", dedupe="reject")
    async with Workbench(config) as workbench:
        original = await workbench.craft(add_tool("add_numbers"))
        with pytest.raises(DuplicateTool) as raised:
            await workbench.craft(add_tool("sum_numbers"))
        assert raised.value.details["tool_id"] == original.tool_id
        assert raised.value.details["name"] == "add_numbers"
        assert "add_numbers" in raised.value.message
        assert (await workbench.craft({**UPPER, "name": "upper_case"})).name == "upper_case"


# --- purge ----------------------------------------------------------------------------------------


async def test_a_new_version_of_an_archived_tool_restarts_its_purge_clock(
    workbench: Workbench, clock: ManualClock
) -> None:
    tool = await workbench.craft(add_tool())
    clock.advance(days=61)
    workbench.maintain()
    clock.advance(days=10)
    await workbench.update(tool.name, description="Add two numbers, newly described")
    assert workbench.resolve(tool.tool_id).status == "archived"  # a new version is no call: still archived
    assert workbench.purge(archived_before_days=5, dry_run=True) == []
    clock.advance(days=6)
    assert [t.tool_id for t in workbench.purge(archived_before_days=5, dry_run=True)] == [tool.tool_id]


async def test_purge_removes_tools_archived_long_enough_and_dry_run_only_lists(
    workbench: Workbench, clock: ManualClock
) -> None:
    old = await workbench.craft(add_tool("old_tool"))
    clock.advance(days=workbench.config.memory.archive_days_short + 1)
    workbench.maintain()
    clock.advance(days=10)
    await workbench.craft({**UPPER, "name": "fresh_tool"})
    planned = workbench.purge(archived_before_days=5, dry_run=True)
    assert [t.tool_id for t in planned] == [old.tool_id]
    assert workbench.store.get(old.tool_id) is not None
    assert workbench.purge(archived_before_days=30) == []
    removed = workbench.purge(archived_before_days=5)
    assert [t.tool_id for t in removed] == [old.tool_id]
    assert workbench.store.get(old.tool_id) is None
    assert workbench.store.versions(old.tool_id) == []
    assert workbench.store.calls(old.tool_id) == []
    assert [t.name for t in workbench.list_tools()] == ["fresh_tool"]


async def test_purge_of_deleted_tools_removes_soft_deleted_records(workbench: Workbench) -> None:
    gone = await workbench.craft(add_tool("gone"))
    await workbench.call("gone", {"a": 1, "b": 2})
    workbench.delete("gone")
    kept = await workbench.craft({**UPPER, "name": "kept"})
    assert [t.tool_id for t in workbench.purge(deleted=True)] == [gone.tool_id]
    assert workbench.store.get(gone.tool_id) is None
    assert workbench.store.get(kept.tool_id) is not None


async def test_purge_without_a_target_is_invalid(workbench: Workbench) -> None:
    with pytest.raises(InvalidParams):
        workbench.purge()


@pytest.mark.parametrize("days", [-1.0, float("nan"), float("inf"), 1e300])
async def test_purge_takes_a_number_of_days_it_can_count_back(workbench: Workbench, days: float) -> None:
    with pytest.raises(InvalidParams, match="from 0 to 36500"):
        workbench.purge(archived_before_days=days)


async def test_purge_from_the_cli_refuses_without_a_terminal_and_removes_with_yes(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inventory.db")
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("doomed"))
        workbench.delete("doomed")
    refused = subprocess.run(
        [sys.executable, "-m", "awb", "inventory", "purge", "--deleted"],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 2 and refused.stderr.startswith("error (usage_error): ") and "--yes" in refused.stderr
    assert "doomed" in refused.stdout
    done = subprocess.run(
        [sys.executable, "-m", "awb", "inventory", "purge", "--deleted", "--yes", "--json"],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"count": 1' in done.stdout
    async with Workbench(config) as workbench:
        assert workbench.purge(deleted=True, dry_run=True) == []


async def test_purge_as_json_asked_at_a_terminal_keeps_stdout_json(tmp_path: Path) -> None:
    # `out=$(awb inventory purge --deleted --json)` at a terminal: the question goes to stderr, where the
    # person sees it; on stdout it was captured (the command seemed to hang) and put before the JSON.
    config = Config(inventory_path=tmp_path / "inventory.db")
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("doomed"))
        workbench.delete("doomed")
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "awb", "inventory", "purge", "--deleted", "--json"],
            env=awb_env(tmp_path),
            cwd=tmp_path,
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(terminal)
        os.write(controller, b"y\n")
        stdout, stderr = process.communicate(timeout=60)
    finally:
        os.close(controller)
    assert process.returncode == 0, stderr
    assert "remove this tool for good?" in stderr
    assert json.loads(stdout)["count"] == 1


#: A root combinator: callable, but not servable as a tool of its own.
COMBINATOR_SCHEMA = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["x"]}]}


async def test_refusals_word_the_way_to_a_tool_as_the_asking_face_does(tmp_path: Path) -> None:
    # The CLI and the panel serve no MCP tools: a refusal they show names their own command, or the meta-tool
    # where it is served; the MCP face (no `names`) names the meta-tool it serves, as before.
    config = Config(
        inventory_path=tmp_path / "inv.db", tool_names="dotted", dedupe="reject", search=SearchConfig(mode="text")
    )
    clock = ManualClock()
    words = worded_by({"equip": "awb inventory equip"}, "dotted")
    async with Workbench(config, clock=clock) as workbench:
        await workbench.craft({**UPPER, "name": "upper"})
        await workbench.craft(
            {
                "name": "picker",
                "description": "Say which of two keys was given",
                "code": "def run(params):\n    return sorted(params)\n",
                "input_schema": COMBINATOR_SCHEMA,
            }
        )
        refusals = []
        for names in (words, None):
            with pytest.raises(NotEquippable) as schema:
                workbench.equip("picker", names=names)
            workbench.equip("upper")
            with pytest.raises(NotEquippable) as update:
                await workbench.update("upper", input_schema=COMBINATOR_SCHEMA, names=names)
            with pytest.raises(DuplicateTool) as duplicate:
                await workbench.craft({**UPPER, "name": "uppercase"}, names=names)
            refusals.append((schema.value, update.value, duplicate.value))
        clock.advance(days=config.memory.archive_days_short + 1)
        workbench.maintain()
        with pytest.raises(NotEquippable) as archived:
            workbench.equip("upper", names=words)
    (schema, update, duplicate), (mcp_schema, mcp_update, mcp_duplicate) = refusals
    assert "It stays callable with awb.call over MCP; to equip it" in schema.message
    assert "Unequip it first (it stays callable with awb.call over MCP)" in update.message
    assert duplicate.message.endswith("reuse it, or update it with awb.update over MCP")
    assert "is archived; call it once (awb.call over MCP) to bring it back" in archived.value.message
    assert "It stays callable with awb.call; to equip it" in mcp_schema.message
    assert "Unequip it first (it stays callable with awb.call)" in mcp_update.message
    assert mcp_duplicate.message.endswith("reuse it, or update it with awb.update")
    # The same codes and details whoever asks: only the words differ.
    for worded, served in zip((schema, update, duplicate), (mcp_schema, mcp_update, mcp_duplicate), strict=True):
        assert (worded.code, worded.details) == (served.code, served.details)


async def _call_while(workbench: Workbench, tool_id: str, change: Callable[[], object]) -> CallResult:
    """Call `tool_id` and, while it runs, make `change`; the call's result."""
    results: list[CallResult] = []

    async def call() -> None:
        results.append(await workbench.call(tool_id, {"a": 1, "b": 2}))

    async def meanwhile() -> None:
        await anyio.sleep(0)  # the call has read its tool and is running
        change()

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        group.start_soon(meanwhile)
    return results[0]


async def test_a_call_that_reaches_long_term_while_the_tool_is_equipped_meanwhile_succeeds(tmp_path: Path) -> None:
    # Auto-equip read the tool as the call found it (not equipped), met itself in the equipped set and
    # failed the call, which had run and been counted, with name_conflict.
    config = auto_equip_config(tmp_path)
    async with Workbench(config) as workbench:
        tool = await workbench.craft(add_tool())
        await workbench.call(tool.tool_id, {"a": 1, "b": 1})
        result = await _call_while(workbench, tool.tool_id, lambda: workbench.equip(tool.tool_id))
        assert (result.result, result.memory_level) == (3, "long_term")
        assert [t.tool_id for t in workbench.equipped_tools()] == [tool.tool_id]


async def test_a_tool_unequipped_while_a_call_takes_it_to_long_term_is_auto_equipped(tmp_path: Path) -> None:
    # The rule: a tool that reaches long-term memory is equipped while there is room. Auto-equip read
    # the tool as the call found it (equipped) and left it out of the set.
    config = auto_equip_config(tmp_path)
    async with Workbench(config) as workbench:
        tool = await workbench.craft(add_tool())
        workbench.equip(tool.tool_id)
        await workbench.call(tool.tool_id, {"a": 1, "b": 1})
        result = await _call_while(workbench, tool.tool_id, lambda: workbench.unequip(tool.tool_id))
        assert result.memory_level == "long_term"
        assert [t.tool_id for t in workbench.equipped_tools()] == [tool.tool_id]


def auto_equip_config(tmp_path: Path) -> Config:
    """Auto-equip on, long term at a tool's second call."""
    return Config(
        inventory_path=tmp_path / "inv.db",
        auto_equip_long_term=True,
        memory=MemoryConfig(promotion_threshold_medium=1, promotion_threshold_long=2),
    )


async def test_an_equipped_tool_is_not_rolled_back_to_a_version_it_cannot_be_listed_with(
    workbench: Workbench,
) -> None:
    # An update to such a schema is refused while the tool is equipped; a rollback to an earlier version with
    # one made it drop out of every client's tool list without a word.
    await workbench.craft(
        {
            "name": "picker",
            "description": "Say which of two keys was given",
            "code": "def run(params):\n    return sorted(params)\n",
            "input_schema": COMBINATOR_SCHEMA,
        }
    )
    await workbench.update("picker", input_schema={"type": "object"})
    workbench.equip("picker")
    with pytest.raises(NotEquippable) as refused:
        workbench.rollback("picker", 1)
    assert refused.value.details["rule"] == "input_schema_root" and "Unequip it first" in refused.value.message
    assert workbench.resolve("picker").version == 2
    assert [t.name for t in workbench.equipped_tools()] == ["picker"]
    workbench.unequip("picker")
    assert workbench.rollback("picker", 1).version == 1
