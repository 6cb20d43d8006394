"""A model-based test of the tool lifecycle: random sequences of craft, call, update, rollback, delete,
equip, unequip and clock-driven maintenance on a real workbench, checked after every step against a
plain reference model of the README's rules (Memory tiers; Equipped tools, versions and near-duplicates).

CI runs a small, derandomized budget; hunting locally runs the same machine with more examples
(`run_state_machine_as_test(LifecycleModel, settings=settings(max_examples=..., ...))`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from awb.clock import ManualClock
from awb.config import Config, MemoryConfig, SandboxConfig, SearchConfig
from awb.errors import (
    AwbError,
    InvalidParams,
    LimitExceeded,
    NameConflict,
    NotEquippable,
    ToolDeleted,
    ToolNotFound,
    ToolRuntimeError,
)
from awb.inventory.rows import versions_past
from awb.workbench import Workbench

# Small thresholds, so a few dozen steps cross every tier boundary and every cap.
MEDIUM_AT, LONG_AT = 2, 4
DEMOTE_DAYS, ARCHIVE_DAYS = 3, 5
MAX_EQUIPPED, MAX_VERSIONS, MAX_DELETED, MAX_TOOLS = 2, 3, 2, 3
NAMES = ("alpha", "beta", "gamma", "delta")
SCHEMA = {"type": "object", "properties": {"fail": {"type": "boolean"}}}
#: Tool picks are indexes into every tool crafted so far (modulo their number), purged ones included.
PICK = st.integers(0, 7)


def code(constant: int) -> str:
    """A version's code: it returns its own constant, so a call shows which version ran."""
    return f"def run(params):\n    if params.get('fail'):\n        raise ValueError('asked to fail')\n    return {constant}\n"


def config(folder: Path, maintenance_every_calls: int = 0) -> Config:
    return Config(
        inventory_path=folder / "inventory.db",
        pid_file=folder / "awb.pid",
        search=SearchConfig(mode="text"),
        sandbox=SandboxConfig(python_runtime="monty"),
        memory=MemoryConfig(
            promotion_threshold_medium=MEDIUM_AT,
            promotion_threshold_long=LONG_AT,
            demotion_days_medium_to_short=DEMOTE_DAYS,
            archive_days_short=ARCHIVE_DAYS,
            maintenance_every_calls=maintenance_every_calls,
        ),
        max_equipped=MAX_EQUIPPED,
        max_versions_per_tool=MAX_VERSIONS,
        max_deleted_tools=MAX_DELETED,
        max_tools=MAX_TOOLS,
        auto_equip_long_term=True,
    )


@dataclass
class ModelTool:
    """What the README's rules say one tool's record holds after the steps so far."""

    tool_id: str
    name: str
    created_at: datetime
    constants: dict[int, int]
    level: str = "short_term"
    status: str = "active"  # active, archived, deleted or purged (gone from the store)
    equipped: bool = False
    successes: int = 0
    failures: int = 0
    last_used: datetime | None = None
    current: int = 1
    newest: int = 1
    kept: list[int] = field(default_factory=lambda: [1])
    version_calls: dict[int, int] = field(default_factory=dict)
    version_failures: dict[int, int] = field(default_factory=dict)
    deleted_at: datetime | None = None
    #: When the tool was archived, or last given a version since (what `purge(archived_before_days=)` measures).
    archived_at: datetime | None = None


class LifecycleModel(RuleBasedStateMachine):
    #: Maintenance runs by itself every this many calls (0: only when the model runs it).
    AUTO_EVERY = 0

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="awb-lifecycle-"))
        self.clock = ManualClock()
        self._portal_cm = start_blocking_portal("asyncio")
        self.portal = self._portal_cm.__enter__()
        self.workbench = self.open()
        self.tools: list[ModelTool] = []
        self.calls_counted = 0

    def open(self) -> Workbench:
        workbench = Workbench(config(self.folder, self.AUTO_EVERY), clock=self.clock)
        self.portal.call(workbench.start)
        return workbench

    def teardown(self) -> None:
        try:
            self.portal.call(self.workbench.close)
        finally:
            self._portal_cm.__exit__(None, None, None)
            shutil.rmtree(self.folder, ignore_errors=True)

    # --- helpers --------------------------------------------------------------------------------

    def run(self, action: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, AwbError | None]:
        """Run one workbench action on its event loop: its result, or the AwbError it raised (anything
        else fails the test)."""

        async def step() -> Any:
            value = action(*args, **kwargs)
            if hasattr(value, "__await__"):
                value = await value
            return value

        try:
            return self.portal.call(step), None
        except AwbError as exc:
            return None, exc

    def pick(self, index: int) -> ModelTool:
        return self.tools[index % len(self.tools)]

    def ref(self, tool: ModelTool, by_name: bool) -> str:
        # A name names the live tool that holds it; a deleted one is named by its id.
        return tool.name if by_name and tool.status in ("active", "archived") else tool.tool_id

    def expect_gone(self, tool: ModelTool, error: AwbError | None) -> bool:
        """When `tool` is deleted or purged, the error every action but inspect gives; True when so."""
        if tool.status == "purged":
            assert isinstance(error, ToolNotFound), error
            return True
        if tool.status == "deleted":
            assert isinstance(error, ToolDeleted), error
            return True
        return False

    def equipped(self) -> set[str]:
        return {t.tool_id for t in self.tools if t.equipped}

    def live(self) -> list[ModelTool]:
        return [t for t in self.tools if t.status in ("active", "archived")]

    # --- rules ----------------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), constant=st.integers(0, 3))
    def craft(self, name: str, constant: int) -> None:
        request = {
            "name": name,
            "description": f"Return the number kept by {name}",
            "code": code(constant),
            "input_schema": SCHEMA,
        }
        tool, error = self.run(self.workbench.craft, request)
        if any(t.name == name for t in self.live()):
            assert isinstance(error, NameConflict), error
            return
        if len(self.live()) >= MAX_TOOLS:  # archived tools are live: they count
            assert isinstance(error, LimitExceeded), error
            return
        assert error is None, error
        assert (tool.version, tool.memory_level, tool.status, tool.usage_count) == (1, "short_term", "active", 0)
        self.tools.append(ModelTool(tool.tool_id, name, self.clock.now(), {1: constant}))

    @precondition(lambda self: self.tools)
    @rule(index=PICK, fail=st.booleans(), by_name=st.booleans())
    def call(self, index: int, fail: bool, by_name: bool) -> None:
        tool = self.pick(index)
        result, error = self.run(self.workbench.call, self.ref(tool, by_name), {"fail": fail})
        if self.expect_gone(tool, error):
            return
        self.called(tool, result, error, fail)
        assert result is None or (result.memory_level, result.usage_count) == (tool.level, tool.successes)
        if self.AUTO_EVERY:
            self.portal.call(self.workbench.upkeep.settled)
            if self.calls_counted % self.AUTO_EVERY == 0:
                self.maintained()

    @precondition(lambda self: self.tools and not self.AUTO_EVERY)
    @rule(index=PICK, fails=st.lists(st.booleans(), min_size=2, max_size=4))
    def call_together(self, index: int, fails: list[bool]) -> None:
        """Calls at once are recorded together (one transaction per group): each is counted all the same."""
        tool = self.pick(index)

        async def together() -> list[Any]:
            outcomes: list[Any] = [None] * len(fails)

            async def one(i: int) -> None:
                try:
                    outcomes[i] = await self.workbench.call(tool.tool_id, {"fail": fails[i]})
                except AwbError as exc:
                    outcomes[i] = exc

            async with anyio.create_task_group() as group:
                for i in range(len(fails)):
                    group.start_soon(one, i)
            return outcomes

        outcomes = self.portal.call(together)
        if tool.status in ("deleted", "purged"):
            for outcome in outcomes:
                self.expect_gone(tool, outcome)
            return
        before = tool.successes
        for fail, outcome in zip(fails, outcomes, strict=True):
            self.called(tool, None if fail else outcome, outcome if fail else None, fail)
        counted = sorted(o.usage_count for o in outcomes if not isinstance(o, AwbError))
        assert counted == list(range(before + 1, tool.successes + 1))

    @precondition(lambda self: self.tools and not self.AUTO_EVERY)
    @rule(index=PICK, other=st.sampled_from(["delete", "rollback", "equip", "unequip"]), to_version=st.integers(1, 4))
    def call_while_changed(self, index: int, other: str, to_version: int) -> None:
        """A call runs the version it resolved; a delete, rollback, equip or unequip made while it runs
        stands, and the call is counted to the version it ran."""
        tool = self.pick(index)
        if tool.status not in ("active", "archived"):
            return
        version = tool.current
        outcomes: dict[str, Any] = {}

        async def race() -> None:
            async def call() -> None:
                try:
                    outcomes["call"] = await self.workbench.call(tool.tool_id, {"fail": False})
                except AwbError as exc:
                    outcomes["call"] = exc

            async def change() -> None:
                await anyio.sleep(0)  # the call has resolved its tool and is running
                try:
                    if other == "rollback":
                        outcomes[other] = self.workbench.rollback(tool.tool_id, to_version)
                    else:
                        outcomes[other] = getattr(self.workbench, other)(tool.tool_id)
                except AwbError as exc:
                    outcomes[other] = exc

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                group.start_soon(change)

        self.portal.call(race)
        outcome = outcomes[other]
        if other == "delete":
            assert not isinstance(outcome, AwbError), outcome
            tool.status, tool.equipped, tool.deleted_at = "deleted", False, self.clock.now()
            self.purged_past_max_deleted()
        elif other == "rollback":
            if to_version not in tool.kept:
                assert isinstance(outcome, InvalidParams), outcome
            else:
                assert not isinstance(outcome, AwbError), outcome
                if to_version != tool.current:
                    self.touched(tool)
                tool.current = to_version
        elif other == "equip":
            if tool.status == "archived":
                assert isinstance(outcome, NotEquippable), outcome
            elif not tool.equipped and len(self.equipped()) >= MAX_EQUIPPED:
                assert isinstance(outcome, LimitExceeded), outcome
            else:
                assert not isinstance(outcome, AwbError), outcome
                tool.equipped = True
        else:
            assert not isinstance(outcome, AwbError), outcome
            tool.equipped = False
        if tool.status == "purged":
            return  # its calls count nothing
        self.called(tool, outcomes["call"], None, False, version=version)

    def called(
        self, tool: ModelTool, result: Any, error: AwbError | None, fail: bool, *, version: int | None = None
    ) -> None:
        """One call of a tool, as the model counts it (`version`: the one it ran, when not the current one)."""
        self.calls_counted += 1
        version = tool.current if version is None else version
        tool.version_calls[version] = tool.version_calls.get(version, 0) + 1
        if fail:
            assert isinstance(error, ToolRuntimeError), error
            tool.failures += 1
            tool.version_failures[version] = tool.version_failures.get(version, 0) + 1
            return
        assert error is None, error
        assert (result.tool_id, result.version, result.result) == (tool.tool_id, version, tool.constants[version])
        tool.successes += 1
        tool.last_used = self.clock.now()
        before = tool.level
        if tool.status == "archived":  # a call brings an archived tool back
            tool.status, tool.archived_at = "active", None
        if tool.level == "archived":  # (one deleted while the call ran keeps its status, not its tier)
            tool.level = "short_term"
        if tool.level == "short_term" and tool.successes >= MEDIUM_AT:
            tool.level = "medium_term"
        if tool.level == "medium_term" and tool.successes >= LONG_AT:
            tool.level = "long_term"
        if (
            tool.level != before
            and tool.level == "long_term"
            and tool.status == "active"
            and len(self.equipped()) < MAX_EQUIPPED
        ):
            tool.equipped = True  # auto_equip_long_term, while there is room

    @precondition(lambda self: self.tools)
    @rule(index=PICK, constant=st.integers(0, 3), by_name=st.booleans())
    def update(self, index: int, constant: int, by_name: bool) -> None:
        tool = self.pick(index)
        updated, error = self.run(self.workbench.update, self.ref(tool, by_name), code=code(constant))
        if self.expect_gone(tool, error):
            return
        assert error is None, error
        if tool.constants[tool.current] == constant:  # the current version again: nothing stored
            assert (updated.version, updated.parent_version) == (tool.current, tool.current)
            return
        tool.newest += 1
        new = tool.newest
        assert (updated.version, updated.parent_version) == (new, tool.current)
        tool.constants[new] = constant
        doomed = versions_past([*tool.kept, new], MAX_VERSIONS, {new})
        tool.kept = [v for v in [*tool.kept, new] if v not in doomed]
        tool.current = new
        self.touched(tool)

    @precondition(lambda self: self.tools)
    @rule(index=PICK, to_version=st.integers(1, 8), by_name=st.booleans())
    def rollback(self, index: int, to_version: int, by_name: bool) -> None:
        tool = self.pick(index)
        moved, error = self.run(self.workbench.rollback, self.ref(tool, by_name), to_version)
        if self.expect_gone(tool, error):
            return
        if to_version not in tool.kept:
            assert isinstance(error, InvalidParams), error
            assert error.details["versions"] == tool.kept
            return
        assert error is None, error
        assert (moved.version, moved.parent_version) == (to_version, tool.current)
        if to_version != tool.current:
            self.touched(tool)
        tool.current = to_version

    def touched(self, tool: ModelTool) -> None:
        if tool.status == "archived":  # a new current version: the tool is worked on, not forgotten
            tool.archived_at = self.clock.now()

    @precondition(lambda self: self.tools)
    @rule(index=PICK, by_name=st.booleans())
    def delete(self, index: int, by_name: bool) -> None:
        tool = self.pick(index)
        _, error = self.run(self.workbench.delete, self.ref(tool, by_name))
        if self.expect_gone(tool, error):
            return
        assert error is None, error
        tool.status, tool.equipped, tool.deleted_at = "deleted", False, self.clock.now()
        self.purged_past_max_deleted()

    def purged_past_max_deleted(self) -> None:
        # Past max_deleted_tools, the longest-deleted are purged; tools deleted at the same moment tie,
        # so which of those goes is read from the store and only the count and the order are checked.
        deleted = [t for t in self.tools if t.status == "deleted"]
        purged = [t for t in deleted if self.workbench.store.get(t.tool_id) is None]
        assert len(purged) == max(0, len(deleted) - MAX_DELETED), [t.name for t in purged]
        for gone in purged:
            assert all(gone.deleted_at <= t.deleted_at for t in deleted if t not in purged)  # type: ignore[operator]
            gone.status = "purged"

    @precondition(lambda self: self.tools)
    @rule(index=PICK, by_name=st.booleans())
    def equip(self, index: int, by_name: bool) -> None:
        tool = self.pick(index)
        _, error = self.run(self.workbench.equip, self.ref(tool, by_name))
        if self.expect_gone(tool, error):
            return
        if tool.status == "archived":
            assert isinstance(error, NotEquippable), error
        elif not tool.equipped and len(self.equipped()) >= MAX_EQUIPPED:
            assert isinstance(error, LimitExceeded), error
        else:
            assert error is None, error
            tool.equipped = True

    @precondition(lambda self: self.tools)
    @rule(index=PICK, by_name=st.booleans())
    def unequip(self, index: int, by_name: bool) -> None:
        tool = self.pick(index)
        _, error = self.run(self.workbench.unequip, self.ref(tool, by_name))
        if self.expect_gone(tool, error):
            return
        assert error is None, error
        tool.equipped = False

    @rule(days=st.sampled_from([0.5, 1, 2, 3, 6]))
    def advance_and_maintain(self, days: float) -> None:
        self.clock.advance(days=days)
        changes, error = self.run(self.workbench.maintain)
        assert error is None, error
        assert {(c.tool_id, c.before, c.after) for c in changes} == self.maintained()

    @rule(days=st.sampled_from([0.5, 2, 7]))
    def advance(self, days: float) -> None:
        self.clock.advance(days=days)

    def maintained(self) -> set[tuple[str, str, str]]:
        """Maintenance as the README says it: the moves it makes."""
        now = self.clock.now()
        moves = set()
        for tool in self.tools:
            if tool.status != "active":
                continue
            idle = now - (tool.last_used or tool.created_at)
            if tool.level == "medium_term" and idle >= timedelta(days=DEMOTE_DAYS):
                moves.add((tool.tool_id, "medium_term", "short_term"))
                tool.level = "short_term"
            elif tool.level == "short_term" and idle >= timedelta(days=ARCHIVE_DAYS):
                moves.add((tool.tool_id, "short_term", "archived"))
                tool.level, tool.status, tool.equipped, tool.archived_at = "archived", "archived", False, now
        return moves

    @rule(days=st.sampled_from([0, 1, 4]), deleted=st.booleans())
    def purge(self, days: float, deleted: bool) -> None:
        """Archived tools archived (or given a version since) more than `days` days ago go, and soft-deleted ones when asked."""
        cutoff = self.clock.now() - timedelta(days=days)
        removed, error = self.run(self.workbench.purge, archived_before_days=days, deleted=deleted)
        assert error is None, error
        doomed = {
            t.tool_id
            for t in self.tools
            if (t.status == "archived" and t.archived_at < cutoff) or (deleted and t.status == "deleted")  # type: ignore[operator]
        }
        assert {s.tool_id for s in removed} == doomed
        for tool in self.tools:
            if tool.tool_id in doomed:
                tool.status, tool.equipped = "purged", False

    @rule()
    def reopen(self) -> None:
        """Everything the model holds is in the inventory, not in one workbench's memory."""
        self.portal.call(self.workbench.close)
        self.workbench = self.open()
        self.calls_counted = 0  # each workbench counts its own calls towards automatic maintenance

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def every_record_is_what_the_model_says(self) -> None:
        for tool in self.tools:
            seen, error = self.run(self.workbench.inspect, tool.tool_id)
            if tool.status == "purged":
                assert isinstance(error, ToolNotFound), error
                continue
            assert error is None, error
            record = seen.tool
            assert (record.status, record.memory_level, record.equipped) == (tool.status, tool.level, tool.equipped)
            assert (record.usage_count, record.success_count, record.failure_count) == (
                tool.successes,
                tool.successes,
                tool.failures,
            )
            assert record.last_used_at == tool.last_used
            assert (record.version, record.code) == (tool.current, code(tool.constants[tool.current]))
            assert [v.version for v in seen.versions] == tool.kept
            for version in seen.versions:
                assert version.code == code(tool.constants[version.version])
                assert version.usage_count == tool.version_calls.get(version.version, 0)
                assert version.failure_count == tool.version_failures.get(version.version, 0)

    @invariant()
    def listing_search_and_equipped_set_hold_exactly_the_live_tools(self) -> None:
        live = {t.tool_id for t in self.live()}
        page, error = self.run(self.workbench.list_page, limit=1000)
        assert error is None, error
        assert {s.tool_id for s in page.tools} == live
        assert page.total == len(live) == len(page.tools)
        for level in ("short_term", "medium_term", "long_term", "archived"):
            page, _ = self.run(self.workbench.list_page, memory_level=level, limit=1000)
            assert page.total == sum(1 for t in self.live() if t.level == level)
        for name in NAMES:
            page, _ = self.run(self.workbench.list_page, query=name, limit=1000)
            assert {s.tool_id for s in page.tools} == {t.tool_id for t in self.live() if t.name == name}
            assert page.total == len(page.tools)
        found, error = self.run(self.workbench.search, "number kept", limit=1000)
        assert error is None, error
        assert {s.tool_id for s in found.results} == live
        levels = [s.memory_level == "archived" for s in found.results]
        assert levels == sorted(levels), "archived tools rank after live ones"
        whole, _ = self.run(self.workbench.list_page, limit=1000)
        paged: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page, _ = self.run(self.workbench.list_page, limit=2, offset=offset)
            assert page.total == len(live)
            paged += [s.tool_id for s in page.tools]
            offset = page.next_offset
        assert paged == [s.tool_id for s in whole.tools]
        equipped, _ = self.run(self.workbench.equipped_tools)
        assert {t.tool_id for t in equipped} == self.equipped()


LifecycleModel.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    derandomize=True,  # the same sequences on every run: CI never flakes on a new one
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_tool_lifecycle_follows_the_documented_rules = LifecycleModel.TestCase


class AutomaticMaintenanceModel(LifecycleModel):
    """The same rules with maintenance also running by itself every few calls, in its worker thread."""

    AUTO_EVERY = 3


AutomaticMaintenanceModel.TestCase.settings = LifecycleModel.TestCase.settings
test_maintenance_every_few_calls_follows_the_same_rules = AutomaticMaintenanceModel.TestCase
