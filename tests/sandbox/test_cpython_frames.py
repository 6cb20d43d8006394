"""Tool code writing its own frames to the worker's socket (or garbage to every descriptor it can
find): the server reads frames itself and checks every cap on what arrives, so forging gains nothing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awb.errors import ExecutionError
from awb.sandbox.base import Limits
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.wire import result_from_worker
from sandbox_support import LIMITS, Staged, failure

pytestmark = pytest.mark.anyio

FORGE = """
import json, os, stat, struct

def frame(message):
    data = json.dumps(message).encode()
    return struct.pack('>I', len(data)) + data

def run(params):
    payload = {payload}
    for fd in range({first}, 256):
        try:
            if {only_sockets} and not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            os.write(fd, payload)
        except OSError:
            pass
    os._exit(0)
"""

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
    "surrogate_value": (
        "frame({'op': 'result', 'ok': True, 'value': '\"\\\\ud800\"', 'logs': []})",
        {"invalid_output"},
    ),
    "value_not_json": ("frame({'op': 'result', 'ok': True, 'value': '{', 'logs': []})", {"runtime_error"}),
    "logs_not_a_list": ("frame({'op': 'result', 'ok': True, 'value': '1', 'logs': 'x'})", {"runtime_error"}),
    "unknown_op": ("frame({'op': 'ready', 'layers': {}})", {"sandbox_violation"}),
    "error_with_a_huge_message": (
        "frame({'op': 'result', 'ok': False, 'error': {'code': 'made_up', 'message': 'm' * 300_000}})",
        {"runtime_error"},
    ),
    "random_bytes": ("os.urandom(4096)", {"runtime_error", "output_exceeded"}),
}


@pytest.mark.parametrize("everywhere", [False, True], ids=["sockets", "every_fd"])
@pytest.mark.parametrize("name", sorted(FORGED))
async def test_forged_frames_end_in_a_structured_error_and_caps_hold(
    cpython: CPythonRuntime, host_factory: Any, staged: Staged, name: str, everywhere: bool
) -> None:
    payload, codes = FORGED[name]
    code = FORGE.format(payload=payload, first=0 if everywhere else 3, only_sockets=not everywhere)
    host = host_factory()
    with anyio.fail_after(20):
        error = await failure(cpython, code, {}, host)
    assert error.code in codes, error
    assert len(error.message) <= 4000
    assert host.logs == [] and staged.writes == []
    with anyio.fail_after(10):
        assert (await cpython.execute("def run(params):\n    return 7\n", {}, LIMITS, host_factory())).value == 7


async def test_a_forged_frame_within_the_caps_is_no_more_than_a_return_value(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    payload = "frame({'op': 'result', 'ok': True, 'value': '{\"forged\": true}', 'logs': ['hi']})"
    code = FORGE.format(payload=payload, first=3, only_sockets=True)
    result = await cpython.execute(code, {}, LIMITS, host_factory())
    assert result.value == {"forged": True} and result.logs == ["hi"]


def test_result_from_worker_checks_every_cap_itself() -> None:
    limits = Limits(max_output_bytes=10, max_log_bytes=5)
    assert result_from_worker({"ok": True, "value": "[1,2]", "logs": ["abc"]}, limits) == ([1, 2], ["abc"])
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
        result_from_worker({"ok": True, "value": "[" * 100_000 + "]" * 100_000}, big)
    assert info.value.code == "invalid_output"
    logs = result_from_worker({"ok": True, "value": "1", "logs": ["a\ud800"]}, big)[1]
    assert logs == ["a?"]
