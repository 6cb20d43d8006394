"""The `javascript` runtime: QuickJS (PyPI `quickjs`) in locked-down worker processes, never in the
server. A fresh QuickJS context per call with memory and stack limits; the wall-clock limit is
enforced by killing the worker. Tool contract: `function run(params) { ... }` returning a JSON value;
host functions `log`, `readFile`/`read_file`, `writeFile`/`write_file`; `console.log` goes to logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from awb.errors import ExecutionError, OutputExceeded, ToolRuntimeError, ToolTimeout, Unavailable
from awb.install_hint import install_hint
from awb.sandbox.base import Execution, ExecutionSlots, HostFunctions, Limits
from awb.sandbox.cpython import lockdown
from awb.sandbox.host import CheckingHost, end_if_exhausted
from awb.sandbox.identity import WorkerIdentity, launch_worker_script
from awb.sandbox.resident import ResidentPeak, WorkerFloors
from awb.sandbox.wire import (
    BadFrame,
    FrameTooLarge,
    answer_host_call,
    encode_frame,
    frame_limit,
    read_frame,
    reply_frame,
    result_from_worker,
)

log = logging.getLogger("awb.sandbox.javascript")

WORKER_PATH = Path(__file__).with_name("javascript_worker.py")
START_TIMEOUT_S = 15.0
#: How long a worker whose pipe closed mid-call is given to be reaped, for its exit status.
DEATH_WAIT_S = 1.0
#: How long a killed worker is given to be reaped (its pipes closed) before the call goes on without it.
KILL_WAIT_S = 5.0
REQUIRED_LAYERS = (
    "rlimits",
    "no_new_privs",
    "seccomp",
    "syscall_allowlist",
    "landlock",
    "unprivileged_uid",
    "capabilities_dropped",
    "network_namespace",
    "ipc_namespace",
)


def quickjs_missing() -> str | None:
    """Why the runtime cannot work here, or None."""
    if importlib.util.find_spec("quickjs") is None:
        return f"the javascript runtime needs the `quickjs` package: {install_hint('javascript')}"
    return None


async def launch_worker(python: str, worker_ids: tuple[int, int] | None = None) -> asyncio.subprocess.Process:
    """A worker process that leaves root for `worker_ids`; without them (a worker started ahead, while the
    server still loads its config) it waits for them as its first frame, its interpreter started meanwhile."""
    return await launch_worker_script(python, WORKER_PATH, worker_ids, keep_stderr=False)


@dataclass
class _JsWorker:
    process: asyncio.subprocess.Process
    layers: dict[str, bool] = field(default_factory=dict)

    @property
    def reader(self) -> asyncio.StreamReader:
        assert self.process.stdout is not None
        return self.process.stdout

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_frame(encode_frame(message))

    async def send_frame(self, frame: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(frame)
        await self.process.stdin.drain()

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reaped(), KILL_WAIT_S)

    async def _reaped(self) -> None:
        # asyncio's wait() returns once every pipe of the process has closed, and a frame left unread
        # (one refused as too large) keeps stdout open on this side: its reading stays paused. The
        # killed worker can write nothing more, so reading to the end is short.
        with contextlib.suppress(Exception):
            while await self.reader.read(1 << 20):
                pass
        await self.process.wait()


class JavaScriptRuntime:
    name = "javascript"
    language = "javascript"

    def __init__(
        self,
        *,
        pool_size: int = 2,
        max_concurrent: int = 8,
        python: str | None = None,
        identity: WorkerIdentity | None = None,
        launched: asyncio.subprocess.Process | None = None,
    ) -> None:
        self._pool_size = pool_size
        #: A worker process started ahead, without its ids (`launch_worker`): the first worker; ours to end.
        self._launched = launched
        #: Shared with the server's other runtimes; held from `start` to `close`.
        self.identity = identity or WorkerIdentity()
        self._worker_ids: tuple[int, int] | None = None
        self._refusal: str | None = None
        self._python = python or sys.executable
        self._idle: list[_JsWorker] = []
        self._slots = ExecutionSlots(max_concurrent, "javascript")
        self._started = False
        self._layers: dict[str, bool] = {}
        self._floors = WorkerFloors()
        #: Held while the runtime starts: two first calls together each claimed the worker identity (one
        #: claim never given back) and each started a pool of workers.
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        """Started once however many calls arrive together; a start refused (no worker identity) leaves
        the runtime unstarted, and the next call tries again."""
        if self._started:
            return
        async with self._starting:
            if not self._started:
                await self._start()

    async def _start(self) -> None:
        missing = quickjs_missing()
        if missing is not None:
            raise Unavailable(missing, runtime=self.name)
        if self._worker_ids is None:
            # Without one, calls are refused until the next tries again.
            self._worker_ids, self._refusal = await self.identity.claim_for("javascript")
            if self._worker_ids is None:
                return
        self._refusal = None
        self._started = True
        workers = await asyncio.gather(*(self._spawn() for _ in range(self._pool_size)), return_exceptions=True)
        for worker in workers:
            if isinstance(worker, BaseException):
                log.warning("could not start a javascript worker: %s", worker)
            else:
                self._idle.append(worker)

    async def close(self) -> None:
        """Under the start's lock: a close that arrived while the runtime started, claiming its identity,
        returned before that start launched its workers, which nothing then ended."""
        async with self._starting:
            await self._close()

    async def _close(self) -> None:
        if self._launched is not None:  # never given its ids
            launched, self._launched = self._launched, None
            await _JsWorker(launched).kill()
        idle, self._idle = self._idle, []
        for worker in idle:
            await worker.kill()
        self._started = False
        if self._worker_ids is not None:  # a worker out on a call is killed when it comes back
            self._worker_ids = None
            self.identity.release()

    def refusal(self) -> str | None:
        """Why this runtime refuses to run tools here (no worker identity to be had), or None."""
        return self._refusal

    def protections(self) -> dict[str, bool]:
        base = self._layers or {layer: value for layer, value in lockdown.probe().items() if layer in REQUIRED_LAYERS}
        return {**base, "worker_process": True, "engine_memory_limit": True, "no_filesystem": True}

    async def _spawn(self) -> _JsWorker:
        if self._worker_ids is None:
            raise Unavailable("the javascript runtime is closed", runtime=self.name)
        uid, gid = self._worker_ids
        launched, self._launched = self._launched, None
        worker = _JsWorker(launched or await launch_worker(self._python, (uid, gid)))
        if self._worker_ids != (uid, gid):
            # Closed while it launched: the ids it took were given back, and another server may hold them
            # now, so it runs nothing.
            await asyncio.shield(worker.kill())
            raise Unavailable("the javascript runtime was closed during the call", runtime=self.name)
        try:
            if launched is not None:  # started before the ids were claimed: they are its first frame
                await worker.send({"uid": uid, "gid": gid})
            ready = await asyncio.wait_for(read_frame(worker.reader, 1 << 16), START_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, FrameTooLarge, BadFrame, ConnectionError):
            await worker.kill()
            raise Unavailable("a javascript worker did not start (is quickjs importable?)") from None
        except BaseException:  # cancelled (the server stopped while it warmed up): the worker goes too
            await asyncio.shield(worker.kill())
            raise
        raw = ready.get("layers")
        worker.layers = {k: bool(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        self._layers = worker.layers
        return worker

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        started = time.perf_counter()
        returned, peak = await self._run("run", code, params, limits, host)
        return replace(returned, duration_ms=(time.perf_counter() - started) * 1000, peak_memory_bytes=peak)

    async def check(self, code: str, limits: Limits) -> None:
        await self._run("check", code, {}, limits, None)

    async def _run(
        self, mode: str, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions | None
    ) -> tuple[Execution, int | None]:
        with self._slots.take():
            await self.start()
            if self._refusal is not None:
                raise Unavailable(self._refusal, runtime=self.name)
            worker = self._idle.pop() if self._idle else await self._spawn()
            # The call's memory, measured by the server from outside the worker: the worker's own
            # word on it would be the tool's to forge.
            resident = ResidentPeak.start(worker.process.pid) if mode == "run" else None
            healthy = False
            try:
                returned = await self._drive(worker, mode, code, params, limits, host)
                peak = resident.peak() if resident is not None else None
                healthy = self._reusable(resident)
                return returned, peak
            except _WorkerReported as reported:
                # The worker is fine after a tool's own error: the QuickJS context is thrown away.
                reported.error.peak_memory_bytes = resident.peak() if resident is not None else None
                healthy = self._reusable(resident)
                raise reported.error from None
            finally:
                if healthy and len(self._idle) < self._pool_size and self._started:
                    self._idle.append(worker)
                else:
                    await worker.kill()

    def _reusable(self, resident: ResidentPeak | None) -> bool:
        """False for a worker that kept much more memory than it started with (see `WorkerFloors`)."""
        return resident is None or not self._floors.bloated(resident)

    async def _drive(
        self,
        worker: _JsWorker,
        mode: str,
        code: str,
        params: dict[str, Any],
        limits: Limits,
        host: HostFunctions | None,
    ) -> Execution:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.timeout_ms / 1000
        asked: HostFunctions = CheckingHost() if host is None else host
        job = {
            "op": "job",
            "mode": mode,
            "code": code,
            "params": params,
            "limits": {
                "memory_mb": limits.memory_mb,
                "max_output_bytes": limits.max_output_bytes,
                "max_log_bytes": limits.max_log_bytes,
            },
        }
        try:
            await worker.send(job)
            while True:
                remaining = max(deadline - loop.time(), 0.001)
                message = await asyncio.wait_for(
                    read_frame(worker.reader, frame_limit(limits.max_output_bytes, limits.max_log_bytes)), remaining
                )
                if message.get("op") == "host":
                    reply = await answer_host_call(asked, message)
                    end_if_exhausted(asked)
                    await worker.send_frame(reply_frame(reply, message))
                    continue
                if message.get("op") != "result":
                    raise ToolRuntimeError("the javascript worker sent an unexpected frame")
                try:
                    return result_from_worker(message, limits)
                except ExecutionError as exc:  # a whole frame came back: the worker itself is fine
                    raise _WorkerReported(exc) from None
        except TimeoutError:
            raise ToolTimeout.past(limits.timeout_ms) from None
        except FrameTooLarge as exc:
            raise OutputExceeded(
                f"the tool sent {exc.size} bytes, over the output cap", size=exc.size, limit=limits.max_output_bytes
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError, BadFrame):
            raise await _died(worker) from None


async def _died(worker: _JsWorker) -> ToolRuntimeError:
    """The error of a worker that stopped answering mid-call, with the signal that ended it if it did."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(worker.process.wait(), DEATH_WAIT_S)
    status = worker.process.returncode
    if status is None or status >= 0:
        return ToolRuntimeError("the javascript worker died during the call")
    name = signal.Signals(-status).name if -status in signal.valid_signals() else f"signal {-status}"
    why = " (QuickJS overflows its native stack on a value nested tens of thousands deep)" if name == "SIGSEGV" else ""
    return ToolRuntimeError(f"the javascript worker crashed during the call: {name}{why}", signal=name)


class _WorkerReported(Exception):
    def __init__(self, error: ExecutionError) -> None:
        super().__init__(str(error))
        self.error = error
