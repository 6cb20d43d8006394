"""Helpers shared by the test suite (a plain module: several test folders have their own conftest)."""

from __future__ import annotations

import inspect
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from awb.sandbox.base import Execution, HostFunctions, Limits, Runtime
    from awb.workbench import Workbench

REPO = Path(__file__).resolve().parent.parent
#: Where the web panel is served in its tests (the default bind and port); what its Origin checks expect.
ORIGIN = "http://127.0.0.1:7777"
#: The panel's sign-in cookie there: each server's is named for its port (`awb.panel_access.pass_cookie`).
PANEL_COOKIE = "awb_panel_7777"

ADD_CODE = "def run(params):\n    return params['a'] + params['b']\n"
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def add_tool(name: str = "add_numbers", **extra: Any) -> dict[str, Any]:
    """A craft request for a small, correct tool."""
    return {
        "name": name,
        "description": "Add two numbers and return the sum",
        "code": ADD_CODE,
        "input_schema": ADD_SCHEMA,
        "examples": [{"params": {"a": 1, "b": 2}, "expected": 3}],
        "tags": ["math"],
        **extra,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def awb_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for an `awb` subprocess bound to this test's inventory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env.update(
        AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"),
        AWB_PID_FILE=str(tmp_path / "awb.pid"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def awb_json(tmp_path: Path, *args: str, **extra_env: str) -> dict[str, Any]:
    """`python -m awb ARGS --json` on this test's inventory (`awb_env`); what it printed, as JSON. It must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "awb", *args, "--json"],
        env=awb_env(tmp_path, **extra_env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@contextmanager
def awb_http(cwd: Path, env: dict[str, str], *args: str) -> Iterator[str]:
    """A real `python -m awb start --transport http --port 0 ARGS` process in `cwd`; yields its base URL
    (http://127.0.0.1:PORT, MCP under /mcp), read from its ready line. Port 0: the kernel picks a port the
    server holds from the start, where a port probed free beforehand may be taken by then (another worker)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--port", "0", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    reader: threading.Thread | None = None
    try:
        reader, url = wait_for_ready(process)
        yield url.removesuffix("/mcp")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if reader is not None:
            reader.join(timeout=5)
        if process.stderr is not None:
            process.stderr.close()


def wait_for_ready(process: subprocess.Popen[bytes], timeout: float = 30.0) -> tuple[threading.Thread, str]:
    """Block (bounded) until the server prints its ready line on stderr; drain stderr afterwards.
    Returns the draining thread and the MCP URL the line names."""
    assert process.stderr is not None
    stream = process.stderr
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)
        lines.put(b"")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[bytes] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"server not ready within {timeout} s: {b''.join(seen)!r}") from None
        if not line:
            raise RuntimeError(f"server exited before it was ready: {b''.join(seen)!r}")
        seen.append(line)
        ready = re.search(rb"awb: ready on (\S+)", line)
        if ready:
            return reader, ready.group(1).decode()


#: A tool that says it is running, then waits for ever (until its call is cancelled, or its time limit).
WAITS = {
    "name": "waits",
    "description": "Wait until told otherwise",
    "code": "def run(params):\n    log('running')\n    n = 0\n    while params.get('forever', True):\n"
    "        n += 1\n    return n\n",
    "examples": [{"params": {"forever": False}, "expected": 0}],
}


class Announcing:
    """The real runtime; `running` is set once a run's tool has logged, so it is inside its worker."""

    def __init__(self, inner: Runtime) -> None:
        self.inner = inner
        self.name, self.language = inner.name, inner.language
        self.running = threading.Event()

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        logged = host.log

        def log(message: str) -> None:
            logged(message)
            self.running.set()

        host.log = log  # type: ignore[method-assign]
        return await self.inner.execute(code, params, limits, host)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def announcing(workbench: Workbench) -> Announcing:
    """Craft WAITS and let the workbench run its tools through an `Announcing` runtime."""
    await workbench.craft(WAITS)
    runtime = Announcing(workbench.runtimes["monty"])
    workbench.runtimes["monty"] = runtime  # type: ignore[assignment]
    return runtime


async def until_running(runtime: Announcing) -> None:
    """Wait until the tool runs (bound it: `anyio.fail_after`)."""
    while not runtime.running.is_set():
        await anyio.to_thread.run_sync(runtime.running.wait, 0.05)


def once_after(target: Any, meanwhile: Callable[[], Any], *names: str) -> None:
    """Run `meanwhile` (another server's turn) once, right after the first call of any of `target.<names>`
    (sync or async methods) returns, before the rest of the request goes on: a race between two servers
    made to happen in one order."""
    done = False

    def turn() -> None:
        nonlocal done
        if not done:
            done = True
            meanwhile()

    for name in names:
        original = getattr(target, name)
        if inspect.iscoroutinefunction(original):

            async def awaited(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                result = await _original(*args, **kwargs)
                turn()
                return result

            setattr(target, name, awaited)
        else:

            def returned(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                result = _original(*args, **kwargs)
                turn()
                return result

            setattr(target, name, returned)


@asynccontextmanager
async def longest_gap() -> AsyncIterator[Callable[[], float]]:
    """While inside, a task on the loop ticks every 10 ms; yields the most CPU time the loop's thread spent
    between two ticks: work done on the loop. Not the wall time between them, which a loaded machine
    stretches as it likes (an idle event loop at load 10 on two cores saw gaps of 0.7 s)."""
    gaps = [0.0]

    async def tick() -> None:
        last = time.thread_time()  # this thread's: the tick runs on the loop
        while True:
            await anyio.sleep(0.01)  # a tick, not a wait for something: what is measured is what ran meanwhile
            now = time.thread_time()
            gaps[0] = max(gaps[0], now - last)
            last = now

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(tick)
        yield lambda: gaps[0]
        tasks.cancel_scope.cancel()


#: The longest text a test of big results lets the event loop mask itself: the run's small events and
#: summaries, never the result.
MAX_MASKED_ON_LOOP = 1_000_000


@dataclass
class LoopShare:
    """What the event loop did itself while a run went on: `held`, the most CPU time its thread spent
    between two ticks; `masked_on_loop`, the longest text it masked for credentials itself (the
    masking functions are watched, so a redaction moved onto the loop is caught however fast the
    machine is)."""

    held: float = 0.0
    masked_on_loop: int = 0


@contextmanager
def masking_watched(share: LoopShare) -> Iterator[None]:
    """Record in `share` the longest text that `mask_credentials` masks on this thread (the loop's)."""
    import awb.blueprints.journal
    import awb.credentials
    import awb.redaction

    loop_thread = threading.get_ident()
    modules = (awb.redaction, awb.blueprints.journal)
    real = awb.credentials.mask_credentials

    def watched(text: str, mask: str) -> str:
        if threading.get_ident() == loop_thread:
            share.masked_on_loop = max(share.masked_on_loop, len(text))
        return real(text, mask)

    for module in modules:
        module.mask_credentials = watched  # type: ignore[assignment]
    try:
        yield
    finally:
        for module in modules:
            module.mask_credentials = real  # type: ignore[assignment]


async def run_while_ticking(run: Callable[[], Awaitable[Any]]) -> tuple[Any, LoopShare]:
    share = LoopShare()
    with masking_watched(share):
        async with longest_gap() as gap:
            with anyio.fail_after(60):
                result = await run()
    share.held = gap()
    return result, share


def embeddings_installed() -> bool:
    """Whether the embed extra's local model can be loaded here (tests that need it skip otherwise)."""
    from awb.search.embeddings import EmbedderUnavailable, local_model_files

    try:
        local_model_files()
    except EmbedderUnavailable:
        return False
    return True


@contextmanager
def loopback_http(
    handler: type[BaseHTTPRequestHandler], *, daemon_threads: bool = False, poll_interval: float = 0.5
) -> Iterator[ThreadingHTTPServer]:
    """`handler` served on a free loopback port from a thread of its own for the length of the block;
    shut down and closed after it. Fake providers, schema hosts and attacker sites in the tests."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = daemon_threads
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
