"""A validation's time budget counts its own work (the CPU time of the thread that validates), not the
time it waits for the interpreter lock or a core, and still stops a validation that runs away."""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

import pytest

from awb import validation
from awb.schema_bounds import SchemaTooExpensive
from awb.validation import ToolSchema

ITEMS = ToolSchema.compile(
    {
        "type": "array",
        "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
    }
)
#: ~0.1 s of CPU to validate here, keyword by keyword.
VALID = [{"n": n} for n in range(10_000)]
#: Each subschema an `anyOf` of two that both recurse: exponential in the nesting of the instance.
RUNAWAY = ToolSchema.compile(
    {
        "$defs": {"n": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/n"}}] * 2}},
        "$ref": "#/$defs/n",
    }
)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_time_waiting_for_the_interpreter_lock_is_not_counted_against_a_valid_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the budget was wall time, and a valid instance was refused as too expensive when another
    # thread held the interpreter lock meanwhile (a loaded server: the event loop, other validations).
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 0.5)
    started = threading.Event()
    outcome: list[Any] = []

    def validate() -> None:
        began = time.monotonic()
        started.set()
        try:
            outcome.append(validation.schema_errors(ITEMS.validator, VALID))
        except SchemaTooExpensive as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - began)

    def hold_the_lock() -> None:
        # A function called through `PyDLL` keeps the interpreter lock: 0.8 s in which no other thread runs.
        ctypes.PyDLL(None).usleep(800_000)

    validating = threading.Thread(target=validate)
    validating.start()
    assert started.wait(10)
    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    validating.join(60)
    holder.join(60)
    problems, took = outcome
    assert took > 0.5, "the lock was not held while the validation ran: nothing was tested"
    assert problems == []


def test_a_validation_that_runs_away_is_still_stopped_by_its_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 0.2)
    began, cpu = time.monotonic(), time.thread_time()
    with pytest.raises(SchemaTooExpensive):
        validation.schema_errors(RUNAWAY.validator, _nested(40))
    # Unbounded, it would take 2**40 steps; the margin is for a full garbage collection in a long test run.
    assert 0.2 <= time.thread_time() - cpu < 2
    assert time.monotonic() - began < 10


def test_a_validation_stops_at_the_wall_clock_end_its_caller_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    # An admission test's examples share its wall-clock budget: their output checks stop at its end.
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 60.0)
    began = time.monotonic()
    with pytest.raises(SchemaTooExpensive):
        validation.schema_errors(RUNAWAY.validator, _nested(40), until=began + 0.1)
    assert time.monotonic() - began < 5
