"""The default Python runtime: pydantic-monty, a Python interpreter with no filesystem, network or
environment by design, run in a pool of crash-isolated worker processes kept warm by the server.

Every call gets a fresh REPL session, so nothing a tool leaves in its globals reaches the next call.
Checking a session out and handing it back are a worker round trip each (~0.15 ms apiece, as much as
the run itself), so both happen off the call's path: a spare session is checked out ahead of the next
call, and a used one is handed back in the background.

The server drives each run (`awb.sandbox.monty_host`): host functions, sleeps and OS calls pause it
and are answered on the event loop, file reads in a thread, all within one wall-clock deadline. Each
call's peak memory is the worker's resident growth during the run, read by the server from the
kernel (`awb.sandbox.resident`): pydantic-monty enforces its memory limit on the interpreter's heap
but reports no usage figure.
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
from awb.sandbox.base import Execution, HostFunctions, Limits, encode_output
from awb.sandbox.monty_host import MontyRun
from awb.sandbox.resident import ResidentPeak, WorkerFloors

SCRIPT_NAME = "tool.py"
# The entry point is called in the same feed as the definition so that limits, host functions and
# the print sink apply to one run; a sentinel name keeps the call line out of the tool's traceback.
_CALL_LINE = "\n\nrun(params)\n"
_CHECK_LINE = "\n\n__awb_entry = run\nNone\n"
#: Exceptions that mean "Monty cannot run this code", as opposed to "the code is wrong".
UNSUPPORTED = ("NotImplementedError", "ModuleNotFoundError", "ImportError")
#: Past the call's time limit, how long the server lets a run go on before it stops waiting and the
#: worker is replaced: Monty's own limit (on executing time) normally ends a busy run first, with a
#: traceback; this bounds everything else (host calls, sleeps, a worker that stopped answering).
OVERRUN_GRACE_S = 0.25

log = logging.getLogger("awb.sandbox.monty")


class MontyRuntime:
    name = "monty"
    language = "python"

    def __init__(self, pool_size: int = 2, max_processes: int | None = None) -> None:
        self._pool_size = pool_size
        self._max_processes = max_processes or max(pool_size, 4)
        self._pool: pm.AsyncMonty | None = None
        #: One session checked out ahead of the next call, with the limits it was checked out with.
        self._spare: tuple[tuple[float, int], pm.AsyncMontySession] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._floors = WorkerFloors()

    async def start(self) -> None:
        if self._pool is None:
            pool = pm.AsyncMonty(
                min_processes=self._pool_size,
                # One worker more than calls may use at once: the spare never takes a caller's worker.
                max_processes=self._max_processes + 1,
                feed_duration_limit_grace=1.0,
            )
            await pool.__aenter__()
            self._pool = pool

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            # A background task may wait in checkout for a worker: stop it rather than wait for it.
            for task in self._background:
                task.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
            if self._spare is not None:
                _, spare = self._spare
                self._spare = None
                await _hand_back(spare, None)
            await pool.__aexit__(None, None, None)

    async def _session(self, limits: pm.ResourceLimits) -> pm.AsyncMontySession:
        """A fresh session with these limits: the spare one if it fits, else one checked out now."""
        if self._spare is not None and self._spare[0] == _key(limits):
            _, session = self._spare
            self._spare = None
            return session
        assert self._pool is not None
        session = self._pool.checkout(script_name=SCRIPT_NAME, limits=limits)
        await session.__aenter__()
        return session

    def _recycle(self, session: pm.AsyncMontySession, limits: pm.ResourceLimits, error: BaseException | None) -> None:
        """Hand a used session back and check the next spare out, after the call has returned."""
        task = asyncio.get_running_loop().create_task(self._replace(session, limits, error))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _replace(
        self, session: pm.AsyncMontySession, limits: pm.ResourceLimits, error: BaseException | None
    ) -> None:
        await _hand_back(session, error)
        pool = self._pool
        if pool is None or self._spare is not None:
            return
        try:
            spare = pool.checkout(script_name=SCRIPT_NAME, limits=limits)
            await spare.__aenter__()
        except Exception as exc:  # the next call checks out for itself
            log.debug("could not check a spare monty session out: %s", exc)
            return
        pid = spare.worker_pid
        if pid is not None and not self._floors.seen(pid):
            # A worker's first feed grows it by a few MB (the interpreter settling in): spent here, off
            # the call's path, rather than counted in the peak memory of whichever tool comes first.
            try:
                await spare.feed_run("None")
            except Exception as exc:
                await _hand_back(spare, exc)
                return
        if self._pool is pool and self._spare is None:
            self._spare = (_key(limits), spare)
        else:  # closed meanwhile, or another task was quicker
            await _hand_back(spare, None)

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
        encode_output(value, limits.max_output_bytes)
        return Execution(
            value=value, logs=logs, duration_ms=(time.perf_counter() - started) * 1000, peak_memory_bytes=peak
        )

    async def check(self, code: str, limits: Limits) -> None:
        await self._feed(code + _CHECK_LINE, {}, limits, None)

    async def _feed(
        self, source: str, params: dict[str, Any], limits: Limits, host: HostFunctions | None
    ) -> tuple[Any, list[str], int | None]:
        await self.start()
        assert self._pool is not None
        prints = pm.CollectString(max_bytes=limits.max_log_bytes)
        session_limits: pm.ResourceLimits = {
            "max_feed_duration_secs": limits.timeout_ms / 1000,
            "max_memory": limits.memory_mb * 1024 * 1024,
        }
        run: MontyRun | None = None
        peak: int | None = None
        try:
            session = await self._session(session_limits)
            deadline = asyncio.get_running_loop().time() + limits.timeout_ms / 1000
            run = MontyRun(host, deadline, limits.timeout_ms)
            # Taken before the run: the getter answers None while a turn is in flight.
            resident = ResidentPeak.start(session.worker_pid)
            error: BaseException | None = None
            try:
                async with asyncio.timeout_at(deadline + OVERRUN_GRACE_S):
                    value = await run.drive(session, source, params, prints)
            except BaseException as exc:
                error = exc
                raise
            finally:
                # Only a worker that answered (a value, or the tool's own error) is surely alive, so
                # its pid still names it; a run abandoned mid-way takes its worker with it.
                answered = error is None or isinstance(error, pm.MontyRuntimeError)
                peak = self._measured(resident) if answered else None
                self._recycle(session, session_limits, error)
        except TimeoutError:
            raise ToolTimeout(f"the tool ran past {limits.timeout_ms} ms", limit_ms=limits.timeout_ms) from None
        except pm.MontyRuntimeError as exc:
            error = _runtime_error(exc, limits, run)
            error.peak_memory_bytes = peak if host is not None else None
            raise error from None
        except pm.MontySyntaxError as exc:
            raise ToolRuntimeError(
                f"the tool's code does not parse: {exc}", traceback=exc.display("traceback")
            ) from None
        except pm.MontyCrashedError as exc:
            if exc.timed_out:
                raise ToolTimeout(f"the tool ran past {limits.timeout_ms} ms", limit_ms=limits.timeout_ms) from None
            raise ToolRuntimeError(f"the sandbox worker died: {exc}") from None
        except pm.MontyError as exc:
            raise ToolRuntimeError(f"the sandbox refused the tool: {exc}") from None
        output = prints.output
        return value, [output] if output else [], peak if host is not None else None


def _retire(pid: int) -> None:
    """End a worker that kept much more memory than it started with (its allocator holds what the
    run freed, which the next run would reuse unseen); the pool replaces a worker that died. Called
    while the session is still checked out, so the pid is the pool's live, unreaped child."""
    log.debug("retiring monty worker %s: it kept memory a run freed", pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _key(limits: pm.ResourceLimits) -> tuple[float, int]:
    return (limits.get("max_feed_duration_secs") or 0.0, limits.get("max_memory") or 0)


async def _hand_back(session: pm.AsyncMontySession, error: BaseException | None) -> None:
    """Return a session's worker to the pool (the pool replaces a worker that died or timed out)."""
    try:
        if error is None:
            await session.__aexit__(None, None, None)
        else:
            await session.__aexit__(type(error), error, error.__traceback__)
    except Exception as exc:
        log.debug("monty session hand-back failed: %s", exc)


def _runtime_error(exc: pm.MontyRuntimeError, limits: Limits, run: MontyRun | None) -> ExecutionError:
    inner = exc.exception()
    kind = type(inner).__name__
    message = str(inner)
    traceback = _tool_traceback(exc)
    if kind == "TimeoutError" and "time limit" in message:
        return ToolTimeout(f"the tool ran past {limits.timeout_ms} ms", limit_ms=limits.timeout_ms)
    if kind == "MemoryError":
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


def _tool_traceback(exc: pm.MontyRuntimeError) -> list[str]:
    """The traceback lines that belong to the tool's own code (not our call line)."""
    lines = []
    for frame in exc.traceback():
        if frame.function_name == "<module>" and (frame.source_line or "").strip() in ("run(params)", ""):
            continue
        source = (frame.source_line or "").strip()
        lines.append(f"line {frame.line}, in {frame.function_name}: {source}")
    lines.append(exc.display("type-msg"))
    return lines
