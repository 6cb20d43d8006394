"""Host functions: the only bridge from tool code to the outside.

`log` collects messages (capped). `read_file` reads only inside directories granted to the tool, after
resolving symlinks and `..`. `write_file` never writes: it stages the write for a person to approve.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from awb.errors import OutputExceeded, SandboxViolation
from awb.sandbox.staging import ProtectedPaths, inside_any

#: Staging callback: (path, content) -> staged write id.
Stager = Callable[[str, str], int]
MAX_READ_BYTES = 4 * 1024 * 1024
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_STAGED_PER_CALL = 100
MAX_PATH_CHARS = 4096
#: What one call's `read_file` and `write_file` may move, read and written data together. Each byte
#: costs the server work (reading, decoding, the frames both ways, the worker's interpreter): a tool
#: looping `read_file` on a 4 MB file until its time limit kept half a server CPU busy per call, and
#: refused writes cost as much as staged ones. Past it the call ends in `output_exceeded`.
MAX_HOST_BYTES_PER_CALL = 64 * 1024 * 1024
#: Host function calls one call may make. Even an empty `log('')` costs the server a round trip (tens
#: of microseconds of its CPU): a tool calling it in a loop kept 60-80% of a server CPU busy until its
#: time limit. Past it the call ends in `output_exceeded`.
MAX_HOST_CALLS_PER_CALL = 10_000


class HostCallCount:
    """The host calls of one run, counted against `MAX_HOST_CALLS_PER_CALL` (a tool's call or a plan's).

    `exhausted` is set once the budget is spent (by a host that keeps more budgets, by any of them):
    every later host call raises it, and the runtimes end the run with it (a tool or a plan that
    catches it cannot go on)."""

    #: How the refusal names the run ("this call made more than ... host function calls").
    counted_as = "this call"
    _calls = 0
    exhausted: OutputExceeded | None = None

    def count_call(self) -> None:
        """Count one host call, refused once the budget is spent. Each host function counts its own
        calls; the wire counts the calls it refuses before any host function runs
        (`count_refused_call`)."""
        if self.exhausted is None:
            self._calls += 1
            if self._calls > MAX_HOST_CALLS_PER_CALL:
                self.exhausted = OutputExceeded(
                    f"{self.counted_as} made more than {MAX_HOST_CALLS_PER_CALL} host function calls",
                    limit=MAX_HOST_CALLS_PER_CALL,
                    reason="host_calls",
                )
        if self.exhausted is not None:
            raise self.exhausted


class HostBridge(HostCallCount):
    """`HostFunctions` for one call of one tool: its host calls counted, and the bytes its reads and
    writes move (`MAX_HOST_BYTES_PER_CALL`), either budget ending the call once spent."""

    def __init__(
        self,
        *,
        read_dirs: list[str],
        stage: Stager | None,
        max_log_bytes: int,
        protected: ProtectedPaths | None = None,
    ) -> None:
        self._roots = [Path(d).resolve() for d in read_dirs]
        self._stage = stage
        self._protected = protected
        self._max_log_bytes = max_log_bytes
        self._log_bytes = 0
        self._moved = 0
        self.logs: list[str] = []
        self.staged: list[int] = []

    @property
    def read_dirs(self) -> list[str]:
        """The granted directories, resolved (runtimes with kernel sandboxes mirror them)."""
        return [str(root) for root in self._roots]

    def _spend(self, size: int) -> None:
        """Count `size` bytes read or written, refused once they pass the call's budget."""
        if self._moved + size > MAX_HOST_BYTES_PER_CALL:
            self.exhausted = OutputExceeded(
                f"this call's read_file and write_file moved more than {MAX_HOST_BYTES_PER_CALL} bytes",
                limit=MAX_HOST_BYTES_PER_CALL,
                reason="host_bytes",
            )
            raise self.exhausted
        self._moved += size

    def log(self, message: str) -> None:
        self.count_call()
        text = str(message)
        size = len(text.encode("utf-8"))
        if self._log_bytes + size > self._max_log_bytes:
            raise OutputExceeded(f"tool log is over the {self._max_log_bytes}-byte cap", limit=self._max_log_bytes)
        self._log_bytes += size
        self.logs.append(text)

    def _granted(self, path: str) -> Path:
        _check_path(path)
        if not self._roots:
            raise SandboxViolation("this tool has no granted directories; read_file is refused", path=path)
        candidate = Path(path)
        for root in self._roots:
            resolved = (root / candidate).resolve() if not candidate.is_absolute() else candidate.resolve()
            if _inside(resolved, root):
                return resolved
        raise SandboxViolation(f"read outside the granted directories refused: {path}", path=path)

    def read_file(self, path: str) -> str:
        self.count_call()
        target = self._granted(path)
        # Open without following a final symlink and check what was opened: a link swapped in after
        # the resolve above cannot lead out of the granted directories.
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            raise SandboxViolation(f"cannot read {path}: {exc.strerror}", path=path) from None
        try:
            opened = Path(os.readlink(f"/proc/self/fd/{fd}")) if Path("/proc/self/fd").is_dir() else target
            if not any(_inside(opened, root) for root in self._roots):
                raise SandboxViolation(f"read outside the granted directories refused: {path}", path=path)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SandboxViolation(f"{path} is not a regular file", path=path)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
        self._spend(len(data))
        if len(data) > MAX_READ_BYTES:
            raise OutputExceeded(f"{path} is larger than {MAX_READ_BYTES} bytes", path=path)
        return data.decode("utf-8", errors="replace")

    def write_file(self, path: str, data: str) -> dict[str, Any]:
        """Stage a write for a person to apply (`awb staged apply`); nothing touches the disk here.

        A relative path is taken inside the first granted directory; the staged path is absolute and
        must resolve inside a granted directory, and never onto one of the workbench's own files."""
        self.count_call()
        if self._stage is None:
            raise SandboxViolation("write_file is not available here", path=path)
        _check_path(path)
        if not isinstance(data, str) or not _encodable(data):
            raise SandboxViolation("write_file takes valid text data", path=path)
        size = len(data.encode("utf-8"))
        self._spend(size)  # refused writes cost the server as much as staged ones
        if size > MAX_WRITE_BYTES:
            raise OutputExceeded(f"staged write of {size} bytes is over the {MAX_WRITE_BYTES}-byte cap", path=path)
        if len(self.staged) >= MAX_STAGED_PER_CALL:
            raise OutputExceeded(f"a call may stage at most {MAX_STAGED_PER_CALL} writes", path=path)
        candidate = Path(path)
        if not candidate.is_absolute():
            if not self._roots:
                raise SandboxViolation(
                    "write_file needs an absolute path (this tool has no granted directory)", path=path
                )
            candidate = self._roots[0] / candidate
        target = Path(os.path.normpath(candidate))
        if not inside_any(str(target), self.read_dirs):
            raise SandboxViolation(f"write outside the granted directories refused: {path}", path=path)
        if self._protected is not None:
            self._protected.refuse(str(target))
        if any(target == root for root in self._roots) or target.is_dir():
            # Staged, it could only fail when a person applies it ("Is a directory").
            raise SandboxViolation(f"write_file needs a file path: {path} is a directory", path=path)
        staged_id = self._stage(str(target), data)
        self.staged.append(staged_id)
        return {"staged": True, "id": staged_id, "path": str(target)}


class CheckingHost(HostBridge):
    """The host of a load check (`Runtime.check`): the code's top level runs with every host function
    refused, and each call it makes counted as a call's are. Uncounted, top-level code calling `log`
    in a loop ran to the check's time limit, ~60% of a server CPU answering it on the event loop."""

    def __init__(self) -> None:
        super().__init__(read_dirs=[], stage=None, max_log_bytes=0)

    def _refuse(self) -> SandboxViolation:
        self.count_call()
        return SandboxViolation("no host functions while checking")

    def log(self, message: str) -> None:
        raise self._refuse()

    def read_file(self, path: str) -> str:
        raise self._refuse()

    def write_file(self, path: str, data: str) -> dict[str, Any]:
        raise self._refuse()


def count_refused_call(host: object) -> None:
    """Count a host call refused before reaching a host function (no such function, arguments of the
    wrong kind) against the call's budget, for hosts that keep one (`HostBridge.count_call`): such
    calls cost the server a round trip each, as a `log('')` does."""
    count = getattr(host, "count_call", None)
    if callable(count):
        count()


def end_if_exhausted(host: object) -> None:
    """Raise the host's budget error once its call has used up what host functions may move
    (`HostBridge.exhausted`): each runtime calls this after every host call, and so ends the call
    whatever the tool did with the refusal."""
    exhausted = getattr(host, "exhausted", None)
    if isinstance(exhausted, OutputExceeded):
        raise exhausted


def _check_path(path: object) -> None:
    if isinstance(path, str) and len(path) > MAX_PATH_CHARS:
        raise SandboxViolation(f"a path may be {MAX_PATH_CHARS} characters at most", path=ascii(path)[:200])
    if not isinstance(path, str) or not path or "\x00" in path or not _encodable(path):
        raise SandboxViolation(
            "a path must be a non-empty string of valid text without NUL characters", path=ascii(path)[:200]
        )


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
