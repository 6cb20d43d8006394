"""Log lines a client can provoke at will (a request with a bad id, a line that is not JSON, a refused
stream), written at most `PER_WINDOW` times a minute each, then one line saying how many were not.

A call site marks such a line with `extra=PER_REQUEST`; the server's log handler carries a
`PerRequestLimit` filter (`awb.cli.logs`). Unmarked lines are never held back: a server's own trouble is
always written. A kind is the line's format string, a constant of the code (never what a client sent),
so the kinds are few and known.
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
#: Lines of one kind written per window; enough to see what is happening and from whom.
PER_WINDOW = 20
WINDOW_SECONDS = 60.0

_SUMMARY = "%d more lines like %r in %.0f s were not written (at most %d a minute of each such kind are)"


@dataclass
class _Window:
    start: float
    written: int = 0
    held_back: int = 0
    level: int = logging.WARNING
    name: str = "awb"


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
        if not getattr(record, MARK, False):
            return True
        kind = str(record.msg)
        now = self.clock()
        with self._lock:
            window = self._windows.get(kind)
            if window is None or now - window.start >= self.window_seconds:
                if window is not None and window.held_back:
                    self._ended.append(self._summary(kind, window, now))
                window = self._windows[kind] = _Window(now, level=record.levelno, name=record.name)
            if window.written < self.per_window:
                window.written += 1
                return True
            window.held_back += 1
            return False

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
        return logging.LogRecord(window.name, window.level, "", 0, _SUMMARY, args, None)


__all__ = ["PER_REQUEST", "PER_WINDOW", "WINDOW_SECONDS", "PerRequestLimit"]
