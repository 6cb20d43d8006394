"""Work that must not hold the event loop, run in a few worker threads of its own.

One lane per kind of work, so a burst of one (45 slow validations, ten 20 MB results to redact) waits its
turn instead of filling anyio's shared pool (40 threads) and leaving listings and searches behind it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class ThreadLane:
    def __init__(self, threads: int) -> None:
        self.threads = threads
        #: A limiter belongs to the event loop it was first used on: one per loop.
        self._limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
            weakref.WeakKeyDictionary()
        )

    def limiter(self) -> anyio.CapacityLimiter:
        """This lane's limiter on the running event loop."""
        loop = asyncio.get_running_loop()
        limiter = self._limiters.get(loop)
        if limiter is None:
            limiter = self._limiters[loop] = anyio.CapacityLimiter(self.threads)
        return limiter

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in one of this lane's threads; past `threads` at once, a call waits its turn."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter())
