"""Threads that run sandbox turns, each woken through a pipe of its own.

`concurrent.futures.ThreadPoolExecutor.submit` wakes a worker by releasing a lock while the caller
holds the GIL. On a loaded machine the kernel often switches to the woken thread right there, and
the event loop then sits off the CPU still holding the GIL, so no Python runs anywhere in the server
until it is scheduled again: measured under 8 HTTP clients on 2 cores, `submit` took 375 µs of wall
time for 35 µs of CPU, on every call. `os.write` lets the GIL go around the system call, so here the
woken thread (or anything else) can run while the event loop waits for the CPU. It also skips the
executor's futures, conditions and semaphore, which the turns do not use: a turn answers through
`awb.sandbox.loop_inbox`.

Threads start when needed, up to `max_threads`; past that, turns wait in order for one to finish.
The most recently idle thread is woken first (its stack is warm).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("awb.sandbox")

Job = tuple[Callable[..., None], tuple[Any, ...]]
_WAKE = b"\x01"


class TurnThreads:
    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self._max_threads, self._name = max_threads, name
        self._lock = threading.Lock()
        self._idle: list[_TurnThread] = []
        self._pending: deque[Job] = deque()
        self._started = 0
        self._closed = False

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` on a turn thread. Its exceptions are logged, never raised: a turn reports
        its own outcome."""
        job: Job = (fn, args)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} threads are shut down")
            if self._idle:
                thread: _TurnThread | None = self._idle.pop()
            elif self._started < self._max_threads:
                self._started += 1
                thread = None
            else:
                self._pending.append(job)
                return
        if thread is not None:
            thread.hand(job)
            return
        try:
            _TurnThread(self, f"{self._name}-{self._started}", job).start()
        except BaseException:
            with self._lock:
                self._started -= 1
            raise

    def shutdown(self) -> None:
        """Refuse new turns; turns already submitted still run. Idle threads end now, busy ones after
        the queue is empty. Never waits."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for thread in idle:
            thread.hand(None)

    def _next(self, thread: _TurnThread) -> Job | None:
        """The thread's next job: a waiting turn, or whatever it is handed after going idle (None: end)."""
        with self._lock:
            if self._pending:
                return self._pending.popleft()
            if self._closed:
                self._started -= 1
                return None
            self._idle.append(thread)
        return thread.wait()


class _TurnThread(threading.Thread):
    def __init__(self, threads: TurnThreads, name: str, first: Job) -> None:
        # Daemon: a turn blocked on a stuck worker must not hold up the interpreter's exit.
        super().__init__(name=name, daemon=True)
        self._threads, self._first = threads, first
        self._job: Job | None = None
        self._wake_read, self._wake_write = os.pipe()

    def hand(self, job: Job | None) -> None:
        self._job = job
        os.write(self._wake_write, _WAKE)  # lets the GIL go (see the module's docstring)

    def wait(self) -> Job | None:
        os.read(self._wake_read, 1)
        job, self._job = self._job, None
        return job

    def run(self) -> None:
        job: Job | None = self._first
        self._first = None  # type: ignore[assignment]
        try:
            while job is not None:
                fn, args = job
                job = None
                try:
                    fn(*args)
                except BaseException:
                    log.exception("a sandbox turn failed")
                del fn, args  # a turn's parameters are not kept alive while the thread is idle
                job = self._threads._next(self)
        finally:
            os.close(self._wake_read)
            os.close(self._wake_write)


__all__ = ["TurnThreads"]
