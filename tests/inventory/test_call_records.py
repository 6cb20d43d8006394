"""Calls are recorded in groups: the runs that end in the same few turns of the event loop share one
write transaction, each call still gets its own counters, and one bad record costs only itself."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from test_store_contract import NOW, make_tool

from awb.call_recorder import GATHER_TURNS, CallRecorder
from awb.config import Config
from awb.inventory.lane import StoreLane
from awb.inventory.memory import MemoryPolicy
from awb.inventory.models import CallRecord, MemoryLevel, ToolCounters
from awb.inventory.sqlite import SQLiteStore
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


def call(n: int, *, tool_id: str = "tool_rec", call_id: str | None = None) -> CallRecord:
    return CallRecord(
        call_id=call_id or f"call_{n}",
        tool_id=tool_id,
        version=1,
        at=NOW + timedelta(seconds=n),
        duration_ms=1.0,
        ok=True,
    )


async def test_concurrent_calls_share_write_transactions_and_each_gets_its_own_count(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    config.sandbox.max_concurrent = 16
    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("grouped"))
        assert isinstance(workbench.store, SQLiteStore)
        executed: list[str] = []
        workbench.store._db.set_trace_callback(executed.append)
        results = []

        async def one() -> None:
            results.append(await workbench.call("grouped", {"a": 1, "b": 2}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(16):
                    group.start_soon(one)
        workbench.store._db.set_trace_callback(None)
        inserts = sum(1 for sql in executed if sql.startswith("INSERT INTO calls"))
        transactions = sum(1 for sql in executed if sql == "BEGIN IMMEDIATE")
        assert inserts == 16
        assert transactions < inserts  # some runs ended in the same turn and were written together
        assert sorted(r.usage_count for r in results) == list(range(1, 17))
        tool = workbench.resolve("grouped")
        assert (tool.usage_count, tool.success_count) == (16, 16)
        assert len(workbench.store.calls(tool.tool_id, limit=100)) == 16


def test_a_bad_record_in_a_group_costs_only_itself(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "inv.db")
    try:
        store.add_tool(make_tool("rec"))
        duplicate = call(2, call_id="call_1")  # call ids are unique: this record cannot be written
        results = store.record_calls([call(1), duplicate, call(3)])
        assert isinstance(results[1], sqlite3.IntegrityError)
        assert [r.usage_count for r in results if isinstance(r, ToolCounters)] == [1, 2]
        tool = store.get("tool_rec")
        assert tool is not None and tool.usage_count == 2
        assert sorted(c.call_id for c in store.calls("tool_rec")) == ["call_1", "call_3"]
        # Alone, a bad record is its own error too, never an exception out of record_calls.
        [alone] = store.record_calls([call(4, call_id="call_3")])
        assert isinstance(alone, sqlite3.IntegrityError)
    finally:
        store.close()


def _pages_written(store: SQLiteStore, write: Callable[[], object]) -> list[str]:
    """The b-trees (tables and indexes) whose pages `write` put in the WAL, from its frames' page numbers."""
    db = store._db
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    write()
    frames = Path(f"{store.path}-wal").read_bytes()
    page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
    numbers = {
        int.from_bytes(frames[at : at + 4], "big") for at in range(32, len(frames), page_size + 24)
    }  # each frame: a 24-byte header (its page number first), then the page
    owners = dict(db.execute("SELECT pageno, name FROM dbstat"))
    return sorted({owners.get(n, "?") for n in numbers})


def test_a_calls_record_rewrites_no_index_of_the_tools_name_or_status(tmp_path: Path) -> None:
    # Setting a column (even to its own value) rewrites every index on it or partial on it: the tool's name
    # and tier indexes are partial on status, and the record that counted a call set status on every call.
    store = SQLiteStore(tmp_path / "inv.db")
    try:
        if not store._db.execute("SELECT count(*) FROM pragma_module_list WHERE name = 'dbstat'").fetchone()[0]:
            pytest.skip("this SQLite has no dbstat table")
        store.add_tool(make_tool("rec"))
        written = _pages_written(store, lambda: store.record_calls([call(1)]))
        assert not {"tools_level", "tools_live_name", "tools_live_name_folded"} & set(written), written
        assert {"calls", "tools"} <= set(written)
    finally:
        store.close()


def test_a_success_brings_an_archived_tool_back_and_a_failure_does_not(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "inv.db")
    try:
        store.add_tool(make_tool("rec", memory_level="archived", status="archived"))
        failed = call(1, call_id="call_failed").model_copy(update={"ok": False, "error_code": "runtime_error"})
        [counted] = store.record_calls([failed])
        assert isinstance(counted, ToolCounters) and counted.status == "archived"
        tool = store.get("tool_rec")
        assert tool is not None and (tool.status, tool.failure_count) == ("archived", 1)
        results = store.record_calls([call(2), call(3)])
        assert [r.status for r in results if isinstance(r, ToolCounters)] == ["active", "active"]
        tool = store.get("tool_rec")
        assert tool is not None and (tool.status, tool.usage_count, tool.success_count) == ("active", 2, 2)
    finally:
        store.close()


class _Store:
    """Only what the recorder uses of a store: what it was asked to record, in which groups."""

    def __init__(self) -> None:
        self.groups: list[list[str]] = []

    def record_calls(
        self, calls: Sequence[CallRecord], *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> list[ToolCounters | Exception]:
        self.groups.append([c.call_id for c in calls])
        return [
            RuntimeError("the disk is full")
            if c.call_id == "call_bad"
            else ToolCounters(
                usage_count=i + 1,
                success_count=i + 1,
                failure_count=0,
                previous_level="short_term",
                memory_level="short_term",
                status="active",
            )
            for i, c in enumerate(calls)
        ]


async def test_the_recorder_groups_a_turn_and_reports_each_calls_own_outcome() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    first, bad, third = (
        asyncio.ensure_future(recorder.record(call(0, call_id=i))) for i in ("call_a", "call_bad", "call_c")
    )
    results = await asyncio.gather(first, bad, third, return_exceptions=True)
    assert store.groups == [["call_a", "call_bad", "call_c"]]
    assert isinstance(results[1], RuntimeError) and str(results[1]) == "the disk is full"
    assert [r.usage_count for r in (results[0], results[2])] == [1, 3]  # type: ignore[union-attr]
    # A later call alone is written in its own group, at the end of its own turn.
    alone = await recorder.record(call(0, call_id="call_d"))
    assert store.groups[-1] == ["call_d"] and alone.usage_count == 1


async def test_a_group_stays_open_while_each_turn_brings_it_more_calls() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    tasks = [asyncio.ensure_future(recorder.record(call(0, call_id=i))) for i in ("call_a", "call_b")]
    for n in range(2):  # two more calls, each ending a turn after the one before
        await asyncio.sleep(0)
        tasks.append(asyncio.ensure_future(recorder.record(call(0, call_id=f"call_{n}"))))
    results = await asyncio.gather(*tasks)
    assert store.groups == [["call_a", "call_b", "call_0", "call_1"]]
    assert [r.usage_count for r in results] == [1, 2, 3, 4]


async def test_a_group_fed_every_turn_is_written_within_gather_turns() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    tasks = []
    for n in range(4 * GATHER_TURNS):  # a call ending in every turn: the first group must not wait for them all
        tasks.append(asyncio.ensure_future(recorder.record(call(0, call_id=f"call_{n}"))))
        await asyncio.sleep(0)
    with anyio.fail_after(5):
        await asyncio.gather(*tasks)
    assert [c for group in store.groups for c in group] == [f"call_{n}" for n in range(4 * GATHER_TURNS)]
    assert len(store.groups) >= 3 and all(len(group) <= GATHER_TURNS + 1 for group in store.groups)


async def test_a_call_cancelled_while_its_record_waits_is_still_recorded() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    waiting = asyncio.ensure_future(recorder.record(call(0, call_id="call_left")))
    await asyncio.sleep(0)  # the task starts and waits for its record
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with anyio.fail_after(5):
        while not store.groups:
            await asyncio.sleep(0)
    assert store.groups == [["call_left"]]


async def _recorded_while_another_runs(recorder: CallRecorder, call_id: str) -> asyncio.Future[ToolCounters]:
    """`call_id`'s record, joined (and its group gathered) while another call still runs."""
    recording = asyncio.ensure_future(recorder.record(call(0, call_id=call_id)))
    for _ in range(GATHER_TURNS + 2):  # the group's gathering turns pass
        await asyncio.sleep(0)
    return recording


async def test_a_group_waits_for_a_call_still_running_and_is_written_when_it_joins() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    tool_ends = asyncio.Event()

    async def second() -> ToolCounters:  # as `Caller.call` does: the record joins as the run ends
        with recorder.running():
            await tool_ends.wait()
        return await recorder.record(call(0, call_id="call_second"))

    with anyio.fail_after(5):
        running = asyncio.ensure_future(second())
        first = await _recorded_while_another_runs(recorder, "call_first")
        assert store.groups == []  # held for the running call, not written alone
        tool_ends.set()
        results = await asyncio.gather(first, running)
    assert store.groups == [["call_first", "call_second"]]
    assert [r.usage_count for r in results] == [1, 2]


async def test_a_group_waits_for_a_running_call_only_up_to_its_window() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    with recorder.running():  # a call that goes on running past the window
        recording = await _recorded_while_another_runs(recorder, "call_first")
        with anyio.fail_after(5):
            assert (await recording).usage_count == 1
        assert store.groups == [["call_first"]]


async def test_a_call_alone_is_written_without_waiting_for_the_window() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    with recorder.running():
        pass  # a call that ran and left before the next one's record: nothing is running now
    recording = asyncio.ensure_future(recorder.record(call(0, call_id="call_alone")))
    for _ in range(GATHER_TURNS + 2):  # turns of the loop only: far less than the window
        await asyncio.sleep(0)
        if recording.done():
            break
    assert recording.done() and store.groups == [["call_alone"]]


async def test_flush_writes_a_group_held_for_running_calls_at_once() -> None:
    store = _Store()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory))  # type: ignore[arg-type]
    with recorder.running():
        recording = await _recorded_while_another_runs(recorder, "call_held")
        await recorder.flush()  # a workbench closing: its loop may stop before the window ends
        assert store.groups == [["call_held"]]
        assert (await recording).usage_count == 1


def test_a_group_counts_each_tool_once_and_each_call_reads_what_it_would_alone(tmp_path: Path) -> None:
    """Calls of two tools, successes and failures, an archived tool and a promotion mid-group: recorded
    together, every call gets the counters that recording them one at a time gives, and so do the tools."""

    def promote(level: MemoryLevel, uses: int) -> MemoryLevel:
        return "medium_term" if uses >= 2 else level

    def calls() -> list[CallRecord]:
        made = []
        for n, (tool, ok) in enumerate(
            [("a", False), ("b", True), ("a", True), ("a", False), ("a", True), ("b", False), ("a", True)]
        ):
            made.append(
                call(n, tool_id=f"tool_{tool}").model_copy(update={"ok": ok, "error_code": None if ok else "timeout"})
            )
        return made

    stores = []
    for name in ("together", "alone"):
        store = SQLiteStore(tmp_path / f"{name}.db")
        store.add_tool(make_tool("a", status="archived"))
        store.add_tool(make_tool("b", usage_count=5, success_count=5))
        stores.append(store)
    together, alone = stores
    try:
        executed: list[str] = []
        together._db.set_trace_callback(executed.append)
        grouped = together.record_calls(calls(), level_after=promote)
        together._db.set_trace_callback(None)
        one_by_one = [alone.record_call(c, level_after=promote) for c in calls()]
        # (The one difference: a failure before a success that brought an archived tool back reports the
        # status after the group.)
        assert [c.model_dump(exclude={"status"}) for c in grouped] == [  # type: ignore[union-attr]
            c.model_dump(exclude={"status"}) for c in one_by_one
        ]
        levels = ["short_term", "medium_term", "short_term", "short_term", "medium_term", "medium_term", "medium_term"]
        assert [c.memory_level for c in grouped] == levels  # type: ignore[union-attr]
        assert sum(1 for sql in executed if sql.startswith("UPDATE tools SET usage_count")) == 2  # once a tool
        for tool_id in ("tool_a", "tool_b"):
            mine, theirs = together.get(tool_id), alone.get(tool_id)
            assert mine is not None and theirs is not None
            assert mine.model_dump() == theirs.model_dump()
            assert together.versions(tool_id) == alone.versions(tool_id)
            assert together.calls(tool_id) == alone.calls(tool_id)
        tool_a = together.get("tool_a")
        assert tool_a is not None and (tool_a.status, tool_a.last_used_at) == ("active", NOW + timedelta(seconds=6))
        # A second store on the same file reads what the first one's cache holds.
        fresh = SQLiteStore(tmp_path / "together.db")
        try:
            assert fresh.get("tool_a") == together.get("tool_a")
        finally:
            fresh.close()
    finally:
        together.close()
        alone.close()


class _RemoteStore(_Store):
    """A store across a network whose first write waits until the test lets it through."""

    answer_within = 5.0
    where = "postgresql://awb@db.internal/awb"

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.let_through = threading.Event()

    def record_calls(
        self, calls: Sequence[CallRecord], *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> list[ToolCounters | Exception]:
        if not self.groups:
            self.writing.set()
            self.let_through.wait(10)
        return super().record_calls(calls, level_after=level_after)


async def test_on_a_remote_store_the_calls_ending_during_a_write_share_the_next_one_off_the_loop() -> None:
    store = _RemoteStore()
    recorder = CallRecorder(store, MemoryPolicy(Config().memory), StoreLane(store))  # type: ignore[arg-type]
    try:
        with anyio.fail_after(10):
            first = asyncio.ensure_future(recorder.record(call(0, call_id="call_first")))
            await anyio.to_thread.run_sync(store.writing.wait, 10)  # written on a thread: the loop runs on
            later = []
            for n in range(3):  # each ending in a turn of its own, as the first write goes on
                later.append(asyncio.ensure_future(recorder.record(call(0, call_id=f"call_{n}"))))
                for _ in range(3):
                    await asyncio.sleep(0)
            store.let_through.set()
            await asyncio.gather(first, *later)
    finally:
        store.let_through.set()
    assert store.groups == [["call_first"], ["call_0", "call_1", "call_2"]]


def test_a_group_keeps_the_cached_tool_warm_without_dumping_its_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fields a group moved are read off its last call's counters as they are: no dump per record.
    store = SQLiteStore(tmp_path / "inventory.db")
    try:
        store.add_tool(make_tool("rec", usage_count=3, success_count=3))
        assert store.get("tool_rec") is not None  # cached from here on
        monkeypatch.setattr(ToolCounters, "model_dump", _no_dump)
        recorded = store.record_calls([call(1), call(2)])
        assert [c.usage_count for c in recorded] == [4, 5]  # type: ignore[union-attr]
        executed: list[str] = []
        store._db.set_trace_callback(executed.append)
        cached = store.get("tool_rec")
        store._db.set_trace_callback(None)
        assert cached is not None and (cached.usage_count, cached.success_count, cached.failure_count) == (5, 5, 0)
        assert cached.last_used_at == call(2).at
        assert not [sql for sql in executed if sql.startswith("SELECT")]  # the cache's copy, not read again
    finally:
        store.close()


def _no_dump(self: ToolCounters, **kwargs: object) -> dict[str, object]:
    raise AssertionError("a group's counters were dumped")
