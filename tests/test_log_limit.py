"""Per-request log lines: at most `per_window` of each kind a window, then one line saying how many were not."""

from __future__ import annotations

import logging
import sys

from awb.log_limit import PER_REQUEST, TRACEBACK_LIMITED, PerRequestLimit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(message: str, *args: object, marked: bool = True) -> logging.LogRecord:
    record = logging.LogRecord("awb.server", logging.WARNING, "", 0, message, args, None)
    if marked:
        record.__dict__.update(PER_REQUEST)
    return record


BAD_ID = "answered a request whose id is neither a string nor an integer (%s)"


def test_ten_thousand_marked_lines_pass_the_first_few_and_the_window_end_says_how_many_were_held_back() -> None:
    clock = Clock()
    limit = PerRequestLimit(per_window=20, window_seconds=60, clock=clock)
    passed = sum(limit.filter(_record(BAD_ID, f"m{i}")) for i in range(10_000))
    assert passed == 20
    assert limit.summaries() == []  # the window is still open
    clock.now += 60
    (summary,) = limit.summaries()
    assert summary.levelno == logging.WARNING and summary.name == "awb.server"
    assert summary.getMessage() == (
        f"9980 more lines like {BAD_ID!r} in 60 s were not written (at most 20 a minute of each such kind are)"
    )
    assert limit.summaries() == []
    assert limit.filter(_record(BAD_ID, "again"))  # a new window writes again


def test_unmarked_lines_are_never_held_back_and_each_kind_has_its_own_count() -> None:
    limit = PerRequestLimit(per_window=2, window_seconds=60, clock=Clock())
    assert all(limit.filter(_record("the zygote exited", marked=False)) for _ in range(100))
    assert [limit.filter(_record("kind a")) for _ in range(3)] == [True, True, False]
    assert [limit.filter(_record("kind b %d", i)) for i in range(3)] == [True, True, False]
    assert sorted(record.args[1] for record in limit.summaries(closing=True)) == ["kind a", "kind b %d"]  # type: ignore[index]


def test_a_window_that_ends_on_a_new_line_keeps_its_count_for_the_writer() -> None:
    clock = Clock()
    limit = PerRequestLimit(per_window=1, window_seconds=60, clock=clock)
    assert [limit.filter(_record("kind")) for _ in range(4)] == [True, False, False, False]
    clock.now += 61
    assert limit.filter(_record("kind"))  # opens the next window before the writer looked
    (summary,) = limit.summaries()
    assert summary.getMessage().startswith("3 more lines like 'kind' in 60 s")
    assert limit.summaries(closing=True) == []  # the new window held nothing back


def _failure(incident: int) -> logging.LogRecord:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord(
            "awb.api", logging.ERROR, "", 0, UNEXPECTED, ("GET", "/api/x", incident), sys.exc_info()
        )
    record.__dict__.update(TRACEBACK_LIMITED)
    return record


UNEXPECTED = "unexpected error in %s %s (incident %s)"


def test_past_the_limit_a_traceback_limited_line_is_written_without_its_traceback_and_counted() -> None:
    clock = Clock()
    limit = PerRequestLimit(per_window=20, window_seconds=60, clock=clock)
    records = [_failure(n) for n in range(1000)]
    assert all(limit.filter(record) for record in records)  # every line is written: its incident id too
    assert sum(record.exc_info is not None for record in records) == 20
    assert records[20].exc_info is None and records[20].exc_text is None
    clock.now += 60
    (summary,) = limit.summaries()
    assert summary.levelno == logging.ERROR
    assert summary.getMessage() == (
        f"980 more lines like {UNEXPECTED!r} in 60 s were written without their traceback "
        "(at most 20 a minute of each such kind are written with it)"
    )


def _foreign(name: str, level: int, message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, "", 0, message, args, None)


REFUSING = "Refusing to open a new session: %d sessions are already open"


def test_the_sdks_and_uvicorns_warnings_are_limited_per_kind_though_unmarked() -> None:
    """The MCP SDK and uvicorn log on their own loggers, which a client can make write a line per request."""
    clock = Clock()
    limit = PerRequestLimit(per_window=20, window_seconds=60, clock=clock)
    sdk = "mcp.server.streamable_http_manager"
    assert sum(limit.filter(_foreign(sdk, logging.WARNING, REFUSING, 64)) for _ in range(1000)) == 20
    invalid = "Invalid HTTP request received."
    assert sum(limit.filter(_foreign("uvicorn.error", logging.WARNING, invalid)) for _ in range(1000)) == 20
    # Their errors are the server's own trouble, always written; so is any other library's warning.
    assert all(limit.filter(_foreign(sdk, logging.ERROR, "Error in message router")) for _ in range(100))
    assert all(limit.filter(_foreign("mcpx", logging.WARNING, "not the SDK")) for _ in range(100))
    clock.now += 60
    kinds = {(r.name, r.getMessage().split(" in 60 s")[0]) for r in limit.summaries()}
    assert kinds == {
        (sdk, f"980 more lines like {REFUSING!r}"),
        ("uvicorn.error", "980 more lines like 'uvicorn.error: Invalid HTTP request received.'"),
    }


def test_a_foreign_message_without_arguments_is_one_kind_whatever_client_text_it_holds() -> None:
    """The SDK's `f"Invalid Host header: {host}"`: a kind per host would let a client write a line per host."""
    limit = PerRequestLimit(per_window=2, window_seconds=60, clock=Clock())
    security = "mcp.server.transport_security"
    passed = [limit.filter(_foreign(security, logging.WARNING, f"Invalid Host header: evil{i}")) for i in range(50)]
    assert passed.count(True) == 2
    idle = [limit.filter(_foreign("mcp.x", logging.WARNING, f"Session {i:032x} idle")) for i in range(50)]
    assert idle.count(True) == 2
    kinds = sorted(str(r.args[1]) for r in limit.summaries(closing=True))  # type: ignore[index]
    assert kinds == ["mcp.server.transport_security: Invalid Host header", "mcp.x: Session"]
