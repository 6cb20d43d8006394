"""One Monty run driven by the server: every time the sandbox reaches out, the run pauses at a snapshot
and the server answers it here, on the run's own thread (`MontyRuntime` runs each turn on a thread
of its own, never on the event loop).

- `log` and `write_file` (which stages; nothing touches the disk) are answered at once; `read_file`
  reads on the run's thread, so a slow read holds up neither the event loop nor another call. The
  read is capped (`awb.sandbox.host.MAX_READ_BYTES`); a read that never returns is abandoned at the
  call's deadline, which `MontyRuntime` holds over the whole run.
- `time.sleep` and `asyncio.sleep` wait here, within the call's deadline: Monty's own time limit
  counts only time spent executing, so a tool that slept in the pool could outlive its limit. A run
  the server abandons is woken at once.
- Every other OS call (files, environment, entropy, imports) gets Monty's own answer
  (`resume_auto`: no mounts and no OS handler, so files and environment are refused), and is noted.

What was refused is kept, so a run that a refusal ended is reported with the host's error
(`sandbox_violation`, `output_exceeded`) rather than as the tool's `runtime_error`, and a tool that
raises `PermissionError` on its own is not taken for a sandbox refusal.

The run is also where the server and the run's thread meet: `begin` and `finish` bracket the time a
worker runs this call, and `abandon` (the event loop's, at the deadline or on cancellation) ends
the worker only inside that bracket, so it never ends a worker that has gone on to another call.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import pydantic_monty as pm

from awb.errors import AwbError, ExecutionError, SandboxViolation, ToolRuntimeError, ToolTimeout
from awb.log_limit import PER_REQUEST
from awb.sandbox.base import HostFunctions
from awb.sandbox.host import end_if_exhausted

log = logging.getLogger("awb.sandbox.monty")

#: The host functions a tool may call, with their parameters (positional or by keyword).
HOST_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "log": ("message",),
    "read_file": ("path",),
    "write_file": ("path", "data"),
}
SLEEPS = frozenset({"system.sleep", "system.async_sleep"})
#: OS calls that fail for reasons other than the sandbox withholding something.
_NOT_REFUSALS = frozenset({"import"})
_UNSUPPORTED_SUFFIX = "' is not supported in this environment"


class MontyRun:
    """The host's side of one run: answers its snapshots and remembers what it refused."""

    def __init__(self, host: HostFunctions | None, timeout_ms: int) -> None:
        self._host = host
        self._timeout_ms = timeout_ms
        #: `time.monotonic()` by which the run must end; set by `begin`.
        self.deadline = float("inf")
        #: `time.monotonic()` when the worker answered (or died); set by `finish`.
        self.ended: float | None = None
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._running = False
        #: Set (under `_lock`) once the server has given up on the run.
        self._abandoned = False
        #: What a sleep waits on, made by the first sleep: an Event costs more to make (a Condition and
        #: its lock) than the rest of a trivial call's run object, and few runs sleep.
        self._stop: threading.Event | None = None
        #: (the exception type the sandbox saw, its message, the host's error), in order.
        self.refusals: list[tuple[str, str, ExecutionError]] = []
        #: Names of the OS calls the run made that Monty answers (and may refuse), in order.
        self.os_calls: list[str] = []

    def lookup(self) -> dict[str, Any]:
        """The names the tool's code may call; their calls come back here as snapshots."""
        host = self._host
        if host is None:
            return {}
        return {"log": host.log, "read_file": host.read_file, "write_file": host.write_file}

    # --- the bracket the server may end the worker in --------------------------------------------

    def begin(self, pid: int | None, timeout_s: float) -> bool:
        """The run starts on the worker `pid` now; False if the server has already given up on it."""
        with self._lock:
            if self._abandoned:
                return False
            self._pid, self._running = pid, True
            self.deadline = time.monotonic() + timeout_s
            return True

    def finish(self) -> None:
        """The worker has answered (or died): from here on it is not this run's to end."""
        with self._lock:
            self._running = False
            self.ended = time.monotonic()

    def abandon(self) -> None:
        """The server stopped waiting (deadline, cancellation): end the run's worker if it still runs
        this call (the pool replaces it), and wake a sleep."""
        with self._lock:
            self._abandoned = True
            if self._stop is not None:
                self._stop.set()
            if self._running and self._pid is not None:
                log.debug("ending monty worker %s: its call was abandoned", self._pid)
                try:
                    os.kill(self._pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # --- driving the run --------------------------------------------------------------------------

    def drive(self, session: pm.MontySession, source: str, params: dict[str, Any], prints: pm.CollectString) -> Any:
        """Run `source` to its end and return its value; Monty's errors propagate."""
        lookup = self.lookup()
        snapshot = session.feed_start(source, inputs={"params": params}, external_lookup=lookup, print_callback=prints)
        while not isinstance(snapshot, pm.MontyComplete):
            if isinstance(snapshot, pm.FutureSnapshot):
                # Only a coroutine answer leaves futures pending, and the host answers none with one.
                raise ToolRuntimeError("the tool awaited something the sandbox cannot resolve")
            if isinstance(snapshot, pm.FunctionSnapshot):
                name = str(snapshot.function_name)
                if snapshot.is_os_function:
                    if name in SLEEPS:
                        snapshot = snapshot.resume(self._sleep(snapshot.args))
                        continue
                    self.os_calls.append(name)
                elif name in lookup and snapshot.object_id is None:
                    answer = self._answer(name, snapshot.args, snapshot.kwargs)
                    end_if_exhausted(self._host)
                    snapshot = snapshot.resume(answer)
                    continue
            snapshot = snapshot.resume_auto()
        return snapshot.output

    def _answer(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> pm.ExternalResult:
        host = self._host
        assert host is not None
        try:
            bound = _bind(name, args, kwargs)
        except TypeError as exc:
            return {"exception": exc}
        try:
            if name == "read_file":
                value: Any = host.read_file(*bound)
            elif name == "write_file":
                value = host.write_file(*bound)
            else:
                host.log(*bound)
                value = None
        except ExecutionError as exc:
            return {"exception": self._refused(exc)}
        except AwbError as exc:  # e.g. the inventory refusing a staged write
            return {"exception": self._refused(SandboxViolation(exc.message, fn=name))}
        except Exception as exc:  # a host function must never take the server down
            log.warning("host function %s failed: %s", name, exc, extra=PER_REQUEST)
            return {"exception": self._refused(ToolRuntimeError(f"{name} failed: {exc}", fn=name))}
        return {"return_value": value}

    def _refused(self, error: ExecutionError) -> BaseException:
        """The exception the tool sees for a refusal (it may catch it), noted to recognise it later."""
        seen: BaseException = (
            PermissionError(error.message) if isinstance(error, SandboxViolation) else RuntimeError(error.message)
        )
        self.refusals.append((type(seen).__name__, error.message, error))
        return seen

    def _sleep(self, args: tuple[Any, ...]) -> pm.ExternalResult:
        seconds = args[0] if args else None
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            return {"exception": ValueError("sleep length must be a non-negative number")}
        if seconds > self.deadline - time.monotonic():
            # Sleeping would take the call past its limit: the outcome is known now.
            raise ToolTimeout(
                f"the tool ran past {self._timeout_ms} ms (it slept past its time limit)", limit_ms=self._timeout_ms
            )
        if self._stop_event().wait(seconds):
            raise ToolTimeout.past(self._timeout_ms)
        return {"return_value": None}

    def _stop_event(self) -> threading.Event:
        """The event a sleep waits on, set already if the run was abandoned before the sleep."""
        with self._lock:
            if self._stop is None:
                self._stop = threading.Event()
                if self._abandoned:
                    self._stop.set()
            return self._stop

    def refusal(self, kind: str, message: str) -> ExecutionError | None:
        """The host's error when the run ended with an exception the host raised into it (the tool
        let a refusal propagate, or raised it again), else None."""
        for seen_kind, seen_message, error in reversed(self.refusals):
            if kind == seen_kind and message == seen_message:
                return error
        return None

    def refused_os_call(self, kind: str, message: str) -> str | None:
        """The OS call whose refusal by Monty ended the run (files: PermissionError; environment,
        entropy: "'os.getenv' is not supported in this environment"), else None."""
        calls = [name for name in self.os_calls if name not in _NOT_REFUSALS]
        if not calls:
            return None
        if kind == "PermissionError":
            return calls[-1]
        if kind == "RuntimeError" and message.startswith("'") and message.endswith(_UNSUPPORTED_SUFFIX):
            name = message[1 : -len(_UNSUPPORTED_SUFFIX)]
            return name if name in calls else None
        return None


def _bind(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments in parameter order, or TypeError as Python would raise it."""
    params = HOST_FUNCTIONS[name]
    if len(args) > len(params):
        plural = "s" if len(params) > 1 else ""
        raise TypeError(f"{name}() takes {len(params)} positional argument{plural} but {len(args)} were given")
    values = dict(zip(params, args, strict=False))
    for key, value in kwargs.items():
        if key not in params:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
        if key in values:
            raise TypeError(f"{name}() got multiple values for argument {key!r}")
        values[key] = value
    missing = [p for p in params if p not in values]
    if missing:
        raise TypeError(f"{name}() missing required argument {missing[0]!r}")
    return [values[p] for p in params]
