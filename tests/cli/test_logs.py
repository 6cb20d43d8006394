"""Server logs: batched off the request path, never lost at exit, never on the stdio wire."""

from __future__ import annotations

import logging
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from awb.cli.logs import BatchedHandler, VisibleFormatter
from awb.log_limit import PER_REQUEST, PerRequestLimit
from awb.safe_text import Verbatim
from journey import call
from support import awb_env


class Recorder(logging.Handler):
    def __init__(self, expect: int) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.threads: set[str] = set()
        self.expect = expect
        self.done = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.threads.add(threading.current_thread().name)
        if len(self.messages) >= self.expect:
            self.done.set()


def batched(
    expect: int, interval: float, limit: PerRequestLimit | None = None
) -> tuple[Recorder, BatchedHandler, logging.Logger]:
    """A recorder behind a BatchedHandler, and a logger of its own that writes to them."""
    target = Recorder(expect)
    handler = BatchedHandler(target, interval=interval, limit=limit)
    logger = logging.getLogger(f"awb.test.{id(handler)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers[:] = [handler]
    return target, handler, logger


def test_records_are_written_by_the_writer_thread_in_order() -> None:
    target, handler, logger = batched(expect=50, interval=0.01)
    for i in range(50):
        logger.info("line %d", i)
    assert target.done.wait(timeout=10)
    assert target.messages == [f"line {i}" for i in range(50)]
    assert target.threads == {"awb-log-writer"}
    handler.close()


def test_a_warning_is_written_without_waiting_for_the_interval() -> None:
    target, handler, logger = batched(expect=2, interval=3600)
    logger.info("routine")
    logger.warning("urgent")
    assert target.done.wait(timeout=10)
    assert target.messages == ["routine", "urgent"]
    handler.close()


def test_close_writes_what_is_pending() -> None:
    target, handler, logger = batched(expect=1000, interval=3600)
    for i in range(1000):
        logger.info("line %d", i)
    handler.close()
    assert len(target.messages) == 1000 and target.messages[-1] == "line 999"


def test_the_writer_says_how_many_per_request_lines_it_held_back_once_their_minute_is_over() -> None:
    now = [0.0]
    limit = PerRequestLimit(per_window=3, window_seconds=60, clock=lambda: now[0])
    target, handler, logger = batched(expect=5, interval=0.01, limit=limit)
    for i in range(10_000):
        logger.warning("bad id %d", i, extra=PER_REQUEST)
    logger.info("routine")
    now[0] = 60.0  # no more lines come: the writer notices the minute is over by itself
    assert target.done.wait(timeout=10)
    handler.close()
    assert target.messages == [
        "bad id 0",
        "bad id 1",
        "bad id 2",
        "routine",
        "9997 more lines like 'bad id %d' in 60 s were not written (at most 3 a minute of each such kind are)",
    ]


@pytest.mark.anyio
async def test_a_verbose_stdio_server_logs_every_request_to_the_log_file(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "awb.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "awb", "start", "--transport", "stdio", "--verbose"],
        env=awb_env(tmp_path, AWB_LOG_FILE=str(log_file)),
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            listed = await call(client, "awb_list", {})
            assert listed["count"] == 0
            missing = await call(client, "awb_inspect", {"tool_id": "tool_nope"})
            assert missing["error"]["code"] == "tool_not_found"
    # The server has exited (stdin closed): its exit hook wrote every pending line.
    text = log_file.read_text()
    # A call that succeeds is a debug line (one per request is the server's busiest log); errors are info.
    assert "DEBUG awb.mcp: mcp awb_list ok" in text
    assert "mcp awb_inspect -> tool_not_found" in text


FORGED = "x\x1b]0;pwned\x07\x1b[2K\r2026-01-01 00:00:00,000 INFO awb.server: staged write 7 applied\nok \u202e"


@pytest.mark.anyio
async def test_what_a_client_chooses_cannot_write_a_log_line_or_drive_the_terminal(tmp_path: Path) -> None:
    # A requested tool name went into the server's log as it came: an MCP client could end the line,
    # write one that reads as the server's, and send escape sequences to the terminal of `awb start`.
    log_file = tmp_path / "awb.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "awb", "start", "--transport", "stdio"],
        env=awb_env(tmp_path, AWB_LOG_FILE=str(log_file)),
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            assert (await client.call_tool(FORGED, {})).is_error
    text = log_file.read_text()
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    [line] = [line for line in text.splitlines() if "pwned" in line or "staged write" in line]
    shown = (
        "x\\x1b]0;pwned\\x07\\x1b[2K\\x0d2026-01-01 00:00:00,000 INFO awb.server: staged write 7 applied\\x0aok \\u202e"
    )
    assert line.split(" INFO awb.mcp: ", 1)[1].startswith(f"mcp {shown} -> tool_not_found (")


def test_log_arguments_are_escaped_while_format_strings_numbers_and_tracebacks_are_kept(tmp_path: Path) -> None:
    target = logging.FileHandler(tmp_path / "plain.log")
    target.setFormatter(VisibleFormatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("awb.test.visible")
    logger.propagate = False
    logger.handlers[:] = [target]
    logger.setLevel(logging.INFO)
    logger.info("call %s cancelled after %.1f ms (%d), %r", "a\nb\\c é", 1.25, 3, "q\x1b")
    logger.error("frames:\n%s", Verbatim("  File x\n    line"))
    try:
        raise RuntimeError("boom\x1b[2J")
    except RuntimeError:
        logger.exception("failed")
    target.close()
    lines = (tmp_path / "plain.log").read_text().splitlines()
    assert lines[:6] == [
        "INFO call a\\x0ab\\\\c é cancelled after 1.2 ms (3), 'q\\x1b'",
        "ERROR frames:",
        "  File x",
        "    line",
        "ERROR failed",
        "Traceback (most recent call last):",
    ]
    assert lines[-1] == "RuntimeError: boom\\x1b[2J"


def test_a_client_that_sends_a_thousand_bad_requests_gets_twenty_lines_and_a_count_in_the_servers_log(
    tmp_path: Path,
) -> None:
    """uvicorn's "Invalid HTTP request received." (and the MCP SDK's warnings) went to Python's last-resort
    handler: one line per request on stderr, a thousand for a thousand, past the limit the server's own
    lines have (and past `log_file`)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--port", "0"],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    ready: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if "awb: ready on" in line:
                ready.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        port = int(ready.get(timeout=60).split("127.0.0.1:")[1].split("/")[0])
        for _ in range(1000):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
                connection.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                while connection.recv(65536):  # the 400 reply, then the server hangs up
                    pass
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=10)
        assert process.stderr is not None
        process.stderr.close()
    invalid = [line for line in lines if "Invalid HTTP request received" in line]
    assert len(invalid) == 21, "".join(lines[-5:])
    assert all(" WARNING uvicorn.error: " in line for line in invalid)  # the server's format, not a bare line
    assert "980 more lines like 'uvicorn.error: Invalid HTTP request received.' in " in invalid[-1]
