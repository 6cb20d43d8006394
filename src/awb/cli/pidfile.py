"""The pid file of a workspace's `awb start --transport http` server, and the lock that makes it safe.

One HTTP server per workspace (per `pid_file`): the server holds an exclusive `flock` on its pid file
for as long as it runs, and writes a JSON record there (pid, transport, host, port, inventory). So:

- a second `awb start --transport http` on the workspace, on any port, fails to take the lock, reads
  the record and refuses with `already_running`; it never writes or deletes the file;
- `awb stop` knows a server is alive when the lock is held (a pid alone can be reused), checks that
  the pid's command line is an `awb` process, and only then sends SIGTERM;
- a pid file nobody holds the lock on is stale (the server was killed): `awb stop` reports and
  removes it, and the next `awb start` takes it over.

Servers over stdio are spawned by their MCP client and end with it; several clients may each spawn
one on the same inventory (SQLite WAL serves them all), so they take no lock and write no pid file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awb.errors import AlreadyRunning, ConfigError, StartupFailed


@dataclass(frozen=True)
class ServerRecord:
    """What a running server writes into its pid file."""

    pid: int
    transport: str = "http"
    host: str = ""
    port: int = 0
    inventory: str = ""

    @classmethod
    def parse(cls, text: str) -> ServerRecord | None:
        """The record in a pid file, or None when the file holds something else."""
        try:
            data: Any = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return None
        if isinstance(data, int) and data > 0:  # a bare pid, as older versions wrote
            return cls(pid=data, transport="")
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or data["pid"] <= 0:
            return None
        fields = {k: data[k] for k in ("transport", "host", "port", "inventory") if k in data}
        try:
            return cls(pid=data["pid"], **fields)
        except TypeError:
            return None

    def describe(self) -> str:
        where = f", {self.transport}" if self.transport else ""
        if self.port:
            where += f", port {self.port}"
        return f"pid {self.pid}{where}"


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unusable(path: Path, error: OSError) -> StartupFailed:
    return StartupFailed(
        f"cannot use the pid file {path} (`pid_file`, AWB_PID_FILE): {error.strerror or error}", pid_file=str(path)
    )


class PidFile:
    """Held by a running server: the lock, the record, and removing the file on the way out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the workspace's lock or raise `AlreadyRunning` naming the server that holds it
        (`StartupFailed` when the file cannot be made: a read-only workspace, a directory, /proc)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise _unusable(self.path, error) from None
        if not _try_lock(fd):
            text = os.read(fd, 4096).decode("utf-8", "replace")
            os.close(fd)
            record = ServerRecord.parse(text)
            who = record.describe() if record else "pid unknown"
            raise AlreadyRunning(
                f"awb is already running on this workspace ({who}; pid file {self.path}); "
                "stop it with `awb stop` first",
                pid=record.pid if record else None,
                pid_file=str(self.path),
            )
        self._fd = fd

    def write(self, record: ServerRecord) -> None:
        assert self._fd is not None, "acquire() first"
        data = json.dumps(record.__dict__).encode()
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)
        except OSError as error:  # a full disk
            raise _unusable(self.path, error) from None

    def release(self) -> None:
        """Remove the file (it is ours: we hold its lock), then let go of the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # gone already, or its folder made read-only since: nothing to do
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


@contextlib.contextmanager
def held(path: Path) -> Iterator[PidFile]:
    pid_file = PidFile(path)
    pid_file.acquire()
    try:
        yield pid_file
    finally:
        pid_file.release()


@dataclass(frozen=True)
class Found:
    """What `awb stop` found in a pid file: a live server's record, or why there is none."""

    record: ServerRecord | None
    alive: bool
    problem: str = ""


def inspect_pid_file(path: Path) -> Found | None:
    """None when there is no pid file; otherwise whether a server holds it. Never signals anything."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):  # nothing there, nor can there be
        return None
    except OSError as error:
        raise _unreadable(path, error) from None
    try:
        try:
            text = os.read(fd, 4096).decode("utf-8", "replace")
        except OSError as error:  # a directory opens, but does not read
            raise _unreadable(path, error) from None
        record = ServerRecord.parse(text)
        # Quoted as one line of its words: what prints it escapes control characters and backslashes itself,
        # so a repr's `\\n` would show doubled.
        shown = " ".join(text[:40].split())
        if _try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            if record is None:
                return Found(None, alive=False, problem=f"garbage in the pid file ('{shown}')")
            return Found(record, alive=False, problem=f"stale pid file: no awb server holds it (pid {record.pid})")
        if record is None:
            return Found(
                None, alive=True, problem=f"a server holds the pid file but its record is unreadable ('{shown}')"
            )
        return Found(record, alive=True)
    finally:
        os.close(fd)


def _unreadable(path: Path, error: OSError) -> ConfigError:
    return ConfigError(
        f"cannot read the pid file {path} (`pid_file`, AWB_PID_FILE): {error.strerror or error}", pid_file=str(path)
    )


def is_awb_server(pid: int) -> tuple[bool, str]:
    """Whether `pid` runs `awb start` (Linux: its /proc command line); the command line for messages."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False, "no such process"
    except OSError:
        return True, "(command line not readable here)"
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    is_awb = "start" in args and any(Path(a).name == "awb" or a == "awb" or a.endswith("awb/__main__.py") for a in args)
    # `python -m awb start` shows as [python, -m, awb, start].
    is_awb = is_awb or ("-m" in args and "awb" in args and "start" in args)
    return is_awb, " ".join(" ".join(args).split())[:200]
