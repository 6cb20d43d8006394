"""Where a request's store work runs. A local store (SQLite) answers in microseconds and runs on the
caller's thread, the event loop's; a store across a network (PostgreSQL) can stop answering (a host
gone silent, a backend blocked on a lock), so its work runs on a bounded set of worker threads, and a
request waits for it at most the store's `answer_within` seconds: the event loop serves every other
request meanwhile, and this one fails with `unavailable` when the database does not answer in time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from awb.errors import InventoryBusy, InventoryUnavailable
from awb.thread_lanes import ThreadLane

log = logging.getLogger("awb.inventory")

T = TypeVar("T")

#: Worker threads a remote store's requests use at once, at most. A thread left behind by a request
#: that gave up (the database not answering) frees its place; it ends when its statement does.
THREADS = 32


class StoreLane:
    """Runs store-bound work for requests: inline for a local store, off the event loop within a deadline
    for a remote one (a store with an `answer_within` attribute, in seconds, and a `where` to name it)."""

    def __init__(self, store: Any) -> None:
        #: None for a local store: its work runs where it is asked, with no thread hop.
        self.answer_within: float | None = getattr(store, "answer_within", None)
        self.where = str(getattr(store, "where", "the inventory"))
        self._threads = ThreadLane(THREADS)
        self._lock = threading.Lock()
        #: Work given up on at its deadline whose thread still waits for the database.
        self._unanswered = 0

    @property
    def remote(self) -> bool:
        return self.answer_within is not None

    @property
    def unanswered(self) -> int:
        """How many requests gave up on the database and still wait on a thread for its answer."""
        return self._unanswered

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`: store work, quick on a local store (run here, on the loop)."""
        if self.answer_within is None:
            return fn(*args, **kwargs)
        return await self._off_loop(partial(fn, *args, **kwargs), self.answer_within)

    async def work(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on a worker thread whatever the store: work that is slow on its own (a
        search ranking every tool, a listing counting its matches), bounded by the deadline on a remote
        store."""
        if self.answer_within is None:
            return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
        return await self._off_loop(partial(fn, *args, **kwargs), self.answer_within)

    async def _off_loop(self, work: Callable[[], T], seconds: float) -> T:
        ran = threading.Event()
        abandoned: list[bool] = []

        def run() -> T:
            try:
                return work()
            finally:
                with self._lock:
                    ran.set()
                    if abandoned:
                        self._unanswered -= 1

        try:
            with anyio.move_on_after(seconds):
                return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=self._threads.limiter())
        except InventoryBusy:
            if self._unanswered:
                # Every connection is held by requests the database left unanswered: it is not busy, it
                # is not answering.
                raise self.unanswered_error(seconds) from None
            raise
        # Past the deadline (a cancellation from outside would not reach here): the thread waits on alone.
        with self._lock:
            if not ran.is_set():
                abandoned.append(True)
                self._unanswered += 1
        log.warning("the inventory at %s did not answer within %g s", self.where, seconds)
        raise self.unanswered_error(seconds)

    def unanswered_error(self, seconds: float) -> InventoryUnavailable:
        """What a request hears when the database left its work unanswered for `seconds`."""
        return InventoryUnavailable(
            f"the inventory at {self.where} did not answer within {seconds:g} s (the database is not "
            "answering, or too slow); try again",
            inventory=self.where,
            waited_seconds=seconds,
        )
