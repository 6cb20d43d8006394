"""stdio served on the event loop (pipes) and by the SDK's transport (anything else)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from awb.log_limit import PER_WINDOW
from awb.server.stdio import LineSource
from journey import call
from support import awb_env

pytestmark = pytest.mark.anyio

DOUBLE = "def run(params):\n    return params['x'] * 2\n"

PROBE = textwrap.dedent(
    """
    import asyncio, os, sys
    from awb.server.stdio import loop_pipes_usable, serve_stdio_streams

    async def main():
        print("usable", loop_pipes_usable(), file=sys.stderr, flush=True)
        async with serve_stdio_streams() as (read, write):
            os.write(1, b"stray\\n")  # a child's or a C library's print while serving
            await write.aclose()  # what the server does when its session ends
            await read.aclose()
        print("after", os.get_blocking(0), os.get_blocking(1), flush=True)

    asyncio.run(main())
    """
)


def run_probe(tmp_path: Path, **streams: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=awb_env(tmp_path), text=True, timeout=30, check=True, **streams
    )


def rpc(id_: int, method: str, params: dict[str, object] | None = None) -> dict[str, object]:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def session_answers(tmp_path: Path, *requests: object, stdin_file: Path | None = None) -> dict[object, dict[str, Any]]:
    """`session_messages`' answers by id."""
    return {m.get("id"): m for m in session_messages(tmp_path, *requests, stdin_file=stdin_file)}


def session_messages(
    tmp_path: Path, *requests: object, stdin_file: Path | None = None, **env: str
) -> list[dict[str, Any]]:
    """Run a whole session through `awb start`: initialize, then `requests` (a str is sent as it is),
    then the end of stdin. stdin is a pipe closed at once, or `stdin_file` holding the same lines; `env`:
    more `AWB_*` variables. Every message the server wrote, in order."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}
    messages = [rpc(0, "initialize", hello), {"jsonrpc": "2.0", "method": "notifications/initialized"}, *requests]
    text = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages)
    with ExitStack() as stack:
        source: dict[str, Any] = {"input": text}
        if stdin_file is not None:
            stdin_file.write_text(text)
            source = {"stdin": stack.enter_context(stdin_file.open())}
        done = subprocess.run(
            [sys.executable, "-m", "awb", "start", "--transport", "stdio"],
            env=awb_env(tmp_path, **env),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            **source,
        )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_pipes_are_served_on_the_loop_and_handed_back_blocking(tmp_path: Path) -> None:
    done = run_probe(tmp_path, input="", capture_output=True)
    assert "usable True" in done.stderr
    # While serving, fd 1 writes to stderr: the wire only ever carries MCP messages.
    assert "stray" in done.stderr and "stray" not in done.stdout
    assert done.stdout == "after True True\n"


def test_a_file_on_stdin_goes_to_the_sdk_transport(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("")
    with (tmp_path / "in.txt").open() as stdin:
        done = run_probe(tmp_path, stdin=stdin, capture_output=True)
    assert "usable False" in done.stderr
    assert "stray" in done.stderr and done.stdout.endswith("after True True\n")


def test_stdout_and_stderr_on_one_pipe_go_to_the_sdk_transport(tmp_path: Path) -> None:
    done = run_probe(tmp_path, input="", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert "usable False" in done.stdout


async def test_lines_over_the_limit_are_dropped_whole() -> None:
    reader = asyncio.StreamReader(limit=16)
    long_line = b"x" * 100 + b"\n"
    reader.feed_data(b'{"a": 1}\n' + long_line + b"next\n" + b"y" * 40 + b"z\n" + b"tail")
    reader.feed_eof()
    lines = [line async for line in LineSource(reader)]
    assert lines == ['{"a": 1}\n', "next\n", "tail"]


async def test_invalid_utf8_is_replaced_not_fatal() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"caf\xe9\n")
    reader.feed_eof()
    assert [line async for line in LineSource(reader)] == ["caf\ufffd\n"]


async def test_messages_larger_than_a_pipe_buffer_cross_both_ways(tmp_path: Path) -> None:
    # ~64 KiB of code is asyncio's default line limit and a pipe's buffer: both directions must cope.
    code = "def run(params):\n    return params['s'][::-1]\n" + "#" * 60_000 + "\n"
    text = "ab" * 100_000
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "awb", "start", "--transport", "stdio"], env=awb_env(tmp_path)
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            crafted = await call(client, "awb_craft", {"name": "rev", "description": "reverse " * 1000, "code": code})
            assert "error" not in crafted, crafted
            called = await call(client, "awb_call", {"name": "rev", "params": {"s": text}})
            assert called["result"] == text[::-1]
            inspected = await call(client, "awb_inspect", {"name": "rev"})
            assert inspected["tool"]["code"] == code


def test_the_sdk_transport_serves_a_session_from_a_file(tmp_path: Path) -> None:
    """`awb start` with stdin from a file (no pipe): the SDK's transport answers, then the server exits."""
    answers = session_answers(tmp_path, rpc(2, "tools/list"), stdin_file=tmp_path / "requests.jsonl")
    names = [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert "awb_craft" in names and "awb_search" in names


@pytest.mark.parametrize(
    ("transport", "logged"),
    [("auto", "pipes read and written on the event loop"), ("sdk", "through the SDK's transport")],
)
async def test_both_stdio_transports_serve_a_session(tmp_path: Path, transport: str, logged: str) -> None:
    log_file = tmp_path / "awb.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "awb", "start", "--transport", "stdio"],
        env=awb_env(tmp_path, AWB_STDIO_TRANSPORT=transport, AWB_LOG_FILE=str(log_file)),
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            crafted = await call(client, "awb_craft", {"name": "twice", "description": "double", "code": DOUBLE})
            assert "error" not in crafted, crafted
            assert (await call(client, "awb_call", {"name": "twice", "params": {"x": 21}}))["result"] == 42
    assert logged in log_file.read_text()


SLOW = "def run(params):\n    total = 0\n    for i in range(300000):\n        total += i\n    return total\n"


def test_requests_piped_then_closed_are_all_answered(tmp_path: Path) -> None:
    """stdin ends right after the last request (a pipeline): every request read is still answered."""
    craft = {"name": "awb_craft", "arguments": {"name": "slow", "description": "d", "code": SLOW}}
    crafted = session_answers(tmp_path, rpc(1, "tools/call", craft))
    assert not crafted[1]["result"].get("isError"), crafted[1]
    # Requests run concurrently, so the call waits for the next session; a line of garbage in between
    # reaches the session as a parse error and ends nothing.
    call_slow = {"name": "awb_call", "arguments": {"name": "slow"}}
    answers = session_answers(tmp_path, "{not JSON", rpc(2, "tools/call", call_slow), rpc(3, "tools/list"))
    assert {0, 2, 3} <= set(answers)
    assert answers[2]["result"]["structuredContent"]["result"] == sum(range(300000))


def test_requests_in_a_file_on_stdin_are_all_answered_and_a_bad_line_gets_a_parse_error(tmp_path: Path) -> None:
    """stdin is a regular file (the SDK's transport reads it): its end is held back as on pipes, so a
    slow call read just before it is still answered, and a line that is not JSON is answered, not lost."""
    craft = {"name": "awb_craft", "arguments": {"name": "slow", "description": "d", "code": SLOW}}
    session_answers(tmp_path, rpc(1, "tools/call", craft), stdin_file=tmp_path / "craft.jsonl")
    call_slow = {"name": "awb_call", "arguments": {"name": "slow"}}
    answers = session_answers(
        tmp_path, "{not JSON", rpc(2, "tools/call", call_slow), rpc(3, "tools/list"), stdin_file=tmp_path / "in.jsonl"
    )
    assert answers[2]["result"]["structuredContent"]["result"] == sum(range(300000))
    assert "awb_craft" in [tool["name"] for tool in answers[3]["result"]["tools"]]
    assert answers[None]["error"]["code"] == -32700


async def test_the_end_of_input_waits_for_answers_not_for_cancelled_requests() -> None:
    from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

    from awb.server.stdio import _Outstanding

    outstanding = _Outstanding()
    outstanding.read(JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"))
    outstanding.written(JSONRPCResponse(jsonrpc="2.0", id=1, result={}))
    outstanding.read(JSONRPCRequest(jsonrpc="2.0", id=2, method="ping"))
    outstanding.read(JSONRPCRequest(jsonrpc="2.0", id=3, method="tools/call"))
    cancel = {"requestId": 3}
    outstanding.read(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=cancel))
    settled = anyio.Event()

    async def wait() -> None:
        await outstanding.settled()
        settled.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert not settled.is_set()  # request 2 is still unanswered (1 was, 3 was cancelled)
            outstanding.written(JSONRPCResponse(jsonrpc="2.0", id=2, result={}))
    assert settled.is_set()


def test_a_line_that_is_not_json_gets_a_parse_error_and_the_session_goes_on(tmp_path: Path) -> None:
    answers = session_answers(
        tmp_path,
        "this is not json {",
        '{"jsonrpc": "2.0", "id": 7, "nonsense": true}',
        rpc(8, "tools/list", {}),
    )
    assert answers[None]["error"]["code"] == -32700
    assert answers[7]["error"]["code"] == -32600
    assert any(tool["name"] == "awb_craft" for tool in answers[8]["result"]["tools"])


def test_a_client_that_stops_reading_stdout_does_not_keep_the_server_alive(tmp_path: Path) -> None:
    """stdin closed, stdout held open and never read: the answers cannot all be written, and the server
    gives up on them and exits (it used to wait on the full pipe for ever, pid file and all)."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}
    messages = [rpc(0, "initialize", hello), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    messages += [rpc(i, "tools/list") for i in range(1, 100)]  # ~15 KB each: far more than a pipe holds
    # A short tool time limit: the end of input is held back for it (+5 s), then the answers are let go.
    env = awb_env(tmp_path, AWB_TOOL_EXECUTION_TIMEOUT_MS="100")
    server = subprocess.Popen(
        [sys.executable, "-m", "awb", "start", "--transport", "stdio"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.stdin is not None
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        server.stdin.close()
        assert server.wait(timeout=45) == 0
    finally:
        server.kill()
        server.wait()
        assert server.stdout is not None
        server.stdout.close()


def test_a_request_whose_id_mcp_does_not_take_is_answered_invalid_request(tmp_path: Path) -> None:
    """JSON-RPC ids MCP refuses (a fraction, a boolean, null, an object): the SDK took such a request for a
    notification and never answered it. Each gets -32600, and the session goes on."""
    odd = [{"jsonrpc": "2.0", "id": bad, "method": "ping"} for bad in (1.5, True, None, {"a": 1})]
    written = session_messages(tmp_path, *odd, rpc(9, "ping"))
    errors = [m for m in written if "error" in m]
    assert [e["error"]["code"] for e in errors] == [-32600] * 4
    assert all("must be a string or an integer" in e["error"]["message"] for e in errors)
    assert any(m.get("id") == 9 and m["result"] == {} for m in written)


def test_ten_thousand_bad_ids_write_a_bounded_log_and_one_line_saying_how_many_were_not_written(
    tmp_path: Path,
) -> None:
    """Each such request logged a warning: a client filled the server's log at wire speed."""
    log_file = tmp_path / "awb.log"
    odd = [{"jsonrpc": "2.0", "id": 0.5, "method": "ping"}] * 10_000
    written = session_messages(tmp_path, *odd, rpc(9, "ping"), AWB_LOG_FILE=str(log_file))
    assert sum(1 for m in written if "error" in m) == 10_000  # every one is still answered
    lines = log_file.read_text().splitlines()
    bad = [line for line in lines if "answered a request whose id is neither" in line]
    assert len(bad) == PER_WINDOW + 1, lines[-5:]
    assert f"{10_000 - PER_WINDOW} more lines like 'answered a request whose id" in bad[-1]
    assert len(lines) < 50


@pytest.mark.parametrize("stdin", ["pipe", "file"])
def test_a_cancellation_naming_no_request_id_mcp_takes_is_ignored_and_the_session_goes_on(
    tmp_path: Path, stdin: str
) -> None:
    """A `requestId` that is a list or an object ended the server (both transports) before it answered
    anything more; a cancellation of a request never sent, or already answered, never did."""
    odd = [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
        for request_id in ([1], {"a": 1}, 1.5, None, 999, 1)
    ]
    answers = session_answers(
        tmp_path, rpc(1, "ping"), *odd, rpc(2, "ping"), stdin_file=tmp_path / "in.jsonl" if stdin == "file" else None
    )
    assert answers[1]["result"] == {} and answers[2]["result"] == {}


def test_a_line_nested_past_the_json_decoder_is_an_invalid_request_and_the_session_goes_on(tmp_path: Path) -> None:
    """Nested past the SDK's parser and then past `json.loads`: RecursionError ended the server."""
    deep = '{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    answers = session_answers(tmp_path, rpc(1, "ping"), deep, "[" * 100_000, rpc(2, "ping"))
    assert answers[1]["result"] == {} and answers[2]["result"] == {}
    assert answers[None]["error"]["code"] == -32600
