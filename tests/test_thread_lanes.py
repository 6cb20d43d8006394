from __future__ import annotations

import threading

import anyio
import anyio.from_thread
import pytest

from awb.thread_lanes import ThreadLane

pytestmark = pytest.mark.anyio


async def test_past_its_threads_a_call_waits_its_turn_while_the_loop_goes_on() -> None:
    lane = ThreadLane(1)
    started = anyio.Event()
    release = threading.Event()
    running: list[str] = []

    def work(name: str) -> str:
        running.append(name)
        anyio.from_thread.run_sync(started.set)
        assert release.wait(10)
        return name

    results: list[str] = []

    async def call(name: str) -> None:
        results.append(await lane.run(work, name))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call, "first")
            tasks.start_soon(call, "second")
            await started.wait()  # the loop runs while the first call holds the lane's one thread
            await anyio.wait_all_tasks_blocked()
            assert running == ["first"]
            release.set()
    assert sorted(results) == ["first", "second"] and running == ["first", "second"]
