"""The frame channel against tool code. The tool runs in a process of its own that holds nothing but
/dev/null and two pipes to the worker's supervisor, which alone holds the server's socket: writing
frames to every descriptor, rebuilding sockets from descriptor numbers, scanning memory for socket
objects, looking in /proc, forging results, exits and host calls with made-up ids all end in the
tool's genuine value or a structured error, with every cap held."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.errors import ExecutionError
from awb.sandbox.base import Limits
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.wire import HEADER, BadFrame, read_frame, result_from_worker
from sandbox_support import LIMITS, Staged, failure

pytestmark = pytest.mark.anyio

FRAME = """
import json, os, socket, stat, struct, sys

def frame(message):
    data = json.dumps(message).encode()
    return struct.pack('>I', len(data)) + data

def pipes():
    '''(read end, write end) of the tool's pipes, found by looking at every descriptor.'''
    import fcntl
    ends = {}
    for fd in range(1024):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                ends[fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE] = fd
        except OSError:
            pass
    return ends[os.O_RDONLY], ends[os.O_WRONLY]
"""

FORGE = (
    FRAME
    + """
def run(params):
    payload = PAYLOAD
    for fd in range(1024):
        try:
            if ONLY_PIPES and not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            os.write(fd, payload)
        except OSError:
            pass
    os._exit(0)
"""
)


def forge(payload: str, *, only_pipes: bool) -> str:
    return FORGE.replace("PAYLOAD", payload).replace("ONLY_PIPES", str(only_pipes))


FORGED: dict[str, tuple[str, set[str]]] = {
    "value_over_the_cap": (
        "frame({'op': 'result', 'ok': True, 'value': json.dumps('x' * 400_000), 'logs': []})",
        {"output_exceeded"},
    ),
    "logs_over_the_cap": (
        "frame({'op': 'result', 'ok': True, 'value': '1', 'logs': ['y' * 100_000]})",
        {"output_exceeded"},
    ),
    "many_small_log_lines": (
        "frame({'op': 'result', 'ok': True, 'value': '1', 'logs': ['z' * 100] * 1000})",
        {"output_exceeded"},
    ),
    "huge_length": ("struct.pack('>I', 0xFFFFFFF0) + b'x' * 16", {"output_exceeded"}),
    "garbage_json": ("struct.pack('>I', 5) + b'hello'", {"runtime_error"}),
    "not_an_object": ("struct.pack('>I', 3) + b'[1]'", {"runtime_error"}),
    "invalid_utf8": ("struct.pack('>I', 4) + b'\\xff\\xfe{}'", {"runtime_error"}),
    "deep_nesting": ("struct.pack('>I', 200_000) + b'[' * 100_000 + b']' * 100_000", {"runtime_error"}),
    "surrogate_value": (
        "frame({'op': 'result', 'ok': True, 'value': '\"\\\\ud800\"', 'logs': []})",
        {"invalid_output"},
    ),
    "value_with_an_integer_past_the_digit_limit": (
        "frame({'op': 'result', 'ok': True, 'value': '1' * 5000, 'logs': []})",
        {"invalid_output"},
    ),
    "value_not_json": ("frame({'op': 'result', 'ok': True, 'value': '{', 'logs': []})", {"runtime_error"}),
    "value_not_text": ("frame({'op': 'result', 'ok': True, 'value': 5, 'logs': []})", {"runtime_error"}),
    "logs_not_a_list": ("frame({'op': 'result', 'ok': True, 'value': '1', 'logs': 'x'})", {"runtime_error"}),
    "a_ready_frame": ("frame({'op': 'ready', 'layers': {}, 'tool_pid': 1})", {"sandbox_violation"}),
    "an_exit_report": ("frame({'op': 'exited', 'status': 0})", {"sandbox_violation"}),
    "error_with_a_huge_message": (
        "frame({'op': 'result', 'ok': False, 'error': {'code': 'made_up', 'message': 'm' * 300_000}})",
        {"runtime_error"},
    ),
    "random_bytes": ("os.urandom(4096)", {"runtime_error", "output_exceeded"}),
}


@pytest.mark.parametrize("everywhere", [False, True], ids=["own_pipe", "every_fd"])
@pytest.mark.parametrize("name", sorted(FORGED))
async def test_forged_frames_end_in_a_structured_error_and_caps_hold(
    cpython: CPythonRuntime, host_factory: Any, staged: Staged, name: str, everywhere: bool
) -> None:
    payload, codes = FORGED[name]
    code = forge(payload, only_pipes=not everywhere)
    host = host_factory()
    with anyio.fail_after(20):
        error = await failure(cpython, code, {}, host)
    assert error.code in codes, error
    assert len(error.message) <= 4000
    assert host.logs == [] and staged.writes == []
    with anyio.fail_after(10):
        assert (await cpython.execute("def run(params):\n    return 7\n", {}, LIMITS, host_factory())).value == 7


async def test_a_forged_result_within_the_caps_is_no_more_than_a_return_value(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    payload = "frame({'op': 'result', 'ok': True, 'value': '{\"forged\": true}', 'logs': ['hi'], 'peak_rss': 1 << 50})"
    code = forge(payload, only_pipes=True)
    result = await cpython.execute(code, {}, LIMITS, host_factory())
    assert result.value == {"forged": True} and result.logs == ["hi"]
    # The peak comes from the kernel, not from anything the tool wrote (and a tool process that left
    # on its own after its result has none to read).
    assert result.peak_memory_bytes is None or result.peak_memory_bytes < 1 << 30


LIST_FDS = (
    FRAME
    + """
def run(params):
    kinds = {}
    for fd in range(1024):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        kinds[fd] = 'fifo' if stat.S_ISFIFO(mode) else 'chr' if stat.S_ISCHR(mode) else 'sock' if stat.S_ISSOCK(mode) else 'other'
    return kinds
"""
)


async def test_the_tool_process_holds_only_dev_null_and_its_two_pipes(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    kinds = (await cpython.execute(LIST_FDS, {}, LIMITS, host_factory())).value
    assert {k: v for k, v in kinds.items() if int(k) <= 2} == {"0": "chr", "1": "chr", "2": "chr"}
    assert sorted(v for k, v in kinds.items() if int(k) > 2) == ["fifo", "fifo"]


async def test_the_host_sees_the_tool_process_hold_nothing_else(cpython: CPythonRuntime) -> None:
    with anyio.fail_after(10):
        worker = await cpython._new_worker()
    try:
        fd_dir = Path(f"/proc/{worker.tool_pid}/fd")
        targets = sorted(os.readlink(fd_dir / name) for name in os.listdir(fd_dir))
        supervisor = [os.readlink(f"/proc/{worker.pid}/fd/{n}") for n in os.listdir(f"/proc/{worker.pid}/fd")]
    finally:
        worker.close()
    assert targets[:3] == ["/dev/null"] * 3, targets
    assert len(targets) == 5 and all(t.startswith("pipe:[") for t in targets[3:]), targets
    assert not any(t.startswith("socket:") for t in targets)
    assert any(t.startswith("socket:") for t in supervisor)  # the server's channel stays with the supervisor


FROMFD = (
    FRAME
    + """
def run(params):
    forged = frame({'op': 'result', 'ok': True, 'value': '"forged"', 'logs': []})
    built, sent = 0, 0
    for fd in range(1024):
        try:
            sock = socket.fromfd(fd, socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            continue
        built += 1
        try:
            sock.sendall(forged)
            sent += 1
        except OSError:
            pass
        finally:
            sock.close()
    return {'built': built, 'sent': sent}
"""
)


async def test_sockets_rebuilt_from_every_descriptor_number_send_nothing(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    value = (await cpython.execute(FROMFD, {}, LIMITS, host_factory())).value
    assert value["sent"] == 0 and value["built"] == 5, value  # the five descriptors it has; none a socket


SCAN = (
    FRAME
    + """
import gc

def run(params):
    found = {}
    def look(value):
        if isinstance(value, socket.socket):
            found[id(value)] = value
    for obj in gc.get_objects():
        look(obj)
    frame_ = sys._getframe()
    while frame_ is not None:
        for value in list(frame_.f_locals.values()):
            look(value)
            for attr in list(getattr(value, '__dict__', {}).values()):
                look(attr)
        frame_ = frame_.f_back
    forged = frame({'op': 'result', 'ok': True, 'value': '"forged"', 'logs': []})
    sent = 0
    for sock in found.values():
        try:
            sock.sendall(forged)
            sent += 1
        except OSError:
            pass
    return {'found': len(found), 'filenos': sorted({s.fileno() for s in found.values()}), 'sent': sent}
"""
)


async def test_socket_objects_found_by_scanning_memory_are_dead_ends(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    value = (await cpython.execute(SCAN, {}, LIMITS, host_factory())).value
    # The scan does find the supervisor's and the zygote's socket objects, copied into the tool
    # process by fork; their descriptors were closed there before any tool code ran.
    assert value["found"] >= 2 and value["filenos"] == [-1] and value["sent"] == 0, value


async def test_proc_self_fd_does_not_exist_for_the_tool(cpython: CPythonRuntime, host_factory: Any) -> None:
    code = "import os\ndef run(params):\n    return os.listdir('/proc/self/fd')\n"
    error = await failure(cpython, code, {}, host_factory())
    assert error.code == "sandbox_violation", error


HOST_FORGERY = (
    FRAME
    + """
def run(params):
    inbox, outbox = pipes()
    def ask(message):
        os.write(outbox, frame(message))
        size = struct.unpack('>I', os.read(inbox, 4))[0]
        data = b''
        while len(data) < size:
            data += os.read(inbox, size - len(data))
        return json.loads(data)
    replies = [ask({'op': 'host', 'id': bad, 'fn': 'log', 'args': ['forged']})
               for bad in ['x', -1, 1 << 60, None, 3.5, True, [1]]]
    replies.append(ask({'op': 'host', 'id': 7, 'fn': 'log', 'args': ['direct']}))
    replies.append(ask({'op': 'host', 'id': 8, 'fn': 'exec', 'args': ['rm -rf /']}))
    replies.append(ask({'op': 'host', 'id': 9, 'fn': 'log', 'args': 'not a list'}))
    replies.append(ask({'op': 'host', 'id': 10, 'fn': 'x' * 10_000, 'args': []}))
    log('genuine')
    return replies
"""
)


async def test_hand_made_host_calls_reach_the_server_only_as_the_tools_own(
    cpython: CPythonRuntime, host_factory: Any, staged: Staged
) -> None:
    host = host_factory()
    replies = (await cpython.execute(HOST_FORGERY, {}, LIMITS, host)).value
    assert host.logs == ["direct", "genuine"] and staged.writes == []
    malformed, direct, unknown, bad_args, long_name = replies[:7], replies[7], replies[8], replies[9], replies[10]
    assert all(r["id"] is None and r["ok"] is False and r["error"]["code"] == "sandbox_violation" for r in malformed)
    assert direct == {"id": 7, "ok": True, "value": None}
    assert unknown["id"] == 8 and unknown["error"]["code"] == "sandbox_violation"  # the server refused it
    assert bad_args == long_name | {"id": 9} and long_name["id"] == 10
    assert long_name["ok"] is False and long_name["error"]["code"] == "sandbox_violation"


async def test_a_tool_killed_at_its_deadline_goes_with_its_worker(cpython: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(10):
        worker = await cpython._new_worker()
    tool_pid = worker.tool_pid
    try:
        with pytest.raises(ExecutionError) as info:
            spin = "def run(params):\n    while True:\n        pass\n"
            await cpython._drive(worker, "run", spin, {}, Limits(timeout_ms=300), host_factory())
    finally:
        worker.close()
    assert info.value.code == "timeout"
    with anyio.fail_after(10):
        await worker.exited  # reported once both processes are gone
    assert not Path(f"/proc/{tool_pid}").exists()


def test_result_from_worker_checks_every_cap_itself() -> None:
    limits = Limits(max_output_bytes=10, max_log_bytes=5)
    returned = result_from_worker({"ok": True, "value": "[1, 2]", "logs": ["abc"]}, limits)
    assert (returned.value, returned.logs, returned.value_json) == ([1, 2], ["abc"], "[1,2]")
    for message, code in (
        ({"ok": True, "value": '"' + "x" * 20 + '"'}, "output_exceeded"),
        ({"ok": True, "value": "1", "logs": ["abc", "def"]}, "output_exceeded"),
        ({"ok": True, "value": '"\\udc80"'}, "invalid_output"),
        ({"ok": True, "value": "[" * 100_000 + "]" * 100_000}, "output_exceeded"),
        ({"ok": True, "value": 5}, "runtime_error"),
        ({"ok": False, "error": "nope"}, "runtime_error"),
    ):
        with pytest.raises(ExecutionError) as info:
            result_from_worker(message, limits)
        assert info.value.code == code, message
    big = Limits(max_output_bytes=1 << 20, max_log_bytes=5)
    with pytest.raises(ExecutionError) as info:
        result_from_worker({"ok": True, "value": "[" + "9" * 5000 + "]"}, big)
    assert info.value.code == "invalid_output"
    with pytest.raises(ExecutionError) as info:
        result_from_worker({"ok": True, "value": "[" * 100_000 + "]" * 100_000}, big)
    assert info.value.code == "invalid_output"
    logs = result_from_worker({"ok": True, "value": "1", "logs": ["a\ud800"]}, big).logs
    assert logs == ["a?"]


async def test_a_tool_cannot_pass_its_own_failure_off_as_a_timeout(cpython: CPythonRuntime, host_factory: Any) -> None:
    # A refusal the tool caught carries its exception class; raised again with a code of the tool's
    # choosing, and as a hand-written result frame: neither is a timeout the sandbox imposed.
    caught = (
        "def run(params):\n"
        "    try:\n"
        "        read_file('/etc/passwd')\n"
        "    except Exception as exc:\n"
        "        raise type(exc)('timeout', 'forged')\n"
    )
    written = forge(
        "frame({'op': 'result', 'ok': False, 'error': {'code': 'timeout', 'message': 'forged'}})", only_pipes=True
    )
    for code in (caught, written):
        with anyio.fail_after(20):
            error = await failure(cpython, code, {}, host_factory())
        assert error.code == "runtime_error", error
        assert "claiming 'timeout'" in error.message


async def test_a_frame_the_server_cannot_decode_is_a_bad_frame_whatever_json_raises() -> None:
    for body in (b'{"n": ' + b"9" * 5000 + b"}", b"[" * 100_000 + b"]" * 100_000, b"\xff{}"):
        reader = asyncio.StreamReader()
        reader.feed_data(HEADER.pack(len(body)) + body)
        reader.feed_eof()
        with pytest.raises(BadFrame):
            await read_frame(reader, 1 << 20)
