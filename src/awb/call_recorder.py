"""Call records written in groups: the calls whose runs end close together share one write transaction
(`Store.record_calls`), as a database's group commit does.

A transaction costs far more than the rows in it: on SQLite its COMMIT alone (writing each page it
touched to the WAL) took ~37 us of a ~100 us one-call record, and every statement lets the GIL go and
takes it back on the event loop. In a busy server the fixed part is larger still (measured under 8 HTTP
clients: ~140 us of event-loop CPU a transaction, ~20 us a call in it).

Two rules decide when a group is written:

- It stays open while each turn of the event loop brings it more calls, up to `GATHER_TURNS` turns
  (calls that end together end a turn or two apart).
- Then, while other calls are still running on the same loop (started, their records not yet joined),
  it waits for them up to `GROUP_WINDOW_S`, and is written as soon as the last of them joins. The same
  trade as PostgreSQL's `commit_delay`, which waits only while `commit_siblings` other transactions are
  open: a call alone (an agent calling tools one after another) never waits, and under load the wait
  buys bigger groups (under 8 HTTP clients: ~1.3 calls a group without it, ~3 with it, the record's
  event-loop CPU a call ~120 -> ~65 us).

Each call still gets its own counters, or the error that kept its own record from being written. A call
cancelled while it waits still has its record written, and so does one cancelled while its tool ran
(`record_abandoned`): it joins the next group without waiting for it. A call is answered only after its
record is written, so no call that was answered is missing from the inventory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from awb.inventory.lane import StoreLane
from awb.inventory.memory import MemoryPolicy
from awb.inventory.models import CallRecord, ToolCounters
from awb.inventory.store import Store

#: Turns of the event loop a group of call records may stay open while each brings it more calls.
GATHER_TURNS = 4
#: Seconds a group may then wait for calls still running on its loop (none running: no wait at all).
GROUP_WINDOW_S = 0.002

_Due = list[tuple[CallRecord, "asyncio.Future[ToolCounters]"]]


class CallRecorder:
    def __init__(self, store: Store, policy: MemoryPolicy, lane: StoreLane | None = None) -> None:
        self._store, self._policy = store, policy
        #: A remote store's group is written on the lane's threads, within its deadline (awb.inventory.lane).
        self._lane = lane if lane is not None and lane.remote else None
        #: Per event loop (a workbench may serve more than one, each on its own thread).
        self._due: dict[asyncio.AbstractEventLoop, _Due] = {}
        #: Calls running on each loop whose records are still to come (`running`).
        self._running: dict[asyncio.AbstractEventLoop, int] = {}
        #: Groups waiting for those calls: the timer that writes each at the end of its window.
        self._held: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}
        #: Group writes under way on a lane (kept here: the loop holds its tasks only weakly), and the loops
        #: with one under way: there the next group gathers until it ends, so calls that end meanwhile share
        #: one transaction, as they do while a local store's write holds the loop.
        self._writing: set[asyncio.Task[None]] = set()
        self._writing_on: set[asyncio.AbstractEventLoop] = set()

    @contextmanager
    def running(self) -> Iterator[None]:
        """Around a call's run, until its record is about to join a group: while it runs, another call's
        group may wait for it (up to `GROUP_WINDOW_S`); when the last running call leaves, a group that
        waits is written at the next turn, with that call's record if it joins in this one."""
        loop = asyncio.get_running_loop()
        self._running[loop] = self._running.get(loop, 0) + 1
        try:
            yield
        finally:
            left = self._running.pop(loop) - 1
            if left:
                self._running[loop] = left
            else:
                held = self._held.pop(loop, None)
                if held is not None:
                    held.cancel()
                    loop.call_soon(self._write, loop)

    async def record(self, call: CallRecord) -> ToolCounters:
        recorded = self._join(call)
        if self._lane is None or self._lane.answer_within is None:
            return await recorded
        # Its group may wait for the write before it: each call's wait is bounded on its own. Its record is
        # written all the same (with its group), counted by no one.
        with anyio.move_on_after(self._lane.answer_within):
            return await recorded
        raise self._lane.unanswered_error(self._lane.answer_within)

    def record_abandoned(self, call: CallRecord) -> None:
        """Record the call of a task being cancelled, which must not wait (under a cancelled anyio scope
        every wait is cancelled again): written with the next group, its counters read by no one."""
        # A waiter already done is one `_write` skips, as it skips a waiter cancelled mid-wait.
        self._join(call).cancel()

    async def flush(self) -> None:
        """Write this loop's group that waits for running calls now, and wait for its writes under way: a
        workbench closing does not wait for the calls, and its loop may stop before a window ends."""
        loop = asyncio.get_running_loop()
        held = self._held.pop(loop, None)
        if held is not None:
            held.cancel()
            self._write(loop)
        writes = [task for task in self._writing if task.get_loop() is loop]
        if writes:
            await asyncio.gather(*writes, return_exceptions=True)

    def _join(self, call: CallRecord) -> asyncio.Future[ToolCounters]:
        loop = asyncio.get_running_loop()
        recorded: asyncio.Future[ToolCounters] = loop.create_future()
        due = self._due.get(loop)
        if due is None:
            due = self._due[loop] = []
            if loop not in self._writing_on:  # else the write under way starts this group's when it ends
                loop.call_soon(self._gather, loop, GATHER_TURNS, 1)
        due.append((call, recorded))
        return recorded

    def _gather(self, loop: asyncio.AbstractEventLoop, turns: int, seen: int) -> None:
        """Write the loop's group, unless the last turn brought it more calls (`seen`: how many it had) and
        it may wait `turns` more turns, or calls still run on the loop (then it waits for them, bounded)."""
        joined = len(self._due[loop])
        if joined > seen and turns > 1:
            loop.call_soon(self._gather, loop, turns - 1, joined)
            return
        if self._running.get(loop):
            self._held[loop] = loop.call_later(GROUP_WINDOW_S, self._window_ended, loop)
            return
        self._write(loop)

    def _window_ended(self, loop: asyncio.AbstractEventLoop) -> None:
        del self._held[loop]
        self._write(loop)

    def _write(self, loop: asyncio.AbstractEventLoop) -> None:
        due = self._due.pop(loop, None)
        if due is None:  # written already (`flush`)
            return
        if self._lane is not None:
            self._writing_on.add(loop)
            task = loop.create_task(self._write_off_loop(self._lane, loop, due))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)
            return
        try:
            results = self._store.record_calls([call for call, _ in due], level_after=self._policy.level_after_success)
        except Exception as exc:  # a store that broke its contract: every waiting call hears why
            results = [exc] * len(due)
        self._settle(due, results)

    async def _write_off_loop(self, lane: StoreLane, loop: asyncio.AbstractEventLoop, due: _Due) -> None:
        try:
            results = await lane.call(
                self._store.record_calls, [call for call, _ in due], level_after=self._policy.level_after_success
            )
        except Exception as exc:  # the database did not answer in time, or the store broke its contract
            results = [exc] * len(due)
        finally:
            self._writing_on.discard(loop)
            if loop in self._due:  # the calls that ended meanwhile: their group now
                self._write(loop)
        self._settle(due, results)

    @staticmethod
    def _settle(due: _Due, results: list[ToolCounters | Exception]) -> None:
        for (_, recorded), result in zip(due, results, strict=True):
            if recorded.done():  # its call was cancelled: the record stands, nobody waits for it
                continue
            if isinstance(result, Exception):
                recorded.set_exception(result)
            else:
                recorded.set_result(result)


__all__ = ["GATHER_TURNS", "GROUP_WINDOW_S", "CallRecorder"]
