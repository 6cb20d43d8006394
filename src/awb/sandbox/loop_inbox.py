"""Answers from worker threads to an event loop, with one wake-up for all that arrive together.

`loop.call_soon_threadsafe` writes to the loop's wake-up socket on every call, and the loop reads it
back: two system calls per answer, and the write lets the GIL go, which on a busy server costs the
answering thread a wait to get it back. Runs that end close together (several calls at once) post
to an inbox instead: only the first answer since the loop last emptied it wakes the loop, and the
rest join it.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Any

#: One inbox per event loop (a workbench may serve more than one, each on its own thread).
_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopInbox] = weakref.WeakKeyDictionary()
_INBOXES_LOCK = threading.Lock()


class LoopInbox:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._posted: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    def post(self, callback: Callable[..., None], *args: Any) -> None:
        """Run `callback(*args)` on the loop soon; safe from any thread."""
        with self._lock:
            self._posted.append((callback, args))
            if len(self._posted) > 1:  # the loop has been woken for the first one and not run it yet
                return
        try:
            self._loop.call_soon_threadsafe(self._run_posted)
        except RuntimeError:  # the loop is closed: nobody is waiting for the answer any more
            with self._lock:
                self._posted.clear()

    def _run_posted(self) -> None:
        with self._lock:
            posted, self._posted = self._posted, []
        for callback, args in posted:
            try:
                callback(*args)
            except Exception as exc:  # as the loop treats a callback's error: reported, the rest still run
                self._loop.call_exception_handler({"message": "a posted callback failed", "exception": exc})


def inbox_of(loop: asyncio.AbstractEventLoop) -> LoopInbox:
    inbox = _INBOXES.get(loop)
    if inbox is None:
        with _INBOXES_LOCK:
            inbox = _INBOXES.get(loop)
            if inbox is None:
                inbox = _INBOXES[loop] = LoopInbox(loop)
    return inbox


__all__ = ["LoopInbox", "inbox_of"]
