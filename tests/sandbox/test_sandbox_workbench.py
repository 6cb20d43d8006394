"""The sandbox runtimes through the Workbench: craft, call, hostile calls, staged writes."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import wat

from awb.config import Config
from awb.errors import ExecutionError
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import host as host_module
from awb.sandbox import staging
from awb.sandbox.registry import build_runtimes
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio


@pytest.fixture
async def wb(tmp_path: Path) -> AsyncIterator[Workbench]:
    granted = tmp_path / "granted"
    granted.mkdir()
    (granted / "in.txt").write_text("granted text")
    config = Config(inventory_path=tmp_path / "inv.db")
    config.sandbox.grants = {"reader": [str(granted)], "stager": [str(tmp_path / "written")]}
    workbench = Workbench(config, runtimes=build_runtimes(config))
    async with workbench:
        yield workbench


async def test_cpython_tool_is_crafted_and_called(wb: Workbench) -> None:
    code = "import statistics\n\ndef run(params):\n    return statistics.median(params['xs'])\n"
    tool = await wb.craft(
        {
            "name": "median",
            "description": "median of numbers",
            "code": code,
            "runtime": "cpython",
            "examples": [{"params": {"xs": [3, 1, 2]}, "expected": 2}],
        }
    )
    assert tool.runtime == "cpython"
    assert (await wb.call("median", {"xs": [5, 1, 9]})).result == 5


async def test_hostile_cpython_call_is_recorded_as_a_failure_and_the_tool_keeps_working(wb: Workbench) -> None:
    code = "import os\n\ndef run(params):\n    if params.get('evil'):\n        os.system('id')\n    return 'fine'\n"
    await wb.craft({"name": "maybe_evil", "description": "d", "code": code, "runtime": "cpython"})
    with pytest.raises(ExecutionError) as info:
        await wb.call("maybe_evil", {"evil": True})
    assert info.value.code == "sandbox_violation"
    assert (await wb.call("maybe_evil", {})).result == "fine"
    assert wb.resolve("maybe_evil").failure_count == 1


async def test_granted_tool_reads_and_stages_a_write_a_person_applies(wb: Workbench, tmp_path: Path) -> None:
    target = tmp_path / "granted" / "result" / "out.txt"
    code = "def run(params):\n    return write_file(params['to'], read_file('in.txt').upper())\n"
    await wb.craft({"name": "reader", "description": "copies upper-cased", "code": code, "runtime": "cpython"})
    receipt = (await wb.call("reader", {"to": str(target)})).result
    assert not target.exists()
    store = wb.store
    pending = staging.list_staged(store)  # type: ignore[arg-type]
    assert [w.id for w in pending] == [receipt["id"]]
    staging.apply_staged(store, receipt["id"], grants=wb.config.sandbox.grants)  # type: ignore[arg-type]
    assert target.read_text() == "GRANTED TEXT"


async def test_staged_writes_carry_the_id_of_the_call_that_staged_them(wb: Workbench, tmp_path: Path) -> None:
    code = (
        "def run(params):\n"
        "    write_file(params['to'], 'one')\n"
        "    write_file(params['to'], 'two')\n"
        "    if params['fail']:\n"
        "        raise ValueError('failed after staging')\n"
        "    return 'staged'\n"
    )
    await wb.craft({"name": "stager", "description": "stages two writes", "code": code})
    first, second = str(tmp_path / "written" / "first.txt"), str(tmp_path / "written" / "second.txt")
    result = await wb.call("stager", {"to": first, "fail": False})
    with pytest.raises(ExecutionError):
        await wb.call("stager", {"to": second, "fail": True})
    failed, succeeded = wb.inspect("stager").recent_calls
    assert succeeded.ok and not failed.ok
    assert re.fullmatch(r"call_[0-9a-f]{16}", succeeded.call_id) and re.fullmatch(r"call_[0-9a-f]{16}", failed.call_id)
    assert succeeded.call_id != failed.call_id
    assert result.call_id == succeeded.call_id
    assert isinstance(wb.store, SQLiteStore)
    assert [(w["call_id"], w["path"]) for w in wb.store.staged_writes()] == [
        (succeeded.call_id, first),
        (succeeded.call_id, first),
        (failed.call_id, second),
        (failed.call_id, second),
    ]


async def test_javascript_and_wasm_tools_are_crafted_and_called(wb: Workbench) -> None:
    await wb.craft(
        {
            "name": "js_add",
            "description": "adds",
            "language": "javascript",
            "code": "function run(p) { return p.a + p.b; }",
            "examples": [{"params": {"a": 1, "b": 2}, "expected": 3}],
        }
    )
    assert (await wb.call("js_add", {"a": 40, "b": 2})).result == 42
    await wb.craft({"name": "wasm_echo", "description": "echoes", "language": "wasm", "code": wat.ECHO})
    assert (await wb.call("wasm_echo", {"k": "v"})).result == {"k": "v"}


async def test_timeout_through_the_workbench_is_structured(wb: Workbench) -> None:
    wb.config.tool_execution_timeout_ms = 500
    await wb.craft(
        {
            "name": "spin",
            "description": "spins",
            "code": "def run(params):\n    while params.get('spin'):\n        pass\n    return 0\n",
            "runtime": "cpython",
        }
    )
    with pytest.raises(ExecutionError) as info:
        await wb.call("spin", {"spin": True})
    assert info.value.code == "timeout"
    assert (await wb.call("spin", {})).result == 0


FORGED_DIGITS = """
import json, os, stat, struct

def run(params):
    body = json.dumps({'op': 'result', 'ok': True, 'value': '1' * 5000, 'logs': []}).encode()
    for fd in range(64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, struct.pack('>I', len(body)) + body)
        except OSError:
            pass
    os._exit(0)
"""


async def test_a_forged_result_the_server_cannot_decode_is_a_recorded_failure(wb: Workbench) -> None:
    # An integer past Python's 4300-digit limit raised a bare ValueError: the call escaped unrecorded.
    await wb.craft({"name": "digits", "description": "d", "code": FORGED_DIGITS, "runtime": "cpython"})
    with pytest.raises(ExecutionError) as info:
        await wb.call("digits", {})
    assert info.value.code == "invalid_output"
    assert wb.resolve("digits").failure_count == 1


MANY_VALUES = {
    "monty": "def run(params):\n    return [0] * 120000\n",
    "cpython": "def run(params):\n    return [0] * 120000\n",
    "javascript": "function run(params) { return new Array(120000).fill(0); }",
}


@pytest.mark.parametrize("runtime", sorted(MANY_VALUES))
async def test_a_result_of_too_many_small_values_is_output_exceeded(wb: Workbench, runtime: str) -> None:
    # 240 KB, under the byte cap, but 120,000 values. Each costs the server's checks and the faces'
    # encoders microseconds on the event loop: half a million under the cap held the others up for seconds.
    await wb.craft({"name": "many", "description": "d", "code": MANY_VALUES[runtime], "runtime": runtime})
    with pytest.raises(ExecutionError) as info:
        await wb.call("many", {})
    assert info.value.code == "output_exceeded" and info.value.details.get("reason") == "values", info.value
    assert wb.resolve("many").failure_count == 1


THOUSAND_ZEROS = {
    "monty": "def run(params):\n    return [0] * 1000\n",
    "cpython": "def run(params):\n    return [0] * 1000\n",
    "javascript": "function run(params) { return new Array(1000).fill(0); }",
}


@pytest.mark.parametrize("runtime", sorted(THOUSAND_ZEROS))
async def test_every_runtime_counts_the_compact_json_of_a_result_against_the_cap(tmp_path: Path, runtime: str) -> None:
    """The cap counts the text that is sent (compact, 2,001 bytes here), not a spaced form of it (2,998)."""
    for cap, fits in ((2001, True), (2000, False)):
        config = Config(inventory_path=tmp_path / f"{cap}.db", max_output_bytes=cap)
        async with Workbench(config, runtimes=build_runtimes(config)) as workbench:
            await workbench.craft(
                {"name": "zeros", "description": "d", "code": THOUSAND_ZEROS[runtime], "runtime": runtime}
            )
            if fits:
                called = await workbench.call("zeros", {})
                assert called.result == [0] * 1000
            else:
                with pytest.raises(ExecutionError) as info:
                    await workbench.call("zeros", {})
                assert info.value.code == "output_exceeded", info.value


READ_LOOP = {
    "monty": (
        "def run(params):\n    n = 0\n    while True:\n        try:\n            read_file('big.txt')\n"
        "        except Exception:\n            n += 1\n"
    ),
    "cpython": (
        "def run(params):\n    n = 0\n    while True:\n        try:\n            read_file('big.txt')\n"
        "        except Exception:\n            n += 1\n"
    ),
    "javascript": "function run(params) { while (true) { try { read_file('big.txt'); } catch (e) {} } }",
}


@pytest.mark.parametrize("runtime", sorted(READ_LOOP))
async def test_a_tool_reading_in_a_loop_is_ended_at_its_host_budget_even_catching_the_refusal(
    wb: Workbench, tmp_path: Path, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each read costs the server work: a loop on a 4 MB file kept half a server CPU busy until the
    # call's time limit. Past the budget the call ends, whatever the tool does with the refusal.
    monkeypatch.setattr(host_module, "MAX_HOST_BYTES_PER_CALL", 4 << 20, raising=False)
    (tmp_path / "granted" / "big.txt").write_text("b" * (256 << 10))
    wb.config.tool_execution_timeout_ms = 20_000
    await wb.craft({"name": "reader", "description": "d", "code": READ_LOOP[runtime], "runtime": runtime})
    with pytest.raises(ExecutionError) as info:
        await wb.call("reader", {})
    assert info.value.code == "output_exceeded" and info.value.details.get("reason") == "host_bytes", info.value


LOG_LOOP = {
    "monty": "def run(params):\n    while True:\n        try:\n            log('')\n        except Exception:\n            pass\n",
    "cpython": "def run(params):\n    while True:\n        try:\n            log('')\n        except Exception:\n            pass\n",
    "javascript": "function run(params) { while (true) { try { log(''); } catch (e) {} } }",
}


@pytest.mark.parametrize("runtime", sorted(LOG_LOOP))
async def test_a_tool_making_empty_host_calls_in_a_loop_is_ended_at_its_host_call_budget(
    wb: Workbench, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `log('')` adds nothing to the log cap but costs the server a round trip: in a loop it kept most of
    # a server CPU busy until the call's time limit. A budget of 300 calls: the 10,000 round trips of the
    # real one took 30-60 s at load 10 on two cores (3-6 ms each), past the time limit, and the call
    # ended in `timeout` (2 of the 3 runtimes in every run there).
    monkeypatch.setattr(host_module, "MAX_HOST_CALLS_PER_CALL", 300)
    wb.config.tool_execution_timeout_ms = 20_000
    await wb.craft({"name": "chatty", "description": "d", "code": LOG_LOOP[runtime], "runtime": runtime})
    with pytest.raises(ExecutionError) as info:
        await wb.call("chatty", {})
    assert info.value.code == "output_exceeded" and info.value.details.get("reason") == "host_calls", info.value
