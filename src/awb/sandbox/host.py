"""Host functions: the only bridge from tool code to the outside.

`log` collects messages (capped). `read_file` reads only inside directories granted to the tool, after
resolving symlinks and `..`. `write_file` never writes: it stages the write for a person to approve.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from awb.errors import OutputExceeded, SandboxViolation

#: Staging callback: (path, content) -> staged write id.
Stager = Callable[[str, str], int]
MAX_READ_BYTES = 4 * 1024 * 1024


class HostBridge:
    """`HostFunctions` for one call of one tool."""

    def __init__(self, *, read_dirs: list[str], stage: Stager | None, max_log_bytes: int) -> None:
        self._roots = [Path(d).resolve() for d in read_dirs]
        self._stage = stage
        self._max_log_bytes = max_log_bytes
        self._log_bytes = 0
        self.logs: list[str] = []
        self.staged: list[int] = []

    def log(self, message: str) -> None:
        text = str(message)
        size = len(text.encode("utf-8"))
        if self._log_bytes + size > self._max_log_bytes:
            raise OutputExceeded(f"tool log is over the {self._max_log_bytes}-byte cap", limit=self._max_log_bytes)
        self._log_bytes += size
        self.logs.append(text)

    def _granted(self, path: str) -> Path:
        if not self._roots:
            raise SandboxViolation("this tool has no granted directories; read_file is refused", path=path)
        candidate = Path(path)
        for root in self._roots:
            resolved = (root / candidate).resolve() if not candidate.is_absolute() else candidate.resolve()
            if resolved == root or root in resolved.parents:
                return resolved
        raise SandboxViolation(f"read outside the granted directories refused: {path}", path=path)

    def read_file(self, path: str) -> str:
        target = self._granted(str(path))
        try:
            with target.open("rb") as handle:
                data = handle.read(MAX_READ_BYTES + 1)
        except OSError as exc:
            raise SandboxViolation(f"cannot read {path}: {exc.strerror}", path=path) from None
        if len(data) > MAX_READ_BYTES:
            raise OutputExceeded(f"{path} is larger than {MAX_READ_BYTES} bytes", path=path)
        return data.decode("utf-8", errors="replace")

    def write_file(self, path: str, data: str) -> dict[str, Any]:
        if self._stage is None:
            raise SandboxViolation("write_file is not available here", path=path)
        staged_id = self._stage(str(path), str(data))
        self.staged.append(staged_id)
        return {"staged": True, "id": staged_id, "path": str(path)}
