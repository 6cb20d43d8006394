"""Staged writes ("shadow mode"): what tools asked to write, waiting for a person to apply or discard.

Tools can only stage (`write_file`); applying is for people (CLI, web panel), never for agents.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from awb.errors import InvalidParams

PENDING, APPLYING, APPLIED, DISCARDED = "pending", "applying", "applied", "discarded"


class StagingStore(Protocol):
    """The store methods staging needs (`SQLiteStore` has them)."""

    def staged_writes(self, status: str | None = None) -> list[dict[str, Any]]: ...

    def get_staged(self, staged_id: int) -> dict[str, Any] | None: ...

    def set_staged_status(self, staged_id: int, status: str, *, expected: str | None = None) -> bool: ...


@dataclass(frozen=True)
class StagedWrite:
    id: int
    tool_id: str
    call_id: str
    path: str
    content: str
    created_at: str
    status: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StagedWrite:
        return cls(
            id=int(row["id"]),
            tool_id=str(row["tool_id"]),
            call_id=str(row["call_id"] or ""),
            path=str(row["path"]),
            content=str(row["content"]),
            created_at=str(row["created_at"]),
            status=str(row["status"]),
        )

    @property
    def size(self) -> int:
        return len(self.content.encode("utf-8"))

    def to_dict(self, *, content: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "tool_id": self.tool_id,
            "call_id": self.call_id,
            "path": self.path,
            "size": self.size,
            "created_at": self.created_at,
            "status": self.status,
        }
        if content:
            data["content"] = self.content
        return data


def list_staged(store: StagingStore, status: str | None = PENDING) -> list[StagedWrite]:
    """Staged writes with `status` (default: pending; None for all), oldest first."""
    return [StagedWrite.from_row(row) for row in store.staged_writes(status)]


def get_staged(store: StagingStore, staged_id: int) -> StagedWrite:
    row = store.get_staged(staged_id)
    if row is None:
        raise InvalidParams(f"no staged write with id {staged_id}", id=staged_id)
    return StagedWrite.from_row(row)


def apply_staged(store: StagingStore, staged_id: int) -> StagedWrite:
    """Write the staged content to its path for real (parent directories created, atomic replace)
    and mark it applied. Only a pending write can be applied, once."""
    staged = get_staged(store, staged_id)
    if not store.set_staged_status(staged_id, APPLYING, expected=PENDING):
        current = get_staged(store, staged_id).status
        raise InvalidParams(f"staged write {staged_id} is {current}, not pending; it cannot be applied", status=current)
    try:
        _write_atomically(Path(staged.path), staged.content)
    except OSError as exc:
        store.set_staged_status(staged_id, PENDING, expected=APPLYING)
        raise InvalidParams(f"cannot write {staged.path}: {exc.strerror or exc}", id=staged_id) from None
    store.set_staged_status(staged_id, APPLIED, expected=APPLYING)
    return get_staged(store, staged_id)


def discard_staged(store: StagingStore, staged_id: int) -> StagedWrite:
    """Drop a pending staged write; nothing is written."""
    get_staged(store, staged_id)
    if not store.set_staged_status(staged_id, DISCARDED, expected=PENDING):
        current = get_staged(store, staged_id).status
        raise InvalidParams(
            f"staged write {staged_id} is {current}, not pending; it cannot be discarded", status=current
        )
    return get_staged(store, staged_id)


def _write_atomically(path: Path, content: str) -> None:
    if not path.is_absolute():
        raise OSError(f"staged path {path} is not absolute")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".awb")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
