"""A fresh Monty session checked out ahead of the next call, while the runtime is idle.

A call costs three round trips to a worker (check a fresh session out, run, hand it back). When a
call ends and no other is running, its turn answers first and then, off the call's path, hands the
session back and checks out a fresh one for the next call with the same limits: a lone call (an agent
calling tools one after another) then waits for one round trip instead of three. Under load the
runtime never does this: work moved behind the answer lands beside the next calls' on the GIL, which
costs a busy server more CPU than the round trips it hides (measured: ~30% more context switches).

The spare is never a used session: it was checked out after the last call's session went back, and
nothing has been fed to it but `None` (`MontyRuntime._settled_in`). It holds a worker only while no
call runs: the first call to start takes it (same limits) or returns it to the pool (other limits),
and a spare that became ready after a call started is returned at once, so a call never waits for a
worker the spare holds.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import pydantic_monty as pm

log = logging.getLogger("awb.sandbox.monty")

#: A session's limits as a key: a spare serves only calls with the limits it was checked out with.
LimitsKey = tuple[tuple[str, float | int], ...]


def limits_key(limits: pm.ResourceLimits) -> LimitsKey:
    return tuple(sorted(limits.items()))  # type: ignore[arg-type]


class IdleSpare:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._spare: tuple[LimitsKey, pm.MontySession] | None = None
        self._closed = False

    def started(self) -> None:
        """A call was handed to a turn (on the event loop, before its turn can run)."""
        with self._lock:
            self._running += 1

    def finished(self) -> bool:
        """A call's run is over (on its turn); whether no other call is running now."""
        with self._lock:
            self._running -= 1
            return self._running == 0

    def take(self, key: LimitsKey) -> pm.MontySession | None:
        """The spare, if it has these limits and its worker is alive; a spare with other limits goes
        back to the pool, so that its worker is free for this call."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        spare_key, session = spare
        if spare_key == key and _alive(session):
            return session
        hand_back(session)
        return None

    def refill(
        self,
        key: LimitsKey,
        checkout: Callable[[], pm.MontySession],
        settle: Callable[[pm.MontySession], None],
    ) -> None:
        """Check a fresh session out for the next call, if the runtime is still idle and has none."""
        with self._lock:
            if self._closed or self._running or self._spare is not None:
                return
        try:
            session = checkout()
            settle(session)
        except Exception as exc:  # the next call checks out its own
            log.debug("no spare monty session: %s", exc)
            return
        with self._lock:
            keep = not self._closed and not self._running and self._spare is None
            if keep:
                self._spare = (key, session)
        if not keep:
            hand_back(session)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is not None:
            hand_back(spare[1])


def _alive(session: pm.MontySession) -> bool:
    """Whether the spare's worker still runs (it may have been ended while it waited)."""
    pid = session.worker_pid
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def hand_back(session: pm.MontySession, error: BaseException | None = None) -> None:
    """Return a session's worker to the pool (the pool replaces a worker that died or timed out)."""
    try:
        if error is None:
            session.__exit__(None, None, None)
        else:
            session.__exit__(type(error), error, error.__traceback__)
    except Exception as exc:
        log.debug("monty session hand-back failed: %s", exc)


__all__ = ["IdleSpare", "LimitsKey", "hand_back", "limits_key"]
