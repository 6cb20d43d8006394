"""Answers from worker threads to an event loop, with one wake-up for all that arrive together.

`loop.call_soon_threadsafe` writes to the loop's wake-up socket on every call, and the loop reads it
back: two system calls per answer, and the write lets the GIL go, which on a busy server costs the
answering thread a wait to get it back. Runs that end close together (several calls at once) post
to an inbox instead: only the first answer since the loop last emptied it wakes the loop, and the
rest join it.

The inbox wakes the loop through a pipe of its own, written and read holding the GIL
(`awb.sandbox.gil_io`): asyncio's wake-up socket is written with `send` and read with `recv` until
it is empty (a second `recv` each time), each of which lets the GIL go, and on a busy server the
thread that let it go waits to get it back. Measured on `MontyRuntime.execute` of a trivial tool, 8
at once, against `call_soon_threadsafe` in the same rounds: on a busy machine ~1.5-5 fewer context
switches and ~15-25 us less CPU a call (of ~350); on an idle one, no difference (the GIL is rarely
wanted by another thread then). Through the whole `awb_call` path (`benchmarks/call_path.py`) that is
within the benchmark's noise of ~5%.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from awb.sandbox import gil_io

#: One inbox per event loop (a workbench may serve more than one, each on its own thread).
_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopInbox] = weakref.WeakKeyDictionary()
_INBOXES_LOCK = threading.Lock()
_WAKE = b"\x01"


class LoopInbox:
    """Made on its loop's thread (it registers its pipe with the loop). It holds the loop weakly, so
    a loop that is done with can go; its pipe is closed with the inbox."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        self._posted: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        # os.pipe: not inherited by child processes; os.pipe2 is Linux's only.
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._pipe = weakref.finalize(self, _close, self._wake_read, self._wake_write)
        try:
            loop.add_reader(self._wake_read, self._run_posted)
        except BaseException:
            self._pipe()
            raise

    def post(self, callback: Callable[..., None], *args: Any) -> None:
        """Run `callback(*args)` on the loop soon; safe from any thread."""
        loop = self._loop()
        with self._lock:
            if loop is None or loop.is_closed():  # nobody is waiting for the answer any more
                self._posted.clear()
                return
            self._posted.append((callback, args))
            if len(self._posted) > 1:  # the loop has been woken for the first one and not run it yet
                return
        try:
            gil_io.write(self._wake_write, _WAKE)
        except BlockingIOError:  # the pipe is full of wake-ups the loop has yet to read: it will run
            pass

    def _run_posted(self) -> None:
        # The wake-ups are read before the list is taken: a post that joins the list after that wrote
        # a wake-up of its own (it found the list empty), so none is lost; one read early only runs
        # this again with nothing posted.
        try:
            gil_io.read(self._wake_read, 64)
        except BlockingIOError:
            pass
        with self._lock:
            posted, self._posted = self._posted, []
        loop = self._loop()
        for callback, args in posted:
            try:
                callback(*args)
            except Exception as exc:  # as the loop treats a callback's error: reported, the rest still run
                if loop is not None:
                    loop.call_exception_handler({"message": "a posted callback failed", "exception": exc})


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


def inbox_of(loop: asyncio.AbstractEventLoop) -> LoopInbox:
    """The loop's inbox; called on the loop's thread."""
    inbox = _INBOXES.get(loop)
    if inbox is None:
        with _INBOXES_LOCK:
            inbox = _INBOXES.get(loop)
            if inbox is None:
                inbox = _INBOXES[loop] = LoopInbox(loop)
    return inbox


__all__ = ["LoopInbox", "inbox_of"]
