"""The time budget of one schema validation: CPU time of the thread that validates.

A wall-clock budget counts what the validation does not do: on a loaded server it waits for the
interpreter lock (the event loop, other validations, sandbox turns) and for a core, and a valid call
that had done a fraction of its work was refused. CPU time counts only the work, so what a hostile
schema or instance can cost stays bounded the same, whatever else the machine runs.
"""

from __future__ import annotations

import threading
import time

from awb.schema_bounds import SchemaTooExpensive


class ValidationBudget(threading.local):
    """Each thread's budget, checked before every keyword. The thread's CPU clock is a system call (~1 us,
    against 0.05 for the wall clock); CPU time never passes faster than wall time, so the CPU clock is
    read only once the CPU time left could have passed on the wall clock."""

    #: The thread's CPU clock (`time.thread_time()`) past which its validation has spent its budget.
    cpu_deadline = float("inf")
    #: A wall-clock end the caller sets besides (`time.monotonic()`: an admission test's end).
    until = float("inf")
    #: The wall clock before which neither can have passed.
    wall_deadline = float("inf")

    def arm(self, seconds: float, cpu_deadline: float | None = None, until: float | None = None) -> None:
        """Start a validation in this thread: `seconds` of CPU time from now, or until `cpu_deadline` (a
        `time.thread_time()` of this thread: one budget for several validations); and never past
        `until` on the wall clock when given."""
        now = time.thread_time()
        self.cpu_deadline = now + seconds if cpu_deadline is None else cpu_deadline
        self.until = float("inf") if until is None else until
        self.wall_deadline = min(time.monotonic() + (self.cpu_deadline - now), self.until)

    def check(self) -> None:
        """Raise `SchemaTooExpensive` once this thread's validation has spent its CPU time (or is past
        `until`)."""
        now = time.monotonic()
        if now > self.wall_deadline:
            left = self.cpu_deadline - time.thread_time()
            if left <= 0 or now > self.until:
                raise SchemaTooExpensive("validation ran out of its time budget")
            self.wall_deadline = min(now + left, self.until)

    def disarm(self) -> None:
        self.cpu_deadline = self.until = self.wall_deadline = float("inf")


__all__ = ["ValidationBudget"]
