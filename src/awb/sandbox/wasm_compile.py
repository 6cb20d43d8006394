"""Compiling wasm modules out of the server's process: each module is compiled by a compile process
of its own (`wasm_compiler`), within the call's time limit and `COMPILE_MEMORY_MB`, and ended when it
answers or at the deadline; the server loads the artifact it sends back. One process is kept started
ahead, so a compile does not wait for an interpreter to start.

Compiling in the server could not be stopped: a module made to be slow to compile (62 KB of functions
declaring 50,000 locals each, a few bytes apiece in the binary) took 24 s of the server's CPU, on after
its call had failed at 5 s, and every module queued behind it timed out and was then refused as too slow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from pathlib import Path

from awb.errors import ExecutionError, MemoryExceeded, ToolRuntimeError, ToolTimeout, Unavailable
from awb.sandbox.base import Limits, clean_text
from awb.sandbox.identity import launch_worker_script

log = logging.getLogger("awb.sandbox.wasm")

COMPILER_PATH = Path(__file__).with_name("wasm_compiler.py")
#: Memory a compile may use on top of the compile process's own: modules of the default 64 KB code
#: limit need under 60 MB (the locals bomb above included).
COMPILE_MEMORY_MB = 256
START_TIMEOUT_S = 15.0
#: How long a compile process whose pipe closed is given to be reaped, for what it said on stderr.
DEATH_WAIT_S = 1.0
_HEADER_BYTES = 4
_BUDGET_BYTES = 4
_OK, _FAILED = 0, 1


async def launch_compiler(python: str, worker_ids: tuple[int, int] | None = None) -> asyncio.subprocess.Process:
    """A compile process that leaves root for `worker_ids`; without them (one started ahead, while `awb doctor`
    still loads its config) it waits for them as its first frame, its interpreter and wasmtime loaded meanwhile.
    Its stderr is kept: what a compile process that died said is its failure's reason."""
    return await launch_worker_script(python, COMPILER_PATH, worker_ids, keep_stderr=True)


class Compilers:
    """Starts compile processes, one ahead, and drives each through its one compile.

    `launched`: a process `launch_compiler` started without ids, the first one used. `spare`: False starts
    none ahead after it (one probe: a spare would only be started to be ended)."""

    def __init__(
        self, python: str | None = None, *, launched: asyncio.subprocess.Process | None = None, spare: bool = True
    ) -> None:
        self._python = python or sys.executable
        self._launched = launched
        self._keep_spare = spare
        self._spare: asyncio.Task[asyncio.subprocess.Process] | None = None
        self._running: set[asyncio.subprocess.Process] = set()
        self._ending: set[asyncio.Future[None]] = set()
        self._closed = False
        self.layers: dict[str, bool] = {}
        self._worker_ids: tuple[int, int] | None = None

    def start(self, worker_ids: tuple[int, int]) -> None:
        """Start the spare process in the background; compile processes leave root for `worker_ids`."""
        self._closed = False
        self._worker_ids = worker_ids
        if self._spare is None:
            launched, self._launched = self._launched, None
            if launched is not None:
                # Sent at once, not when the task first runs: the process leaves root and gets ready while
                # the runtime goes on starting (importing wasmtime holds the event loop for ~40 ms).
                assert launched.stdin is not None
                ids = json.dumps({"uid": worker_ids[0], "gid": worker_ids[1]}).encode()
                launched.stdin.write(len(ids).to_bytes(_HEADER_BYTES, "big") + ids)
            self._spare = asyncio.get_running_loop().create_task(self._spawn(launched))

    async def close(self) -> None:
        self._closed = True
        # A call still under way takes no new compile process with ids the runtime gives back now.
        self._worker_ids = None
        spare, self._spare = self._spare, None
        if spare is not None:
            # Waited for, not cancelled: a process cancelled while it starts would be left to asyncio.
            with contextlib.suppress(Exception):
                await _end(await spare)
        for process in list(self._running):
            await _end(process)
        for ending in list(self._ending):
            with contextlib.suppress(Exception):
                await ending
        launched, self._launched = self._launched, None
        if launched is not None:  # never given its ids (the runtime never started)
            await _end(launched)

    async def compile(self, code: str, limits: Limits) -> bytes:
        """The compiled artifact of `code` (WAT or base64): `timeout` past the call's time limit, counted
        from when a compile process takes the module; `memory_exceeded` past `COMPILE_MEMORY_MB`."""
        try:
            source = code.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolRuntimeError("the module's text is not valid Unicode (a lone surrogate)") from None
        process = await self._take()
        self._running.add(process)
        try:
            return await self._drive(process, source, limits)
        finally:
            self._running.discard(process)
            # Shielded: a cancelled call (its client gone) still ends and reaps its compile process.
            await asyncio.shield(_end(process))

    async def _take(self) -> asyncio.subprocess.Process:
        spare, self._spare = self._spare, None
        if not self._closed and self._keep_spare:
            self._spare = asyncio.get_running_loop().create_task(self._spawn())
        if spare is None:
            return await self._spawn()
        try:
            return await asyncio.shield(spare)
        except Unavailable:
            return await self._spawn()
        except asyncio.CancelledError:
            spare.add_done_callback(self._end_once_started)  # the spare started for this call goes too
            raise

    def _end_once_started(self, spare: asyncio.Task[asyncio.subprocess.Process]) -> None:
        if not spare.cancelled() and spare.exception() is None:
            ending = asyncio.ensure_future(_end(spare.result()))
            self._ending.add(ending)
            ending.add_done_callback(self._ending.discard)

    async def _spawn(self, launched: asyncio.subprocess.Process | None = None) -> asyncio.subprocess.Process:
        """A compile process, ready: a new one, or `launched`, which `start` has sent its ids."""
        if self._worker_ids is None:
            raise Unavailable("the wasm runtime is not started")
        process = launched or await launch_compiler(self._python, self._worker_ids)
        try:
            if launched is not None:
                assert process.stdin is not None
                await process.stdin.drain()
            ready = json.loads(await asyncio.wait_for(_read(process, 1 << 16), START_TIMEOUT_S))
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            await _end(process)
            raise Unavailable("a wasm compile process did not start (is wasmtime importable?)") from None
        except BaseException:  # cancelled (a call abandoned while its process starts): the process goes too
            await asyncio.shield(_end(process))
            raise
        raw = ready.get("layers") if isinstance(ready, dict) else None
        self.layers = {str(k): bool(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        return process

    async def _drive(self, process: asyncio.subprocess.Process, source: bytes, limits: Limits) -> bytes:
        assert process.stdin is not None
        job = COMPILE_MEMORY_MB.to_bytes(_BUDGET_BYTES, "big") + source
        try:
            process.stdin.write(len(job).to_bytes(_HEADER_BYTES, "big") + job)
            reading = _send_and_read(process, (COMPILE_MEMORY_MB + 64) << 20)
            reply = await asyncio.wait_for(reading, limits.timeout_ms / 1000)
        except TimeoutError:
            raise ToolTimeout(
                f"the module did not compile within {limits.timeout_ms} ms", limit_ms=limits.timeout_ms
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            raise await _died(process) from None
        if reply[:1] == bytes([_OK]):
            return reply[1:]
        message = clean_text(reply[1:2000].decode("utf-8", "replace"))
        if message.startswith("memory:"):
            raise _over_memory()
        raise ToolRuntimeError(message)


async def _send_and_read(process: asyncio.subprocess.Process, limit: int) -> bytes:
    assert process.stdin is not None
    await process.stdin.drain()
    return await _read(process, limit)


async def _read(process: asyncio.subprocess.Process, limit: int) -> bytes:
    assert process.stdout is not None
    size = int.from_bytes(await process.stdout.readexactly(_HEADER_BYTES), "big")
    if size > limit:
        raise ValueError(f"a frame of {size} bytes from a wasm compile process")
    return await process.stdout.readexactly(size)


async def _died(process: asyncio.subprocess.Process) -> ExecutionError:
    """The error of a compile process that stopped answering: out of memory when the allocator said so
    on its way out (the process cannot allocate past its address-space limit), else a crash."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), DEATH_WAIT_S)
    said = b""
    if process.stderr is not None:
        with contextlib.suppress(Exception):
            said = await asyncio.wait_for(process.stderr.read(4096), DEATH_WAIT_S)
    if b"memory allocation" in said or b"MemoryError" in said or b"out of memory" in said:
        return _over_memory()
    status = process.returncode
    how = "" if status is None or status >= 0 else f" ({_signal_name(-status)})"
    return ToolRuntimeError(f"the wasm compile process crashed{how}")


def _over_memory() -> MemoryExceeded:
    return MemoryExceeded(f"compiling the module needs more than {COMPILE_MEMORY_MB} MB", limit_mb=COMPILE_MEMORY_MB)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


async def _end(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_reaped(process), 5)


async def _reaped(process: asyncio.subprocess.Process) -> None:
    # asyncio's wait() returns once every pipe of the process has closed, and output left unread (a
    # frame refused as too large) keeps a pipe open on this side: read both to their end first.
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                while await stream.read(1 << 20):
                    pass
    await process.wait()
