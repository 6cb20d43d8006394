"""Lock order on PostgreSQL: every write that touches a tool and its versions locks the tool's row
first, so a purge and a call (or an update) of one tool at once wait for each other instead of
deadlocking (PostgreSQL would abort one of them). The two are lined up behind a third connection's lock
in the order that deadlocked, then let go."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg
from test_store_contract import NOW, make_tool

from awb.inventory.models import CallRecord
from awb.inventory.postgres import PostgresStore

WAIT_SECONDS = 10


def waiting_for_locks(url: str, count: int) -> None:
    """Return once `count` other sessions wait for a lock; fail after `WAIT_SECONDS`."""
    deadline = threading.Event()
    timer = threading.Timer(WAIT_SECONDS, deadline.set)
    timer.start()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            while not deadline.is_set():
                waiting = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()
                if waiting is not None and waiting[0] >= count:
                    return
                deadline.wait(0.01)
    finally:
        timer.cancel()
    raise AssertionError(f"{count} sessions never waited for a lock")


def behind_a_held_tool_row(url: str, tool_id: str, first: Callable[[], Any], second: Callable[[], Any]) -> list[Any]:
    """Hold the tool's row, start `first` and then `second` (each waits for it), let go: both results."""
    with ThreadPoolExecutor(2) as pool, psycopg.connect(url) as holder:
        holder.execute("SELECT 1 FROM tools WHERE tool_id = %s FOR UPDATE", (tool_id,))
        futures: list[Future[Any]] = [pool.submit(first)]
        waiting_for_locks(url, 1)
        futures.append(pool.submit(second))
        waiting_for_locks(url, 2)
        holder.commit()
        return [f.result(timeout=WAIT_SECONDS) for f in futures]


def test_a_call_and_a_purge_of_one_archived_tool_at_once_do_not_deadlock(clean_pg_url: str) -> None:
    caller, purger = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    try:
        tool = make_tool("sleeper")
        caller.add_tool(tool)
        caller.update(tool.tool_id, status="archived")
        archived = purger.get(tool.tool_id)
        assert archived is not None and archived.status == "archived"
        call = CallRecord(tool_id=tool.tool_id, version=1, at=NOW, duration_ms=1, ok=True)
        # The call takes the tool's row first (its UPDATE of tools runs before that of tool_versions);
        # a purge that locked the versions first then waited for the row the call holds.
        counters, purged = behind_a_held_tool_row(
            clean_pg_url, tool.tool_id, lambda: caller.record_call(call), lambda: purger.purge([archived])
        )
        with psycopg.connect(clean_pg_url) as conn:
            after = conn.execute("SELECT status FROM tools WHERE tool_id = %s", (tool.tool_id,)).fetchone()
    finally:
        caller.close()
        purger.close()
    assert counters.usage_count == 1
    assert purged == []  # the call brought it back from the archive first: it stays
    assert after == ("active",)


def test_an_update_pruning_versions_and_a_purge_of_one_archived_tool_at_once_do_not_deadlock(
    clean_pg_url: str,
) -> None:
    updater, purger = PostgresStore(clean_pg_url), PostgresStore(clean_pg_url)
    try:
        tool = make_tool("sleeper")
        updater.add_tool(tool)
        first = updater.versions(tool.tool_id)[0]
        updater.update(tool.tool_id, status="archived")
        archived = purger.get(tool.tool_id)
        assert archived is not None
        newer = first.model_copy(update={"created_at": NOW.replace(year=NOW.year + 1)})
        added, purged = behind_a_held_tool_row(
            clean_pg_url,
            tool.tool_id,
            lambda: updater.add_current_version(tool.tool_id, 1, newer, keep=1),  # removes version 1
            lambda: purger.purge([archived]),
        )
    finally:
        updater.close()
        purger.close()
    assert (added.outcome, added.number, added.removed) == ("added", 2, (1,))
    assert purged == []  # changed by the update since the purge read it: it stays
