"""Where a request's store work runs: on the event loop's own thread for a local store (no thread hop on
SQLite's call path), on worker threads within the store's deadline for a remote one."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from awb.errors import AwbError, InventoryBusy
from awb.inventory.lane import StoreLane

pytestmark = pytest.mark.anyio


class RemoteStore:
    """What the lane reads of a remote store: its deadline and its name."""

    answer_within = 0.3
    where = "postgresql://awb@db.internal/awb"


async def test_a_local_stores_work_runs_on_the_event_loops_own_thread() -> None:
    lane = StoreLane(object())
    assert not lane.remote
    assert await lane.call(threading.get_ident) == threading.get_ident()


async def test_a_remote_stores_work_runs_off_the_event_loop() -> None:
    lane = StoreLane(RemoteStore())
    with anyio.fail_after(5):
        assert await lane.call(threading.get_ident) != threading.get_ident()
        assert await lane.work(lambda a, b: a + b, 2, b=3) == 5


async def test_remote_work_the_database_leaves_unanswered_fails_unavailable_at_the_deadline() -> None:
    lane = StoreLane(RemoteStore())
    release = threading.Event()
    try:
        with anyio.fail_after(5), pytest.raises(AwbError) as raised:
            await lane.call(release.wait, 10)
        assert raised.value.code == "unavailable"
        assert "did not answer within 0.3 s" in raised.value.message
        assert raised.value.details["inventory"] == RemoteStore.where
        assert lane.unanswered == 1
    finally:
        release.set()
    with anyio.fail_after(5):  # its thread ends with the answer, late
        while lane.unanswered:
            await anyio.sleep(0.01)


async def test_an_exhausted_pool_is_busy_unless_its_connections_are_held_by_unanswered_work() -> None:
    lane = StoreLane(RemoteStore())

    def exhausted() -> Any:
        raise InventoryBusy("the inventory pool is exhausted")

    with anyio.fail_after(5), pytest.raises(AwbError) as raised:
        await lane.call(exhausted)
    assert raised.value.code == "busy"
    release = threading.Event()
    try:
        with anyio.fail_after(5), pytest.raises(AwbError):
            await lane.call(release.wait, 10)
        with anyio.fail_after(5), pytest.raises(AwbError) as raised:
            await lane.call(exhausted)
        assert raised.value.code == "unavailable"
    finally:
        release.set()
