"""The `cpython` runtime, server side: owns the zygote, keeps a few locked-down workers pre-forked,
drives one worker per call (host functions, wall-clock timeout, RSS watchdog on its tool process) and
kills it after.

A runtime instance belongs to the event loop it was started on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from awb.errors import (
    AwbError,
    ExecutionError,
    MemoryExceeded,
    OutputExceeded,
    SandboxViolation,
    ToolRuntimeError,
    ToolTimeout,
    Unavailable,
)
from awb.sandbox.base import Execution, ExecutionSlots, HostFunctions, Limits
from awb.sandbox.cpython import lockdown
from awb.sandbox.cpython.cgroups import oom_killed_at
from awb.sandbox.cpython.endings import error_for_status, own_claims_only
from awb.sandbox.cpython.handles import (
    SPAWN_TIMEOUT_S,
    ZYGOTE_GONE,
    LaunchedZygote,
    Worker,
    Zygote,
    start_zygote,
)
from awb.sandbox.cpython.watch import (
    MAX_TOOL_THREADS,
    Watch,
    is_child_of,
    over_thread_cap,
    peak_above,
    set_cgroup_limit,
    watch_rss,
)
from awb.sandbox.host import CheckingHost, end_if_exhausted
from awb.sandbox.identity import WorkerIdentity
from awb.sandbox.wire import (
    BadFrame,
    FrameTooLarge,
    answer_host_call,
    encode_frame,
    frame_limit,
    read_frame,
    reply_frame,
    result_from_worker,
    tool_call,
)

log = logging.getLogger("awb.sandbox.cpython")

#: Every layer a worker must show before it gets code, unless degraded mode is allowed.
REQUIRED_LAYERS = (*lockdown.LAYERS, "pid_namespace")
#: After a worker's socket closes, how long to wait for the zygote to report how it died.
EXIT_STATUS_WAIT_S = 1.0


class CPythonRuntime:
    """Full CPython in pre-forked, kernel-locked-down, single-use workers."""

    name = "cpython"
    language = "python"

    def __init__(
        self,
        *,
        pool_size: int = 2,
        max_concurrent: int = 8,
        grants: list[str] | None = None,
        allow_degraded: bool = False,
        python: str | None = None,
        network_namespace: bool = True,
        identity: WorkerIdentity | None = None,
        preload: bool = True,
        launched: LaunchedZygote | None = None,
    ) -> None:
        self._pool_size = pool_size
        #: A zygote process started ahead (`launch_zygote`), configured by the first start; ours to end.
        self._launched = launched
        #: Whether the zygote imports the modules tools commonly need (not worth it for one probe).
        self._preload = preload
        #: Shared with the server's other runtimes; held from the first start to `close`.
        self.identity = identity or WorkerIdentity()
        self._worker_ids: tuple[int, int] | None = None
        self._network_namespace = network_namespace
        self._grants = sorted({str(Path(g).resolve()) for g in grants or []})
        self._allow_degraded = allow_degraded
        self._python = python or sys.executable
        self._zygote: Zygote | None = None
        self._ready: deque[Worker] = deque()
        self._filling = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = ExecutionSlots(max_concurrent, "cpython")
        self._start_lock: asyncio.Lock | None = None
        self._refusal: str | None = None
        #: How many times the runtime was closed: a call under way at a close fails because of it.
        self._closes = 0
        #: The layers the last worker reported applying to itself (authoritative over the probe).
        self._worker_layers: dict[str, bool] = {}

    # --- life cycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._zygote is not None and not self._zygote.dead:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._zygote is not None and not self._zygote.dead:
                return
            if not sys.platform.startswith("linux"):
                raise Unavailable("the cpython runtime needs Linux (seccomp, Landlock, namespaces)")
            if self._zygote is not None:
                log.warning("the cpython zygote exited; starting a new one")
                while self._ready:  # forked by the dead zygote, they died with it
                    self._ready.popleft().close()
                dead, self._zygote = self._zygote, None
                await asyncio.to_thread(dead.close)  # its socket, and its process reaped (a bounded wait)
            if self._worker_ids is None:
                # Without one, calls are refused until the next tries again.
                self._worker_ids, self._refusal = await self.identity.claim_for("cpython")
                if self._worker_ids is None:
                    return
            launched, self._launched = self._launched, None
            self._zygote = await start_zygote(
                self._python,
                self._grants,
                self._network_namespace,
                self._worker_ids,
                preload=self._preload,
                launched=launched,
            )
            missing = [layer for layer in REQUIRED_LAYERS if not self._zygote.available.get(layer)]
            self._refusal = None
            if missing and not self._allow_degraded:
                self._refusal = (
                    f"the cpython runtime refuses to run: protections missing on this machine: {', '.join(missing)} "
                    "(set sandbox.allow_degraded_cpython to run with fewer protections)"
                )
                log.warning(self._refusal)
                return
            self._fill()

    async def close(self) -> None:
        """Under the start's lock: a close that arrived while the runtime started, claiming its identity,
        returned before that start launched its zygote, which nothing then ended."""
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            await self._close()

    async def _close(self) -> None:
        self._closes += 1
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        while self._ready:
            self._ready.popleft().close()
        if self._launched is not None:  # never started
            launched, self._launched = self._launched, None
            launched.discard()
        if self._zygote is not None:
            zygote, self._zygote = self._zygote, None
            zygote.close()
        if self._worker_ids is not None:  # its workers died with the zygote
            self._worker_ids = None
            self.identity.release()

    def protections(self) -> dict[str, bool]:
        if self._zygote is not None:
            layers = dict(self._zygote.available)
        else:
            layers = lockdown.probe()
            namespaces_possible = os.geteuid() == 0 or _user_namespaces_allowed()
            layers.update(dict.fromkeys((*lockdown.NAMESPACE_LAYERS, "pid_namespace"), namespaces_possible))
            if not self._network_namespace:
                layers["network_namespace"] = False
        layers.update(self._worker_layers)
        layers["worker_process"] = True
        layers["single_use_workers"] = True
        # Structural: tool code runs in a process of its own that never holds the server's channel.
        layers["separate_tool_process"] = True
        return layers

    def refusal(self) -> str | None:
        """Why this runtime refuses to run tools here, or None."""
        return self._refusal

    # --- the pool -----------------------------------------------------------------------------------

    def _fill(self) -> None:
        while len(self._ready) + self._filling < self._pool_size:
            self._filling += 1
            task = asyncio.get_running_loop().create_task(self._add_worker())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _add_worker(self) -> None:
        try:
            self._ready.append(await self._new_worker())
        except (Unavailable, TimeoutError, OSError) as exc:
            log.warning("could not pre-fork a cpython worker: %s", exc)
        finally:
            self._filling -= 1

    async def _new_worker(self) -> Worker:
        """Fork a worker and wait until it reports itself locked down."""
        assert self._zygote is not None
        try:
            worker = await self._zygote.spawn()
        except TimeoutError:
            raise Unavailable("the cpython zygote did not fork a worker in time") from None
        try:
            worker.reader, worker.writer = await asyncio.open_connection(sock=worker.sock)
            ready = await asyncio.wait_for(read_frame(worker.reader, 1 << 16), SPAWN_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, FrameTooLarge, BadFrame):
            worker.close()
            raise Unavailable("a cpython worker failed to lock itself down") from None
        except BaseException:
            worker.close()
            raise
        raw_layers = ready.get("layers")
        layers: dict[str, Any] = raw_layers if isinstance(raw_layers, dict) else {}
        missing = [layer for layer in REQUIRED_LAYERS if not layers.get(layer)]
        if missing and not self._allow_degraded:
            worker.close()
            raise Unavailable(f"a cpython worker came up without {', '.join(missing)}; refusing to run code")
        tool_pid = ready.get("tool_pid")
        if type(tool_pid) is not int or not is_child_of(tool_pid, worker.pid):
            worker.close()
            raise Unavailable("a cpython worker named a tool process that is not its own")
        worker.tool_pid = tool_pid
        worker.ready = ready
        self._worker_layers = {layer: bool(layers.get(layer)) for layer in REQUIRED_LAYERS}
        return worker

    async def _checkout(self) -> Worker:
        await self.start()
        if self._refusal is not None:
            raise Unavailable(self._refusal, runtime=self.name)
        while self._ready:
            worker = self._ready.popleft()
            if not worker.exited.done():
                return worker
            worker.close()
        return await self._new_worker()

    # --- execution ----------------------------------------------------------------------------------

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        started = time.perf_counter()
        returned, peak = await self._run("run", code, params, limits, host)
        return replace(returned, duration_ms=(time.perf_counter() - started) * 1000, peak_memory_bytes=peak)

    async def check(self, code: str, limits: Limits) -> None:
        await self._run("check", code, {}, limits, None)

    async def _run(
        self, mode: str, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions | None
    ) -> tuple[Execution, int | None]:
        closes = self._closes
        try:
            with self._slots.take():
                worker = await self._checkout()
                try:
                    return await self._drive(worker, mode, code, params, limits, host)
                finally:
                    worker.close()
        except AwbError:
            if self._closes != closes:  # its worker, or the zygote forking it, was ended by the close
                raise Unavailable("the cpython runtime was closed during the call", runtime=self.name) from None
            raise
        finally:
            if self._zygote is not None and not self._zygote.dead and self._refusal is None:
                self._fill()

    async def _drive(
        self,
        worker: Worker,
        mode: str,
        code: str,
        params: dict[str, Any],
        limits: Limits,
        host: HostFunctions | None,
    ) -> tuple[Execution, int | None]:
        """(what the call returned, peak resident bytes above the worker's start size) of one call."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.timeout_ms / 1000
        reader, writer = worker.reader, worker.writer
        assert reader is not None and writer is not None
        watch = Watch()
        watchdog: asyncio.Task[None] | None = None
        asked: HostFunctions = CheckingHost() if host is None else host
        try:
            read_dirs = list(getattr(host, "read_dirs", []) or [])
            job = {
                "op": "job",
                "mode": mode,
                "code": code,
                "params": params,
                "limits": {
                    "timeout_ms": limits.timeout_ms,
                    "memory_mb": limits.memory_mb,
                    "max_output_bytes": limits.max_output_bytes,
                    "max_log_bytes": limits.max_log_bytes,
                    "max_frame_bytes": frame_limit(limits.max_output_bytes, limits.max_log_bytes),
                },
                "read_dirs": read_dirs,
            }
            set_cgroup_limit(worker.limit_path, limits)
            writer.write(encode_frame(job))
            await writer.drain()
            base_rss = int(worker.ready.get("base_rss") or 0)
            limit_bytes = base_rss + limits.memory_mb * 1024 * 1024
            watchdog = loop.create_task(
                watch_rss(worker.tool_pid, worker.kill, limit_bytes, watch, self._scratch_view(worker))
            )
            while True:
                message = await self._next_frame(worker, reader, limits, deadline, watch)
                op = message.get("op")
                if op == "host":
                    if message.get("fn") == "call_tool":  # a plan's bridged MCP call
                        reply = await tool_call(asked, message)
                    else:
                        reply = await answer_host_call(asked, message)
                    end_if_exhausted(asked)
                    writer.write(reply_frame(reply, message))
                    await writer.drain()
                elif op == "result":
                    returned = result_from_worker(own_claims_only(message), limits)
                    # The tool process waits for the kill after its result: its figures are still there.
                    # The watchdog polls, so a burst that ends between two polls is caught here, by the
                    # kernel's high-water mark.
                    peak = peak_above(worker.tool_pid, base_rss)
                    if watch.hit or over_thread_cap(worker.tool_pid, watch):
                        raise _stopped(watch, limits)
                    if peak is not None and peak > limits.memory_mb * 1024 * 1024:
                        raise _over_memory(limits)
                    return returned, peak
                elif op == "exited":  # the tool process ended without a result; the supervisor reaped it
                    if watch.hit:
                        raise _stopped(watch, limits)
                    status = message.get("status")
                    if type(status) is not int:
                        raise ToolRuntimeError("the sandbox worker sent a malformed exit status")
                    oom = bool(worker.limit_path) and oom_killed_at(worker.limit_path)
                    raise error_for_status(status, oom, limits, what="tool process")
                else:
                    raise SandboxViolation(f"the worker sent an unexpected {op!r} frame")
        except (ConnectionError, BrokenPipeError):
            raise await self._death(worker, limits, watch) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            worker.kill()

    def _scratch_view(self, worker: Worker) -> str | None:
        """The worker's scratch tmpfs as the server sees it (through the zygote's root), or None when
        scratch is a plain directory on the host's disk."""
        zygote = self._zygote
        if zygote is None or not zygote.available.get("mount_namespace"):
            return None
        return f"/proc/{zygote.process.pid}/root{worker.scratch}"

    async def _next_frame(
        self,
        worker: Worker,
        reader: asyncio.StreamReader,
        limits: Limits,
        deadline: float,
        watch: Watch,
    ) -> dict[str, Any]:
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            return await asyncio.wait_for(
                read_frame(reader, frame_limit(limits.max_output_bytes, limits.max_log_bytes)), max(remaining, 0.001)
            )
        except TimeoutError:
            worker.kill()
            raise ToolTimeout.past(limits.timeout_ms) from None
        except FrameTooLarge as exc:
            worker.kill()
            raise OutputExceeded(
                f"the tool sent {exc.size} bytes, over the output cap", size=exc.size, limit=limits.max_output_bytes
            ) from None
        except BadFrame as exc:
            worker.kill()
            raise ToolRuntimeError(str(exc)) from None
        except (asyncio.IncompleteReadError, ConnectionError):
            raise await self._death(worker, limits, watch) from None

    async def _death(self, worker: Worker, limits: Limits, watch: Watch) -> ExecutionError:
        """The error for a worker that went away without a result."""
        if watch.hit:
            return _stopped(watch, limits)
        try:
            status, oom_killed = await asyncio.wait_for(asyncio.shield(worker.exited), EXIT_STATUS_WAIT_S)
        except TimeoutError:
            return ToolRuntimeError("the sandbox worker died")
        if status == ZYGOTE_GONE:
            return ToolRuntimeError("the sandbox worker died with the cpython zygote, which the next call restarts")
        return error_for_status(status, oom_killed, limits)


def _stopped(watch: Watch, limits: Limits) -> ExecutionError:
    """The error for a call the watchdog stopped."""
    if watch.threads:
        return SandboxViolation(
            f"the tool ran {watch.threads} threads, over the sandbox's {MAX_TOOL_THREADS}, and was stopped",
            threads=watch.threads,
            limit=MAX_TOOL_THREADS,
        )
    return _over_memory(limits)


def _over_memory(limits: Limits) -> MemoryExceeded:
    return MemoryExceeded(f"the tool went over its {limits.memory_mb} MB memory limit", limit_mb=limits.memory_mb)


def _user_namespaces_allowed() -> bool:
    try:
        return int(Path("/proc/sys/user/max_user_namespaces").read_text()) > 0
    except (OSError, ValueError):
        return False
