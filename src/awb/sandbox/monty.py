"""The default Python runtime: pydantic-monty, a Python interpreter with no filesystem, network or
environment by design, run in a pool of crash-isolated worker processes kept warm by the server.

Every call gets a fresh REPL session, so nothing a tool leaves in its globals reaches the next call:
checking it out, the run and handing it back are three round trips to the worker, all on the call's
thread, unless the runtime is idle (see `_Turn`, and `awb.sandbox.monty_spare` for the lone call).

Each turn runs on a thread of the runtime's own (`awb.sandbox.turn_threads`: woken without the event
loop holding the GIL across the wake-up), through pydantic-monty's blocking API, which waits
for the worker with the GIL released. Its asyncio API costs more CPU for the same turn (measured
again with pydantic-monty 1.4: ~0.50 ms of process CPU for a trivial call against ~0.30), which on a
loaded server is most of what a trivial call costs beyond the MCP request itself. What a call costs
is mostly threads waking each other (each wake-up is a context switch, dear on a virtual machine),
so the design counts them: the event loop hands the turn over and gets at most one wake-up back with
the answer (answers that end together share one: `awb.sandbox.loop_inbox`). The loop holds the
call's deadline (`_Watch`: from the moment a worker runs it, so waiting for a free worker is not
counted) and, past it or on cancellation, ends the worker (`MontyRun.abandon`), which the pool
replaces.

The run's host functions, sleeps and OS calls pause it and are answered on its thread
(`awb.sandbox.monty_host`). Each call's peak memory is the worker's resident growth during the run,
read by the server from the kernel (`awb.sandbox.resident`): pydantic-monty enforces its memory limit
on the interpreter's heap but reports no usage figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from typing import Any

import pydantic_monty as pm

from awb.errors import (
    ExecutionError,
    MemoryExceeded,
    OutputExceeded,
    SandboxViolation,
    ToolRuntimeError,
    ToolTimeout,
)
from awb.log_limit import PER_REQUEST
from awb.sandbox.base import Execution, HostFunctions, Limits, encode_result
from awb.sandbox.loop_inbox import inbox_of
from awb.sandbox.monty_host import MontyRun
from awb.sandbox.monty_spare import IdleSpare, hand_back, limits_key
from awb.sandbox.resident import ResidentPeak, WorkerFloors
from awb.sandbox.turn_threads import TurnThreads
from awb.text import MAX_DETAIL_STRING_CHARS, MAX_MESSAGE_CHARS, cap_text

SCRIPT_NAME = "tool.py"
# The entry point is called in the same feed as the definition so that limits, host functions and
# the print sink apply to one run; a sentinel name keeps the call line out of the tool's traceback.
_CALL_LINE = "\n\nrun(params)\n"
_CHECK_LINE = "\n\n__awb_entry = run\nNone\n"
#: Exceptions that mean "Monty cannot run this code", as opposed to "the code is wrong".
UNSUPPORTED = ("NotImplementedError", "ModuleNotFoundError", "ImportError")
#: Past the call's time limit, how long the server lets a run go on before it stops waiting and the
#: worker is ended: Monty's own limit (on executing time) normally ends a busy run first, with a
#: traceback; this bounds everything else (host calls, sleeps, a worker that stopped answering).
OVERRUN_GRACE_S = 0.25
#: Host calls (log, read_file, write_file, sleeps, OS calls) one run may make. pydantic-monty's default
#: of 1,000 ended a tool that logs in a loop; the call's deadline bounds the time they take anyway.
MAX_HOST_CALLS = 100_000
#: Threads that run turns. A turn holds one while it waits for a worker or a granted file, so there
#: are more than workers; they start only when needed.
MAX_TURN_THREADS = 64

log = logging.getLogger("awb.sandbox.monty")

#: What a turn gives back: the value, what it printed, its peak memory.
Outcome = tuple[Any, list[str], int | None]


class MontyRuntime:
    name = "monty"
    language = "python"

    def __init__(self, pool_size: int = 2, max_processes: int | None = None) -> None:
        self._pool_size = pool_size
        self._max_processes = max_processes or max(pool_size, 4)
        self._pool: pm.Monty | None = None
        self._turns: TurnThreads | None = None
        self._starting = asyncio.Lock()
        self._floors = WorkerFloors()
        self._spare = IdleSpare()

    async def start(self) -> None:
        if self._pool is not None:
            return
        async with self._starting:
            if self._pool is None:
                pool = pm.Monty(
                    min_processes=self._pool_size,
                    max_processes=self._max_processes,
                    feed_duration_limit_grace=1.0,
                )
                await asyncio.to_thread(pool.__enter__)  # spawns the warm workers
                self._turns = TurnThreads(MAX_TURN_THREADS, "awb-monty")
                self._spare = IdleSpare()
                self._pool = pool

    async def close(self) -> None:
        async with self._starting:
            pool, turns = self._pool, self._turns
            if pool is None or turns is None:
                return
            self._pool = self._turns = None
            spare = self._spare

            def shut_down() -> None:
                # Turns still queued run and fail at checkout, so every waiting call gets an answer.
                turns.shutdown()
                spare.close()
                pool.__exit__(None, None, None)

            await asyncio.to_thread(shut_down)

    def _settled_in(self, session: pm.MontySession) -> None:
        """A worker's first feed grows it by a few MB (the interpreter settling in): spent before the
        run is measured, not counted in the peak memory of whichever tool comes first."""
        pid = session.worker_pid
        if pid is not None and not self._floors.seen(pid):
            session.feed_run("None")
            self._floors.settled(pid)  # a check (not measured) must not settle the same worker again

    def _measured(self, resident: ResidentPeak | None) -> int | None:
        """The run's peak memory; a worker that kept much more than it started with is retired."""
        if resident is None:
            return None
        peak = resident.peak()
        if self._floors.bloated(resident):
            _retire(resident.pid)
        return peak

    def protections(self) -> dict[str, bool]:
        return {"no_filesystem": True, "no_network": True, "no_environment": True, "worker_process": True}

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        started = time.perf_counter()
        value, logs, peak = await self._feed(code + _CALL_LINE, params, limits, host)
        encoded = encode_result(value, limits.max_output_bytes)
        return Execution(
            value=value,
            logs=logs,
            duration_ms=(time.perf_counter() - started) * 1000,
            peak_memory_bytes=peak,
            value_json=encoded.text,
            depth=encoded.depth,
        )

    async def check(self, code: str, limits: Limits) -> None:
        try:
            await self._feed(code + _CHECK_LINE, {}, limits, None)
        except ToolRuntimeError as exc:
            # The check's own line found no `run`: said as the cpython and javascript runtimes say it, not
            # as a NameError from a line the tool's author never wrote. A NameError of the tool's own stays.
            trace = exc.details.get("traceback") or []
            check_line = f"line {code.count(chr(10)) + 3}, in <module>: __awb_entry = run"
            if exc.details.get("exception") == "NameError" and len(trace) >= 2 and trace[-2] == check_line:
                raise ToolRuntimeError("the tool's code does not define run(params)") from None
            raise

    async def _feed(self, source: str, params: dict[str, Any], limits: Limits, host: HostFunctions | None) -> Outcome:
        await self.start()
        pool, turns = self._pool, self._turns
        if pool is None or turns is None:
            raise ToolRuntimeError("the monty runtime is closed")
        session_limits: pm.ResourceLimits = {
            "max_feed_duration_secs": limits.timeout_ms / 1000,
            "max_memory": limits.memory_mb * 1024 * 1024,
            "max_suspensions": MAX_HOST_CALLS,
        }
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Outcome] = loop.create_future()
        run = MontyRun(host, limits.timeout_ms)
        spare = self._spare
        spare.started()
        try:
            turns.submit(
                _Turn(self, pool, run, answer, spare), source, params, session_limits, limits, host is not None
            )
        except BaseException:
            spare.finished()
            raise
        watch = _Watch(answer, run, limits.timeout_ms)
        try:
            return await answer
        except BaseException:
            run.abandon()  # past the deadline, cancelled, or failed (then its worker is done already)
            raise
        finally:
            watch.cancel()


class _Watch:
    """The call's deadline on the event loop: its time limit plus `OVERRUN_GRACE_S`, counted from the
    moment a worker runs it (`MontyRun.begin`), so waiting for a free worker is not charged to the call.

    The watch looks at the run once the limit could have passed and again whenever it started later
    than that; past it, the call is answered with `timeout` and its worker is ended (the pool replaces
    it). The thread that runs the call never has to tell the event loop when it began: the answer is
    the only thing it sends."""

    def __init__(self, answer: asyncio.Future[Outcome], run: MontyRun, timeout_ms: int) -> None:
        self._answer, self._run, self._timeout_ms = answer, run, timeout_ms
        self._allowed = timeout_ms / 1000 + OVERRUN_GRACE_S
        self._loop = answer.get_loop()
        self._timer = self._loop.call_later(self._allowed, self._look)

    def _look(self) -> None:
        if self._answer.done():
            return
        # `time.monotonic()`-based; the deadline is infinite until a worker runs the call. A run that
        # has ended is given the time to hand its session back and answer.
        run = self._run
        due = run.deadline if run.ended is None else max(run.deadline, run.ended + self._allowed)
        left = due + OVERRUN_GRACE_S - time.monotonic()
        if left > 0:
            self._timer = self._loop.call_later(min(left, self._allowed), self._look)
            return
        self._answer.set_exception(ToolTimeout.past(self._timeout_ms))

    def cancel(self) -> None:
        self._timer.cancel()


class _Turn:
    """One call on a turn thread: check a session out, run, hand the session back, answer the loop.

    While other calls run, the session is handed back before the answer: a run then costs its thread
    three waits on the worker and one wake-up of the event loop. Handing it back after answering (or
    checking the next session out ahead) puts that work beside the loop's and the other runs' on the
    GIL, which on a loaded server costs more CPU than the round trip it hides (measured: ~30% more
    context switches). When no other call runs, it does exactly that (`IdleSpare`): the call answers
    after one wait on the worker if a spare was ready, and the next lone call finds one."""

    def __init__(
        self, runtime: MontyRuntime, pool: pm.Monty, run: MontyRun, answer: asyncio.Future[Outcome], spare: IdleSpare
    ) -> None:
        self._runtime, self._pool, self._run, self._answer, self._spare = runtime, pool, run, answer, spare
        self._inbox = inbox_of(answer.get_loop())

    def __call__(
        self,
        source: str,
        params: dict[str, Any],
        session_limits: pm.ResourceLimits,
        limits: Limits,
        measure: bool,
    ) -> None:
        key = limits_key(session_limits)
        session: pm.MontySession | None = None
        outcome: Outcome | None = None
        error: BaseException | None = None
        try:
            session = self._spare.take(key)
            if session is None:
                session = _checkout(self._pool, session_limits)
                self._runtime._settled_in(session)
            outcome = self._turn(session, source, params, limits, measure)
        except BaseException as exc:
            error = exc
        answer = (outcome, None) if error is None else (None, _translated(error, limits, self._run))
        # Nothing else runs and the worker answered (the tool's own error included): answer first,
        # then get the next call's session ready (awb.sandbox.monty_spare).
        if self._spare.finished() and session is not None and (error is None or isinstance(error, ExecutionError)):
            self._inbox.post(_settle, self._answer, *answer)
            hand_back(session, error)
            self._spare.refill(key, lambda: _checkout(self._pool, session_limits), self._runtime._settled_in)
            return
        if session is not None:
            hand_back(session, error)
        self._inbox.post(_settle, self._answer, *answer)

    def _turn(
        self, session: pm.MontySession, source: str, params: dict[str, Any], limits: Limits, measure: bool
    ) -> Outcome:
        run = self._run
        pid = session.worker_pid
        if not run.begin(pid, limits.timeout_ms / 1000):
            raise ToolTimeout.past(limits.timeout_ms)
        prints = pm.CollectString(max_bytes=limits.max_log_bytes)
        resident = ResidentPeak.start(pid) if measure else None
        try:
            value = run.drive(session, source, params, prints)
        except pm.MontyRuntimeError as exc:  # the tool's own error: its worker answered
            run.finish()
            raise _runtime_error(exc, limits, run, self._runtime._measured(resident)) from None
        except BaseException:
            # The worker may be gone with the run (ended, crashed): its pid names nothing to measure.
            run.finish()
            raise
        run.finish()
        peak = self._runtime._measured(resident)
        output = prints.output
        return value, [output] if output else [], peak


def _checkout(pool: pm.Monty, limits: pm.ResourceLimits) -> pm.MontySession:
    session = pool.checkout(script_name=SCRIPT_NAME, limits=limits)
    session.__enter__()
    return session


def _settle(answer: asyncio.Future[Outcome], outcome: Outcome | None, error: BaseException | None) -> None:
    """On the event loop: the turn's answer, unless the call stopped waiting for it."""
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        assert outcome is not None
        answer.set_result(outcome)


def _translated(exc: BaseException, limits: Limits, run: MontyRun) -> BaseException:
    """The workbench's error for what a turn raised."""
    if isinstance(exc, ExecutionError):
        return exc
    if isinstance(exc, pm.MontySyntaxError):
        return ToolRuntimeError(f"the tool's code does not parse: {exc}", traceback=exc.display("traceback"))
    if isinstance(exc, pm.MontyCrashedError):
        if exc.timed_out:
            return ToolTimeout.past(limits.timeout_ms)
        return ToolRuntimeError(f"the sandbox worker died: {exc}")
    if isinstance(exc, pm.MontyError):
        return ToolRuntimeError(f"the sandbox refused the tool: {exc}")
    if isinstance(exc, Exception):
        log.warning("monty turn failed: %r", exc, extra=PER_REQUEST)
        return ToolRuntimeError(f"the sandbox failed: {exc}")
    return exc


def _retire(pid: int) -> None:
    """End a worker that kept much more memory than it started with (its allocator holds what the
    run freed, which the next run would reuse unseen); the pool replaces a worker that died. Called
    while the session is still checked out, so the pid is the pool's live, unreaped child."""
    log.debug("retiring monty worker %s: it kept memory a run freed", pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _runtime_error(
    exc: pm.MontyRuntimeError, limits: Limits, run: MontyRun | None, peak: int | None = None
) -> ExecutionError:
    error = _runtime_error_of(exc, limits, run)
    error.peak_memory_bytes = peak
    return error


def _runtime_error_of(exc: pm.MontyRuntimeError, limits: Limits, run: MontyRun | None) -> ExecutionError:
    # pydantic-monty rebuilds the message at each ask (`exception()`, `display()`), holding the
    # interpreter's lock: asked once, and cut before anything copies it (a tool's 40 MB message cost
    # ~120 ms of that lock a call, the event loop's turn included).
    inner = exc.exception()
    kind = type(inner).__name__
    message = cap_text(str(inner), MAX_MESSAGE_CHARS)
    traceback = _tool_traceback(exc, f"{kind}: {message}" if message else kind)
    if kind == "TimeoutError" and "time limit" in message:
        return ToolTimeout.past(limits.timeout_ms)
    if kind == "MemoryError":
        # pydantic-monty reports its print cap as a MemoryError too
        if print_cap_hit(message, limits.max_log_bytes, limits.memory_mb * 1024 * 1024):
            return OutputExceeded(
                f"printed output is over the {limits.max_log_bytes}-byte cap", limit=limits.max_log_bytes
            )
        return MemoryExceeded(f"the tool went over its {limits.memory_mb} MB memory limit", limit_mb=limits.memory_mb)
    refusal = run.refusal(kind, message) if run is not None else None
    if refusal is not None:  # the host's own error, as the other runtimes report it
        return type(refusal)(refusal.message, **{**refusal.details, "traceback": traceback})
    operation = run.refused_os_call(kind, message) if run is not None else None
    if operation is not None:
        return SandboxViolation(
            f"the sandbox refused an operation: {message}", operation=operation, traceback=traceback
        )
    if "output" in message and "limit" in message:
        return OutputExceeded(message)
    return ToolRuntimeError(f"{kind}: {message}", exception=kind, traceback=traceback, unsupported=kind in UNSUPPORTED)


def print_cap_hit(message: str, max_log_bytes: int, memory_bytes: int) -> bool:
    """Whether a MemoryError is the print collector's cap (`pm.CollectString(max_bytes=...)`, the log
    cap) rather than the heap's: both read "memory limit exceeded: N bytes > LIMIT bytes"."""
    return max_log_bytes != memory_bytes and message.endswith(f"> {max_log_bytes} bytes")


def _tool_traceback(exc: pm.MontyRuntimeError, last_line: str) -> list[str]:
    """The traceback lines that belong to the tool's own code (not our call line), ending with
    `last_line` (the exception's type and message)."""
    lines = []
    for frame in exc.traceback():
        if frame.function_name == "<module>" and (frame.source_line or "").strip() in ("run(params)", ""):
            continue
        source = cap_text((frame.source_line or "").strip(), MAX_DETAIL_STRING_CHARS)
        # Monty gives some frames no function name (the `def` line of a call whose arguments do not fit).
        where = f"line {frame.line}" if frame.function_name is None else f"line {frame.line}, in {frame.function_name}"
        lines.append(f"{where}: {source}")
    lines.append(last_line)
    return lines
