"""Server logging: to stderr or the log file (never stdout, the stdio wire), written in batches by a
thread of its own so that the line every MCP request logs costs the request almost nothing. What a log
line quotes is shown literally (`VisibleFormatter`), and a line a client can provoke at will is written
at most a few times a minute (`awb.log_limit`)."""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from awb.errors import StartupFailed
from awb.log_limit import FOREIGN_LOGGERS, PerRequestLimit
from awb.safe_text import Verbatim, visible

#: How long a routine record may wait before it is written. Warnings and errors are written at once.
FLUSH_SECONDS = 0.2
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class BatchedHandler(logging.Handler):
    """Keeps records in memory; a writer thread formats and writes them every `interval` seconds, at
    once for a warning or worse, and when the handler closes (logging's exit hook closes it).

    A record costs the request a deque append. A `QueueListener` wakes its thread for every record,
    and that thread then takes the GIL from the request being answered: ~0.1 ms per request over
    stdio (`benchmarks/ops.py`).

    With a `limit`, records marked per-request pass it first, and the writer writes its summaries of
    what it held back (within `interval` of a window's end, and all of them at close).
    """

    def __init__(
        self, target: logging.Handler, interval: float = FLUSH_SECONDS, limit: PerRequestLimit | None = None
    ) -> None:
        super().__init__()
        self.target = target
        self.interval = interval
        self.limit = limit
        if limit is not None:
            self.addFilter(limit)
        self._records: deque[logging.LogRecord] = deque()
        self._wake = threading.Event()
        self._closed = False
        self._writer = threading.Thread(target=self._write_loop, name="awb-log-writer", daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        self._records.append(record)
        if record.levelno >= logging.WARNING:
            self._wake.set()

    def flush(self) -> None:
        self._write_pending()
        self.target.flush()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._wake.set()
            self._writer.join(timeout=5)
            self._write_pending(closing=True)
            self.target.close()
        super().close()

    def _write_loop(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval)
            self._wake.clear()
            self._write_pending()

    def _write_pending(self, closing: bool = False) -> None:
        # popleft and append are atomic, so the request thread never waits on the writer. Two threads
        # may drain at once (the writer, and logging's exit hook calling flush): the loser finds it empty.
        while True:
            try:
                record = self._records.popleft()
            except IndexError:
                break
            self.target.handle(record)
        if self.limit is not None:
            for summary in self.limit.summaries(closing):
                self.target.handle(summary)


class _Shown:
    """A log argument as `%s` and `%r` show it, with control and invisible characters escaped."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return _escaped(str(self.value))

    def __repr__(self) -> str:
        text = repr(self.value)  # a string's repr escapes its own; another object's may not
        return text if text.isprintable() else visible(text)


def _escaped(text: str) -> str:
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text  # nothing to escape: the common case, at C speed
    return visible(text)


def _shown(value: object) -> object:
    return value if value is None or isinstance(value, int | float | Verbatim) else _Shown(value)


class VisibleFormatter(logging.Formatter):
    """Log lines quote what clients and tools chose (a requested tool name, an error's message, a path):
    those arguments are shown with control characters, ANSI escapes and bidirectional overrides escaped
    (`\\x1b`, `\\u202e`), so no request can end a line and write one that reads as the server's, or
    drive the terminal `awb start` writes to. Format strings and numbers stay as they are, and tracebacks
    keep their lines."""

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.args, tuple):
            record.args = tuple(_shown(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _shown(arg) for key, arg in record.args.items()}
        return super().format(record)

    def formatException(self, ei: Any) -> str:
        return visible(super().formatException(ei), multiline=True)


def setup_logging(log_file: Path | None, verbose: bool) -> None:
    """Route the `awb` loggers to `log_file` (or stderr) through a `BatchedHandler`; `StartupFailed` when
    the log file cannot be opened for writing (a read-only folder, a directory, /proc)."""
    target: logging.Handler
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            target = logging.FileHandler(log_file)
        except OSError as error:
            raise StartupFailed(
                f"cannot write the log file {log_file} (`log_file`, AWB_LOG_FILE): {error.strerror or error}",
                log_file=str(log_file),
            ) from None
    else:
        target = logging.StreamHandler(sys.stderr)
    target.setFormatter(VisibleFormatter(FORMAT))
    # The logging HOWTO's "Optimization" settings: no caller lookup, no thread or process names we
    # never print.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger("awb")
    handler = BatchedHandler(target, limit=PerRequestLimit())
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # The SDK's and uvicorn's lines reached Python's last-resort handler: on stderr whatever `log_file` said,
    # unescaped, and every one a client provoked (1,000 bad requests, 1,000 lines). Through the same handler
    # they are written where the server's are, escaped, and their warnings limited per kind.
    for name in FOREIGN_LOGGERS:
        logging.getLogger(name).handlers[:] = [handler]
