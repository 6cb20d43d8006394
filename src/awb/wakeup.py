"""Waking coroutines on any event loop from whichever thread brings news: a store's LISTEN thread, a
poller, another loop. `awb.feed` follows the event journal with it and `awb.sign_outs` the sign-outs of
other servers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable

import anyio


def call_soon_on(calls: Iterable[tuple[asyncio.AbstractEventLoop, Callable[[], object]]]) -> None:
    """Run each callback on its own event loop soon, from whichever thread this is; a loop that has
    closed is passed over (its waiter is gone with it)."""
    for loop, callback in calls:
        try:
            loop.call_soon_threadsafe(callback)
        except RuntimeError:  # that loop has closed
            pass


class Wakeup:
    """Wakes coroutines (on any event loop) waiting for news, from whichever thread brings it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        #: How many times news came: a reader remembers the count its last answer was complete at.
        self.count = 0

    def ring(self) -> None:
        with self._lock:
            self.count += 1
            waiting = list(self._waiting)
        call_soon_on((loop, event.set) for loop, event in waiting)

    async def wait(self, ready: Callable[[], bool], timeout: float) -> None:
        """Return when `ready()` holds (checked under the lock `ring` takes, so news cannot slip in
        between the check and the wait), when news comes, or after `timeout`."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if ready():
                return
            self._waiting.append(entry)
        try:
            with anyio.move_on_after(timeout):
                await entry[1].wait()
        finally:
            with self._lock:
                self._waiting.remove(entry)


__all__ = ["Wakeup", "call_soon_on"]
