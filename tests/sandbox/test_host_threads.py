"""Host functions that touch the disk or the store (`read_file`, `write_file`) are answered on a
thread of the server's, never on the event loop, in the runtimes whose workers ask over a pipe
(cpython, javascript): staging a write is a store transaction, and a tool staging in a loop held
every other request up for as long as each one took."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_cpython_frames import FRAME

from awb.errors import OutputExceeded
from awb.sandbox import host as host_module
from awb.sandbox import wire
from awb.sandbox.base import Runtime
from awb.sandbox.host import HostBridge
from awb.sandbox.wire import answer_host_call
from sandbox_support import LIMITS, Staged, failure

pytestmark = pytest.mark.anyio

CODE = {
    "cpython": "def run(params):\n    write_file('out.txt', 'x')\n    return read_file('data.txt')\n",
    "javascript": "function run(p) { writeFile('out.txt', 'x'); return readFile('data.txt'); }",
}


@pytest.fixture
def small_host_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of a few hundred host calls: a flood reaches it in a moment, not 10,000 round trips."""
    monkeypatch.setattr(host_module, "MAX_HOST_CALLS_PER_CALL", 300)


class ThreadsSeen(HostBridge):
    """A host that notes the thread each file call ran on."""

    def __init__(self, granted: Path) -> None:
        super().__init__(read_dirs=[str(granted)], stage=Staged(), max_log_bytes=LIMITS.max_log_bytes)
        self.threads: dict[str, threading.Thread] = {}

    def read_file(self, path: str) -> str:
        self.threads["read_file"] = threading.current_thread()
        return super().read_file(path)

    def write_file(self, path: str, data: str) -> dict[str, Any]:
        self.threads["write_file"] = threading.current_thread()
        return super().write_file(path, data)


@pytest.mark.parametrize("name", ["cpython", "javascript"])
async def test_file_host_calls_run_off_the_event_loop(
    name: str, cpython: Runtime, javascript: Runtime, dirs: dict[str, Path]
) -> None:
    runtime = {"cpython": cpython, "javascript": javascript}[name]
    host = ThreadsSeen(dirs["granted"])
    with anyio.fail_after(20):
        result = await runtime.execute(CODE[name], {}, LIMITS, host)
    assert result.value == "hello from a granted dir"
    loop_thread = threading.current_thread()
    assert set(host.threads) == {"read_file", "write_file"}
    assert all(thread is not loop_thread for thread in host.threads.values()), host.threads


async def test_a_log_is_answered_on_the_loop_and_an_unknown_call_is_refused(dirs: dict[str, Path]) -> None:
    host = ThreadsSeen(dirs["granted"])
    assert await answer_host_call(host, {"op": "host", "fn": "log", "args": ["hi"]}) == {"ok": True, "value": None}
    assert host.logs == ["hi"]
    refused = await answer_host_call(host, {"op": "host", "fn": "exec", "args": []})
    assert refused["ok"] is False and refused["error"]["code"] == "sandbox_violation"


MALFORMED_CALLS = {
    "javascript": "function run(p) { for (;;) { __awb_host('nope', '[]'); __awb_host('log', '[1]'); } }",
    "cpython": FRAME
    + """
CALLS = [("nope", []), ("log", [1])]

def run(params):
    inbox, outbox = pipes()
    for n in range(10**9):
        fn, args = CALLS[n % len(CALLS)]
        os.write(outbox, frame({"op": "host", "id": n, "fn": fn, "args": args}))
        (size,) = struct.unpack('>I', os.read(inbox, 4))
        while size:
            size -= len(os.read(inbox, size))
""",
}


MALFORMED_CALLS["cpython_call_tool"] = MALFORMED_CALLS["cpython"].replace(
    'CALLS = [("nope", []), ("log", [1])]', 'CALLS = [("call_tool", ["mail", "send", "{}"]), ("call_tool", [1])]'
)


@pytest.mark.parametrize("name", ["cpython", "cpython_call_tool", "javascript"])
@pytest.mark.usefixtures("small_host_budget")
async def test_malformed_host_calls_count_against_the_calls_host_call_budget(
    name: str, cpython: Runtime, javascript: Runtime, host_factory: Any
) -> None:
    """A call to no host function, or with arguments of the wrong kind (or `call_tool`, a plan's, from a
    tool), is refused before any host function runs: uncounted, a tool could make them until its time
    limit, each a round trip answered on the event loop (55% of a server CPU for one such call)."""
    runtime = javascript if name == "javascript" else cpython
    host = host_factory()
    with anyio.fail_after(20):
        error = await failure(runtime, MALFORMED_CALLS[name], {}, host, LIMITS)
    assert (error.code, error.details.get("reason")) == ("output_exceeded", "host_calls"), error


QUOTED_READS = {
    "javascript": "function run(p) { try { return readFile('nul.txt').length; } catch (e) { return 'refused: ' + e.message; } }",
    "cpython": "def run(params):\n    try:\n        return len(read_file('nul.txt'))\n    except Exception as exc:\n"
    "        return f'refused: {exc}'\n",
}


@pytest.mark.parametrize("name", ["cpython", "javascript"])
async def test_a_read_whose_reply_quotes_past_what_a_worker_reads_is_a_refusal_the_tool_can_catch(
    name: str, cpython: Runtime, javascript: Runtime, dirs: dict[str, Path], host_factory: Any
) -> None:
    """2 MB of NUL characters is under read_file's 4 MB, but JSON quotes each as six bytes: the 12 MB
    reply passed the 8 MB a worker reads of one, and the worker died ("died during the call")."""
    (dirs["granted"] / "nul.txt").write_bytes(b"\x00" * (2 << 20))
    runtime = javascript if name == "javascript" else cpython
    with anyio.fail_after(20):
        result = await runtime.execute(QUOTED_READS[name], {}, LIMITS, host_factory())
        assert isinstance(result.value, str) and result.value.startswith("refused: "), result.value
        assert "bytes a sandbox worker reads" in result.value
        (dirs["granted"] / "nul.txt").write_bytes(b"\x00" * 1000)
        assert (await runtime.execute(QUOTED_READS[name], {}, LIMITS, host_factory())).value == 1000


def test_the_servers_reply_cap_is_the_workers() -> None:
    import sys

    sys.path.insert(0, str(Path(wire.__file__).with_name("cpython")))
    try:
        import tool_process  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    assert wire.WORKER_REPLY_BYTES == tool_process.MAX_REPLY_BYTES


LOADING_FLOODS = {
    "javascript": "for (;;) { try { log(''); } catch (e) {} }\nfunction run(p) { return 1; }",
    "cpython": "while True:\n    try:\n        log('')\n    except Exception:\n        pass\n\n"
    "def run(params):\n    return 1\n",
}


@pytest.mark.parametrize("name", ["cpython", "javascript"])
@pytest.mark.usefixtures("small_host_budget")
async def test_host_calls_made_while_the_code_loads_for_a_check_count_too(
    name: str, cpython: Runtime, javascript: Runtime
) -> None:
    """A craft's load check runs the code's top level with every host function refused: uncounted, a
    loop calling `log` there ran to the check's time limit, 60% of a server CPU answering it."""
    runtime = javascript if name == "javascript" else cpython
    with anyio.fail_after(20), pytest.raises(OutputExceeded) as ended:
        await runtime.check(LOADING_FLOODS[name], LIMITS)
    assert ended.value.details.get("reason") == "host_calls"
