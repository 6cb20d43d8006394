"""Answers posted to an event loop from other threads: all of them run, in order, on the loop, and
answers that arrive together wake the loop once."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import weakref
from typing import Any

import pytest

from awb.sandbox import gil_io
from awb.sandbox.loop_inbox import LoopInbox, inbox_of


def test_posts_made_before_the_loop_runs_them_wake_it_once_and_all_run_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wakes = 0
    real = gil_io.write

    def counted(fd: int, data: bytes) -> int:
        nonlocal wakes
        wakes += 1
        return real(fd, data)

    monkeypatch.setattr(gil_io, "write", counted)

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        inbox = LoopInbox(loop)
        seen: list[int] = []
        done = loop.create_future()

        def post_all() -> None:  # another thread, while the loop waits
            for n in range(50):
                inbox.post(seen.append, n)
            inbox.post(done.set_result, None)

        thread = threading.Thread(target=post_all)
        thread.start()
        thread.join(10)
        await asyncio.wait_for(done, 10)
        return seen

    seen = asyncio.run(main())
    assert seen == list(range(50))
    assert wakes == 1


def test_many_threads_posting_at_once_lose_nothing() -> None:
    async def main() -> set[tuple[int, int]]:
        loop = asyncio.get_running_loop()
        inbox = inbox_of(loop)
        assert inbox_of(loop) is inbox  # one per loop
        seen: set[tuple[int, int]] = set()
        all_in = asyncio.Event()

        def note(item: tuple[int, int]) -> None:
            seen.add(item)
            if len(seen) == 8 * 200:
                all_in.set()

        def post(thread: int) -> None:
            for n in range(200):
                inbox.post(note, (thread, n))

        threads = [threading.Thread(target=post, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        await asyncio.wait_for(all_in.wait(), 20)
        for thread in threads:
            thread.join(10)
        return seen

    assert len(asyncio.run(main())) == 8 * 200


def test_a_failing_callback_is_reported_and_the_others_still_run() -> None:
    async def main() -> tuple[list[str], list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        inbox = LoopInbox(loop)
        seen: list[str] = []
        done = loop.create_future()

        def fail() -> None:
            raise ValueError("boom")

        def post_all() -> None:
            inbox.post(seen.append, "before")
            inbox.post(fail)
            inbox.post(seen.append, "after")
            inbox.post(done.set_result, None)

        threading.Thread(target=post_all).start()
        await asyncio.wait_for(done, 10)
        return seen, reported

    seen, reported = asyncio.run(main())
    assert seen == ["before", "after"]
    assert [type(c["exception"]) for c in reported] == [ValueError]


def test_posting_to_a_closed_loop_does_not_raise() -> None:
    loop = asyncio.new_event_loop()
    inbox = LoopInbox(loop)
    loop.close()
    ran: list[int] = []
    inbox.post(ran.append, 1)  # nobody waits for this answer any more
    inbox.post(ran.append, 2)  # nor does a later one stay queued behind it
    assert ran == []
    with pytest.raises(RuntimeError):
        loop.call_soon_threadsafe(ran.append, 3)  # what the inbox absorbs


def test_a_loop_done_with_is_freed_and_its_inbox_pipe_closed() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        inbox = inbox_of(loop)
        done = loop.create_future()
        threading.Thread(target=inbox.post, args=(done.set_result, None)).start()
        await asyncio.wait_for(done, 10)
        return inbox._wake_read

    loop = asyncio.new_event_loop()
    wake_read = loop.run_until_complete(main())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None  # an inbox does not keep its loop alive (a server's tests make thousands)
    with pytest.raises(OSError):
        os.fstat(wake_read)  # nor its pipe open
