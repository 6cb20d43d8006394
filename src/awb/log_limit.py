"""Log lines a client can provoke at will (a request with a bad id, a line that is not JSON, a refused
stream), written at most `PER_WINDOW` times a minute each, then one line saying how many were not.

A call site marks such a line with `extra=PER_REQUEST`; the server's log handler carries a
`PerRequestLimit` filter (`awb.cli.logs`). An unexpected error a request can provoke (a REST 500, whose
incident id the client is given) is marked `TRACEBACK_LIMITED` instead: its line is always written, so
the incident id can be found, but past the limit without its traceback, and the summary counts those. Unmarked lines are never held back: a server's own trouble is
always written. A kind is the line's format string, a constant of the code (never what a client sent),
so the kinds are few and known.

The MCP SDK (`mcp.*`) and uvicorn (`uvicorn.error`) log on loggers of their own, unmarked, and a client can
provoke their warnings at will too ("Refusing to open a new session", "Invalid HTTP request received."):
every WARNING record of theirs counts as marked (`FOREIGN_LOGGERS`; their errors are always written). Their
kinds are the format string when the record has arguments. A record without arguments may be an f-string
with a client's text in it (the SDK's `f"Invalid Host header: {host}"`), so its kind is the logger's name
and the message's first few words before any `:` or any word that is not all letters (`_coarse_kind`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

#: The attribute `PER_REQUEST` sets on a record.
MARK: Final = "awb_per_request"
#: `log.warning(..., extra=PER_REQUEST)`: a line one request can provoke, limited per kind.
PER_REQUEST: Final = {MARK: True}
#: The attribute `TRACEBACK_LIMITED` sets on a record.
TRACEBACK_MARK: Final = "awb_traceback_limited"
#: `log.exception(..., extra=TRACEBACK_LIMITED)`: the line always, its traceback limited per kind.
TRACEBACK_LIMITED: Final = {TRACEBACK_MARK: True}
#: Loggers of the libraries the server runs on whose warnings a client can provoke: each WARNING record of
#: theirs is limited as if marked `PER_REQUEST`.
FOREIGN_LOGGERS: Final = ("mcp", "uvicorn.error")
#: Words of an argument-less foreign message that make its kind, at most.
_KIND_WORDS = 4
#: Lines of one kind written per window; enough to see what is happening and from whom.
PER_WINDOW = 20
WINDOW_SECONDS = 60.0

_SUMMARY = "%d more lines like %r in %.0f s were not written (at most %d a minute of each such kind are)"
_TRACEBACKS = (
    "%d more lines like %r in %.0f s were written without their traceback "
    "(at most %d a minute of each such kind are written with it)"
)


@dataclass
class _Window:
    start: float
    written: int = 0
    held_back: int = 0
    level: int = logging.WARNING
    name: str = "awb"
    #: Lines of this kind past the limit are written without their traceback rather than held back.
    tracebacks: bool = False


class PerRequestLimit(logging.Filter):
    """A handler's filter: of the records marked `PER_REQUEST`, the first `per_window` of each kind in a
    window of `window_seconds` pass, the rest are counted. `summaries()` gives, for each window that has
    ended with lines held back, one record saying how many; the handler writes them."""

    def __init__(
        self,
        per_window: int = PER_WINDOW,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.per_window = per_window
        self.window_seconds = window_seconds
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self._ended: list[logging.LogRecord] = []
        # Records come from the event loop and from worker threads; the writer thread collects summaries.
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        tracebacks = bool(getattr(record, TRACEBACK_MARK, False))
        if tracebacks or getattr(record, MARK, False):
            kind = str(record.msg)
        elif record.levelno == logging.WARNING and _foreign(record.name):
            kind = str(record.msg) if record.args else _coarse_kind(record)
        else:
            return True
        now = self.clock()
        with self._lock:
            window = self._windows.get(kind)
            if window is None or now - window.start >= self.window_seconds:
                if window is not None and window.held_back:
                    self._ended.append(self._summary(kind, window, now))
                window = self._windows[kind] = _Window(
                    now, level=record.levelno, name=record.name, tracebacks=tracebacks
                )
            if window.written < self.per_window:
                window.written += 1
                return True
            window.held_back += 1
            if not tracebacks:
                return False
        # The line, one line: what the client was told (an incident id) stays findable in the log. The
        # record is this handler's alone (the server's root handler is the only one).
        record.exc_info = record.exc_text = record.stack_info = None
        return True

    def summaries(self, closing: bool = False) -> list[logging.LogRecord]:
        """One record per ended window that held lines back (every open one too when `closing`)."""
        now = self.clock()
        with self._lock:
            due, self._ended = self._ended, []
            for kind, window in list(self._windows.items()):
                if closing or now - window.start >= self.window_seconds:
                    if window.held_back:
                        due.append(self._summary(kind, window, now))
                    del self._windows[kind]
        return due

    def _summary(self, kind: str, window: _Window, now: float) -> logging.LogRecord:
        seconds = min(now - window.start, self.window_seconds)
        args = (window.held_back, kind, seconds, self.per_window)
        words = _TRACEBACKS if window.tracebacks else _SUMMARY
        return logging.LogRecord(window.name, window.level, "", 0, words, args, None)


def _foreign(name: str) -> bool:
    return any(name == root or name.startswith(f"{root}.") for root in FOREIGN_LOGGERS)


def _coarse_kind(record: logging.LogRecord) -> str:
    """A kind for a message that may hold a client's text: its logger and its leading words of letters only,
    up to a `:` (`mcp.server.transport_security: Invalid Host header`)."""
    words = str(record.msg).split(":", 1)[0].split()
    leading: list[str] = []
    for word in words[:_KIND_WORDS]:
        if not word.rstrip(".,;!?").isalpha():
            break
        leading.append(word)
    return f"{record.name}: {' '.join(leading)}"


__all__ = ["FOREIGN_LOGGERS", "PER_REQUEST", "PER_WINDOW", "TRACEBACK_LIMITED", "WINDOW_SECONDS", "PerRequestLimit"]
