"""The `wasm` runtime: WebAssembly on wasmtime, JSON in and JSON out. The engine gives a module no
access to the host but the three functions we link; wall-clock limit by epoch interruption, memory by
the store's limiter.

The tool's code is the module, as WAT text (starts with `(`) or base64 of the binary. The ABI:

exports
  memory                       the module's linear memory
  alloc(len: i32) -> i32       returns a pointer to `len` writable bytes (the host writes into it)
  run(ptr: i32, len: i32) -> i64
                               gets the params as UTF-8 JSON at [ptr, ptr+len); returns the result,
                               UTF-8 JSON in its memory, packed as (result_ptr << 32) | result_len
imports (module "awb", all optional)
  log(ptr: i32, len: i32)                          a UTF-8 message into the call's logs
  read_file(ptr: i32, len: i32) -> i64             path in, file text out (packed ptr/len, via alloc)
  write_file(path_ptr, path_len, data_ptr, data_len: i32) -> i64
                                                   stages a write; returns the staging receipt as JSON
Compiling happens in a compile process of its own (`awb.sandbox.wasm_compile`), ended at the call's
time limit and held within a memory budget; the server loads the artifact it sends back. A module's
source is capped at MAX_MODULE_CHARS; a module that failed to compile in time is remembered and refused
at once afterwards.
A refused host call (e.g. a read outside the granted directories) traps the module; the call ends in
that host error (`sandbox_violation`, ...). A module whose declared minimum is over the limit does not
start (`memory_exceeded`). Growing memory past the limit makes `memory.grow` return -1, as the
WebAssembly spec says: wasmtime's Python API cannot make a refused grow trap (its store limiter has no
`trap_on_grow_failure`), so a module that then fails with its memory at the limit ends in
`memory_exceeded` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from awb.errors import (
    AwbError,
    ToolRuntimeError,
    ToolTimeout,
    Unavailable,
)
from awb.install_hint import install_hint
from awb.sandbox.base import Execution, ExecutionSlots, HostFunctions, Limits, encode_result
from awb.sandbox.identity import WorkerIdentity
from awb.sandbox.wasm_compile import Compilers
from awb.sandbox.wasm_engine import engine_config
from awb.sandbox.wasm_host import WasmCall, current_call, make_linker
from awb.sandbox.wasm_run import peak_memory, run_module
from awb.text import first_line

log = logging.getLogger("awb.sandbox.wasm")

TICK_S = 0.005
MODULE_CACHE_SIZE = 64
#: Largest module source accepted (WAT text or base64), before anything is parsed.
MAX_MODULE_CHARS = 8 * 1024 * 1024
#: Modules whose compilation ran past the time limit, refused without compiling again.
SLOW_MODULES_REMEMBERED = 256


def wasmtime_missing() -> str | None:
    if importlib.util.find_spec("wasmtime") is None:
        return f"the wasm runtime needs the `wasmtime` package: {install_hint('wasm')}"
    return None


class WasmRuntime:
    name = "wasm"
    language = "wasm"

    def __init__(
        self,
        *,
        max_concurrent: int = 8,
        identity: WorkerIdentity | None = None,
        launched: asyncio.subprocess.Process | None = None,
        spare: bool = True,
    ) -> None:
        """`launched`: a compile process started ahead (`wasm_compile.launch_compiler` without ids), the first
        used; `spare`: whether a compile process is kept started ahead of each compile (`Compilers`)."""
        #: Shared with the server's other runtimes: its compile processes' uid, held from `start` to `close`.
        self.identity = identity or WorkerIdentity()
        self._worker_ids: tuple[int, int] | None = None
        self._refusal: str | None = None
        self._slots = ExecutionSlots(max_concurrent, "wasm")
        self._engine: Any = None
        self._linker: Any = None
        self._modules: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._clock = threading.Condition()
        self._active = 0
        self._compilers = Compilers(launched=launched, spare=spare)
        self._too_slow: OrderedDict[str, None] = OrderedDict()
        self._max_concurrent = max_concurrent
        self._threads: ThreadPoolExecutor | None = None
        #: Held while the runtime starts: two first calls together each claimed the worker identity (one
        #: claim never given back) and made an engine, a ticker and a thread pool, the first ones leaked.
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        """Started once however many calls arrive together; a start refused (no worker identity) or
        failed leaves the runtime unstarted, and the next call tries again."""
        if self._engine is not None:
            return
        async with self._starting:
            if self._engine is None:
                await self._start()

    async def _start(self) -> None:
        missing = wasmtime_missing()
        if missing is not None:
            raise Unavailable(missing, runtime=self.name)
        if self._worker_ids is None:
            # Without one, calls are refused until the next tries again.
            self._worker_ids, self._refusal = await self.identity.claim_for("wasm")
            if self._worker_ids is None:
                return
        self._refusal = None
        # First: a compile process started ahead (`awb doctor`'s) gets ready while wasmtime is imported here.
        self._compilers.start(self._worker_ids)
        try:
            import wasmtime
        except (ImportError, OSError) as exc:
            # Installed but broken (its library missing or built for another machine): a refused call that
            # says so, as a missing wasmtime is, not an internal error (it ended `awb doctor` without a report).
            raise Unavailable(f"wasmtime does not import: {first_line(exc)}", runtime=self.name) from None

        self._engine = wasmtime.Engine(engine_config())
        # A module's run holds its thread until its time limit: on the event loop's default executor
        # (six threads on two cores), six looping modules made every other job there wait (another
        # client's read_file 2.8 s). Modules run on threads of their own: one per execution slot, and
        # as many again for runs a call gave up on (a host call stuck past the limit), made as needed.
        self._threads = ThreadPoolExecutor(max_workers=2 * self._max_concurrent, thread_name_prefix="awb-wasm")
        self._linker = make_linker(self._engine)
        self._stop.clear()
        self._ticker = threading.Thread(target=self._tick, name="awb-wasm-epoch", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        # The clock only runs while a module does: an idle ticker would still take the GIL 200 times
        # a second from the thread serving every other request (measured: +0.3 ms per MCP request).
        # It keeps ticking after close() while a module still runs (a call abandoned at its wall-clock
        # limit): without ticks that module would never reach its epoch deadline, and its thread would
        # never end.
        # The epoch follows the wall clock: a turn this thread got late (the GIL held elsewhere; a busy
        # server let a looping module run 28 times its limit, past the call that had given up on it) makes
        # up the ticks it missed, so a module's deadline is its time limit however busy the server is.
        engine = self._engine
        origin, ticked = time.monotonic(), 0
        while True:
            with self._clock:
                if self._active == 0:
                    self._clock.wait_for(lambda: self._active > 0 or self._stop.is_set())
                    if self._active == 0:
                        return
                    origin, ticked = time.monotonic(), 0  # time no module ran is no module's
            time.sleep(TICK_S)
            due = int((time.monotonic() - origin) / TICK_S)
            while ticked < due:
                engine.increment_epoch()
                ticked += 1

    @contextlib.contextmanager
    def _ticking(self, engine: Any) -> Iterator[None]:
        with self._clock:
            # Checked under the clock, which the ticker holds to decide whether to stop: a run that got its
            # thread after a close stopped the ticker (or after a start made another engine, which the
            # ticker ticks instead) would have no clock to end it at its deadline.
            if self._stop.is_set() or self._engine is not engine:
                raise self._closed()
            self._active += 1
            self._clock.notify_all()
        try:
            yield
        finally:
            with self._clock:
                self._active -= 1

    async def close(self) -> None:
        """Under the start's lock: a close that arrived while the runtime started, claiming its identity,
        returned before that start made its engine, ticker and compile process, which nothing then ended."""
        async with self._starting:
            await self._close()

    async def _close(self) -> None:
        self._stop.set()
        with self._clock:
            self._clock.notify_all()
        if self._ticker is not None:
            await asyncio.to_thread(self._ticker.join, 2)
            self._ticker = None
        await self._compilers.close()
        if self._threads is not None:
            self._threads.shutdown(wait=False)  # a module still running ends at its epoch deadline
            self._threads = None
        self._engine = None
        self._linker = None
        if self._worker_ids is not None:  # its compile processes are ended
            self._worker_ids = None
            self.identity.release()
        self._modules.clear()

    def refusal(self) -> str | None:
        """Why this runtime refuses to run tools here (no identity for its compile processes), or None."""
        return self._refusal

    def protections(self) -> dict[str, bool]:
        return {
            "engine_isolation": True,
            "epoch_deadline": True,
            "memory_limit": True,
            "no_filesystem": True,
            "compile_process": True,
        }

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        started = time.perf_counter()
        peak: list[int] = []
        token = peak_memory.set(peak)
        try:
            value, logs = await self._run(code, params, limits, host, check=False)
        finally:
            peak_memory.reset(token)
        encoded = encode_result(value, limits.max_output_bytes)
        return Execution(
            value=value,
            logs=logs,
            duration_ms=(time.perf_counter() - started) * 1000,
            peak_memory_bytes=peak[-1] if peak else None,
            value_json=encoded.text,
            depth=encoded.depth,
        )

    async def check(self, code: str, limits: Limits) -> None:
        await self._run(code, {}, limits, None, check=True)

    async def _run(
        self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions | None, *, check: bool
    ) -> tuple[Any, list[str]]:
        with self._slots.take():
            await self.start()
            if self._refusal is not None:
                raise Unavailable(self._refusal, runtime=self.name)
            engine = self._engine
            try:
                module = await self._module(code, limits, engine)
            except AwbError:
                if self._engine is not engine:  # its compile process was ended by the close, or not started
                    raise self._closed() from None
                raise
            threads, linker = self._threads, self._linker
            if self._engine is not engine or threads is None:
                raise self._closed()
            call = WasmCall(host)
            token = current_call.set(call)
            try:
                # The epoch deadline stops the module; the extra second only bounds a stuck host call.
                running = asyncio.get_running_loop().run_in_executor(
                    threads,
                    contextvars.copy_context().run,  # the call and its peak memory travel with the run
                    functools.partial(self._run_ticking, engine, linker, module, params, limits, call, check),
                )
                return await asyncio.wait_for(running, limits.timeout_ms / 1000 + 1)
            except TimeoutError:
                raise ToolTimeout.past(limits.timeout_ms) from None
            finally:
                current_call.reset(token)

    def _closed(self) -> Unavailable:
        # A call the runtime took before a close (which waited for its start) finds it closed on its way.
        return Unavailable("the wasm runtime was closed during the call", runtime=self.name)

    async def _module(self, code: str, limits: Limits, engine: Any) -> Any:
        """The compiled module, from the cache or compiled off the loop within the call's time limit."""
        if len(code) > MAX_MODULE_CHARS:
            raise ToolRuntimeError(
                f"the module is {len(code)} characters, over the {MAX_MODULE_CHARS}-character cap",
                size=len(code),
                limit=MAX_MODULE_CHARS,
            )
        key = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            module = self._modules.get(key)
            if module is not None:
                self._modules.move_to_end(key)
                return module
            slow = key in self._too_slow
        if slow:
            raise ToolTimeout("the module took too long to compile before; refused", limit_ms=limits.timeout_ms)
        try:
            artifact = await self._compilers.compile(code, limits)
        except ToolTimeout:
            # Its compile process is gone; remembered so that retries do not spend the time again.
            with self._lock:
                self._too_slow[key] = None
                while len(self._too_slow) > SLOW_MODULES_REMEMBERED:
                    self._too_slow.popitem(last=False)
            raise
        module = await asyncio.to_thread(_load, engine, artifact)
        if self._engine is not engine:  # closed meanwhile: a module of that engine runs in no other
            return module
        with self._lock:
            self._modules[key] = module
            while len(self._modules) > MODULE_CACHE_SIZE:
                self._modules.popitem(last=False)
        return module

    def _run_ticking(
        self,
        engine: Any,
        linker: Any,
        module: Any,
        params: dict[str, Any],
        limits: Limits,
        call: WasmCall,
        check: bool,
    ) -> tuple[Any, list[str]]:
        # Counted in the thread that runs the module, so the clock keeps ticking for as long as it
        # runs, even past an abandoned wait_for. The engine and linker are the call's own: a close
        # while the run waited for its thread leaves the runtime none.
        with self._ticking(engine):
            deadline = max(1, int(limits.timeout_ms / 1000 / TICK_S))  # epochs: the ticker's ticks
            return run_module(engine, linker, module, params, limits, call, check, deadline=deadline)


def _load(engine: Any, artifact: bytes) -> Any:
    """The module a compile process compiled, in `engine` (the one the call started with: a close on the
    way leaves the runtime none). Loading trusts the artifact as native code: it comes from our own
    compile process, which runs the same wasmtime on the same module (a compiler bug that took it over
    would have taken the server over when it compiled in the server)."""
    import wasmtime

    try:
        return wasmtime.Module.deserialize(engine, artifact)
    except wasmtime.WasmtimeError as exc:
        raise ToolRuntimeError(f"the compiled module does not load: {first_line(exc)}") from None
