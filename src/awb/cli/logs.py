"""Server logging: to stderr or the log file (never stdout, the stdio wire), written in batches by a
thread of its own so that the line every MCP request logs costs the request almost nothing."""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from pathlib import Path

from awb.errors import StartupFailed

#: How long a routine record may wait before it is written. Warnings and errors are written at once.
FLUSH_SECONDS = 0.2
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class BatchedHandler(logging.Handler):
    """Keeps records in memory; a writer thread formats and writes them every `interval` seconds, at
    once for a warning or worse, and when the handler closes (logging's exit hook closes it).

    A record costs the request a deque append. A `QueueListener` wakes its thread for every record,
    and that thread then takes the GIL from the request being answered: ~0.1 ms per request over
    stdio (`benchmarks/ops.py`).
    """

    def __init__(self, target: logging.Handler, interval: float = FLUSH_SECONDS) -> None:
        super().__init__()
        self.target = target
        self.interval = interval
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
            self._write_pending()
            self.target.close()
        super().close()

    def _write_loop(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval)
            self._wake.clear()
            self._write_pending()

    def _write_pending(self) -> None:
        # popleft and append are atomic, so the request thread never waits on the writer. Two threads
        # may drain at once (the writer, and logging's exit hook calling flush): the loser finds it empty.
        while True:
            try:
                record = self._records.popleft()
            except IndexError:
                return
            self.target.handle(record)


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
    target.setFormatter(logging.Formatter(FORMAT))
    # The logging HOWTO's "Optimization" settings: no caller lookup, no thread or process names we
    # never print.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger("awb")
    root.handlers[:] = [BatchedHandler(target)]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
