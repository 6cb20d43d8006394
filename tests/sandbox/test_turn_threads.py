"""The threads that run sandbox turns: started only when needed and never more than allowed, turns
past the cap run in order as threads free up, a failing turn does not end its thread, and shutting
down refuses new turns but runs the ones already given."""

from __future__ import annotations

import logging
import threading

import pytest

from awb.sandbox.turn_threads import TurnThreads

WAIT = 10.0


def test_turns_past_the_cap_wait_and_run_in_order_on_the_threads_there_are() -> None:
    threads = TurnThreads(2, "test-turns-capped")
    release = threading.Event()
    started = threading.Semaphore(0)
    ran: list[tuple[int, int]] = []
    done = threading.Semaphore(0)

    def turn(number: int) -> None:
        started.release()
        assert release.wait(WAIT)
        ran.append((number, threading.get_ident()))
        done.release()

    for number in range(6):
        threads.submit(turn, number)
    assert started.acquire(timeout=WAIT) and started.acquire(timeout=WAIT)
    # Two turns hold both threads; the other four wait instead of starting threads of their own.
    assert len([thread for thread in threading.enumerate() if thread.name.startswith("test-turns-capped")]) == 2
    release.set()
    for _ in range(6):
        assert done.acquire(timeout=WAIT)
    assert sorted(number for number, _ in ran) == list(range(6))
    assert len({ident for _, ident in ran}) == 2
    waiting = [number for number, _ in ran if number >= 2]
    assert waiting == sorted(waiting)  # the queue is first come, first served
    threads.shutdown()


def test_an_idle_thread_is_woken_for_the_next_turn_rather_than_a_new_one_started() -> None:
    threads = TurnThreads(8, "test-turns")
    idents: list[int] = []
    done = threading.Semaphore(0)

    def turn() -> None:
        idents.append(threading.get_ident())
        done.release()

    for _ in range(20):
        threads.submit(turn)
        assert done.acquire(timeout=WAIT)
    # One at a time: a thread that finished goes idle before the next turn could need another, or the
    # next turn waits for it; either way far fewer threads than turns.
    assert len(set(idents)) <= 2
    threads.shutdown()


def test_a_turn_that_raises_is_logged_and_its_thread_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    threads = TurnThreads(1, "test-turns")
    done = threading.Event()

    def broken() -> None:
        raise ValueError("broken turn")

    with caplog.at_level(logging.ERROR, logger="awb.sandbox"):
        threads.submit(broken)
        threads.submit(done.set)
        assert done.wait(WAIT)
    assert any("sandbox turn failed" in record.message and record.exc_info for record in caplog.records)
    threads.shutdown()


def test_shutdown_refuses_new_turns_runs_the_given_ones_and_ends_the_threads() -> None:
    threads = TurnThreads(1, "test-turns")
    release = threading.Event()
    ran: list[int] = []
    done = threading.Semaphore(0)

    def turn(number: int) -> None:
        assert release.wait(WAIT)
        ran.append(number)
        done.release()

    before = set(threading.enumerate())
    for number in range(3):
        threads.submit(turn, number)
    threads.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        threads.submit(turn, 99)
    release.set()
    for _ in range(3):
        assert done.acquire(timeout=WAIT)
    assert ran == [0, 1, 2]
    for thread in set(threading.enumerate()) - before:
        thread.join(WAIT)
        assert not thread.is_alive()


def test_idle_threads_end_at_shutdown() -> None:
    threads = TurnThreads(4, "test-turns")
    done = threading.Semaphore(0)
    before = set(threading.enumerate())
    for _ in range(3):
        threads.submit(done.release)
    for _ in range(3):
        assert done.acquire(timeout=WAIT)
    ours = [thread for thread in set(threading.enumerate()) - before if thread.name.startswith("test-turns")]
    assert ours
    threads.shutdown()
    for thread in ours:
        thread.join(WAIT)
        assert not thread.is_alive()


def test_at_least_one_thread() -> None:
    with pytest.raises(ValueError):
        TurnThreads(0, "test-turns")
