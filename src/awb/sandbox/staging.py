"""Staged writes ("shadow mode"): what tools asked to write, waiting for a person to apply or discard.

Tools can only stage (`write_file`); applying is for people (CLI, web panel), never for agents.
A write is staged only inside the tool's granted directories, and never onto the workbench's own
files (inventory and its -wal/-shm, config, pid file, logs, anything under a `.awb` directory);
both rules are checked again, on the resolved path, when a person applies it.
"""

from __future__ import annotations

import codecs
import errno
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from awb.errors import InvalidParams, SandboxViolation
from awb.inventory.stored_int import MAX_STORED_INT

if TYPE_CHECKING:
    from awb.config import Config
    from awb.inventory.models import Tool

PENDING, APPLYING, APPLIED, DISCARDED = "pending", "applying", "applied", "discarded"


class StagingStore(Protocol):
    """The store methods staging needs (`SQLiteStore` has them)."""

    def staged_writes(
        self,
        status: str | None = None,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        preview: int | None = None,
    ) -> list[dict[str, Any]]: ...

    def get_staged(self, staged_id: int) -> dict[str, Any] | None: ...

    def set_staged_status(self, staged_id: int, status: str, *, expected: str | None = None) -> bool: ...

    def get(self, tool_id: str) -> Tool | None: ...


#: Directory names whose contents belong to the workbench, wherever they are.
_OWN_DIRS = (".awb",)
#: SQLite keeps these beside a database; each is as much the inventory as the file itself.
_DB_SIDECARS = ("", "-wal", "-shm", "-journal")


@dataclass(frozen=True)
class ProtectedPaths:
    """The workbench's own files, which no staged write may target. Compared after resolving
    symlinks and `..`, and without regard to case (a case-insensitive filesystem maps `.AWB` to `.awb`)."""

    files: frozenset[str]
    dirs: frozenset[str]

    def refuse(self, path: str) -> None:
        """Raise `sandbox_violation` when `path` (or what it resolves to) is one of the workbench's files."""
        # Imported here: `awb staged` is mounted on the CLI, whose start-up must not load the config model.
        from awb.config import CONFIG_FILENAME

        for form in {os.path.normpath(path), os.path.realpath(path)}:
            folded = form.casefold()
            parts = Path(folded).parts
            if (
                folded in self.files
                or any(folded == d or folded.startswith(d + os.sep) for d in self.dirs)
                or any(part in _OWN_DIRS for part in parts)
                or (parts and parts[-1] == CONFIG_FILENAME.casefold())
            ):
                raise SandboxViolation(f"{path} is one of the workbench's own files; it cannot be written", path=path)


def protected_paths(config: Config, *extra: Path) -> ProtectedPaths:
    """What `config` says the workbench owns: the file it was read from too, and `extra` files."""
    files: set[Path] = {config.pid_file, *extra}
    if config.source_file is not None:
        files.add(config.source_file)
    files.update(Path(f"{config.inventory_path}{suffix}") for suffix in _DB_SIDECARS)
    dirs: set[Path] = set()
    if config.log_file is not None:
        files.add(config.log_file)
        files.update(Path(f"{config.log_file}.{n}") for n in range(1, 10))
    for owned in (config.inventory_path, config.pid_file):
        if owned.parent.name.casefold() in _OWN_DIRS:
            dirs.add(owned.parent)
    return ProtectedPaths(files=_folded_forms(files), dirs=_folded_forms(dirs))


def _folded_forms(paths: set[Path]) -> frozenset[str]:
    forms: set[str] = set()
    for path in paths:
        absolute = os.path.abspath(path)
        forms.update({os.path.normpath(absolute).casefold(), os.path.realpath(absolute).casefold()})
    return frozenset(forms)


def granted_dirs(grants: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """The directories the configuration grants the tool named `name`, now.

    The configuration is the one authority: a tool's stored record keeps what it was granted when
    crafted, which an import, a hand-edited inventory or a replica with other grants can set, and which
    a grant revoked since does not change."""
    return list(grants.get(name, ()))


def inside_any(path: str, roots: Sequence[str]) -> bool:
    """Whether `path`, resolved (symlinks of its existing parts, `..`), is inside one of `roots` (resolved)."""
    resolved = Path(os.path.realpath(path))
    for root in roots:
        base = Path(os.path.realpath(root))
        if resolved == base or base in resolved.parents:
            return True
    return False


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


@dataclass(frozen=True)
class StagedPreview:
    """A staged write as a listing previews it: its facts and the beginning of its content (`head`, at
    most the bytes asked for, whole characters), never all of it. Applying one reads the write whole."""

    id: int
    tool_id: str
    call_id: str
    path: str
    head: str
    #: The whole content's size in UTF-8 bytes.
    size: int
    created_at: str
    status: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StagedPreview:
        # The first bytes asked for may end inside a character: that character is left out.
        head = codecs.getincrementaldecoder("utf-8")().decode(bytes(row["content"]), final=False)
        return cls(
            id=int(row["id"]),
            tool_id=str(row["tool_id"]),
            call_id=str(row["call_id"] or ""),
            path=str(row["path"]),
            head=head,
            size=int(row["size"]),
            created_at=str(row["created_at"]),
            status=str(row["status"]),
        )

    @property
    def whole(self) -> bool:
        """Whether `head` is all of the content."""
        return len(self.head.encode("utf-8")) >= self.size


#: Statuses a listing may ask for (`applying` is the moment between claiming a write and writing it).
LISTED_STATUSES = (PENDING, APPLYING, APPLIED, DISCARDED)


#: The most staged writes one page of a listing holds: applied and discarded writes are kept, so a
#: listing of them all grows without end.
MAX_PAGE = 1000
#: A page of a listing that does not say how many: the panel's and `awb staged list`'s. Each write may
#: hold up to `awb.sandbox.host.MAX_WRITE_BYTES`, so a listing of them all could hold gigabytes.
PAGE = 25


def list_staged(
    store: StagingStore,
    status: str | None = PENDING,
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int | None = None,
) -> list[StagedWrite]:
    """Staged writes with `status` (default: pending; None for all), oldest first. With `limit` (at most
    `MAX_PAGE`), one page: the first writes with an id past `after`, or the last ones before `before`."""
    if status is not None and status not in LISTED_STATUSES:
        raise InvalidParams(f"no staged-write status {status!r}: one of {', '.join(LISTED_STATUSES)}", status=status)
    if limit is not None and not 1 <= limit <= MAX_PAGE:
        raise InvalidParams(f"a page holds 1 to {MAX_PAGE} staged writes, not {limit}", field="limit")
    return _read(store, status, after, before, limit)


def list_previews(
    store: StagingStore,
    status: str | None,
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int,
    preview_bytes: int,
) -> list[StagedPreview]:
    """A page of staged writes as `list_staged` reads it, each with its content's first `preview_bytes`
    only: what a listing shows of a page of writes costs as much whatever their size."""
    if status is not None and status not in LISTED_STATUSES:
        raise InvalidParams(f"no staged-write status {status!r}: one of {', '.join(LISTED_STATUSES)}", status=status)
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidParams(f"a page holds 1 to {MAX_PAGE} staged writes, not {limit}", field="limit")
    after = None if after is None else min(max(after, 0), MAX_STORED_INT)
    before = None if before is None else min(max(before, 0), MAX_STORED_INT)
    rows = store.staged_writes(status, after_id=after, before_id=before, limit=limit, preview=preview_bytes)
    return [StagedPreview.from_row(row) for row in rows]


def staged_page(
    store: StagingStore, status: str | None = PENDING, *, after: int | None = None, limit: int = PAGE
) -> tuple[list[StagedWrite], int | None]:
    """The first `limit` writes with `status` and an id past `after` (as `list_staged`), and the id to
    list the next page from: None on the last page."""
    if status is not None and status not in LISTED_STATUSES:
        raise InvalidParams(f"no staged-write status {status!r}: one of {', '.join(LISTED_STATUSES)}", status=status)
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidParams(f"a page holds 1 to {MAX_PAGE} staged writes, not {limit}", field="limit")
    writes = _read(store, status, after, None, limit + 1)  # one more says whether another page follows
    return writes[:limit], writes[limit - 1].id if len(writes) > limit else None


def _read(
    store: StagingStore, status: str | None, after: int | None, before: int | None, limit: int | None
) -> list[StagedWrite]:
    # An id past the database's integers is past every write (the database cannot even compare it).
    after = None if after is None else min(max(after, 0), MAX_STORED_INT)
    before = None if before is None else min(max(before, 0), MAX_STORED_INT)
    rows = store.staged_writes(status, after_id=after, before_id=before, limit=limit)
    return [StagedWrite.from_row(row) for row in rows]


def get_staged(store: StagingStore, staged_id: int) -> StagedWrite:
    # An id past the database's integers names no write (the database cannot even compare it).
    row = store.get_staged(staged_id) if 0 < staged_id <= MAX_STORED_INT else None
    if row is None:
        raise InvalidParams(f"no staged write with id {staged_id}", id=staged_id)
    return StagedWrite.from_row(row)


def apply_staged(
    store: StagingStore,
    staged_id: int,
    *,
    grants: Mapping[str, Sequence[str]],
    protected: ProtectedPaths | None = None,
    force: bool = False,
) -> StagedWrite:
    """Write the staged content to its path for real (parent directories created, atomic replace)
    and mark it applied. Only a pending write can be applied, once.

    The path is checked again as it resolves now: never one of the `protected` files (not even with
    `force`), and inside the directories `grants` (the configuration's `sandbox.grants`) gives the tool's
    name now unless `force` (grants may have been revoked, or a symlink swapped in since the write was
    staged)."""
    staged = get_staged(store, staged_id)
    # Without the configuration's list, the rules that need none still hold (.awb/, awb.config.json).
    (protected or ProtectedPaths(frozenset(), frozenset())).refuse(staged.path)
    if not force:
        tool = store.get(staged.tool_id)
        if not inside_any(staged.path, [] if tool is None else granted_dirs(grants, tool.name)):
            raise SandboxViolation(
                f"staged write {staged_id} targets {staged.path}, outside the granted directories of its tool; "
                "review it and apply with --force to write it anyway",
                id=staged_id,
                path=staged.path,
            )
    if not store.set_staged_status(staged_id, APPLYING, expected=PENDING):
        current = get_staged(store, staged_id).status
        raise InvalidParams(f"staged write {staged_id} is {current}, not pending; it cannot be applied", status=current)
    try:
        _write_atomically(Path(staged.path), staged.content)
    except OSError as exc:
        store.set_staged_status(staged_id, PENDING, expected=APPLYING)
        raise InvalidParams(f"cannot write {staged.path}: {_reason(exc, staged.path)}", id=staged_id) from None
    except BaseException:
        # Interrupted (Ctrl-C in `awb staged apply --all`): pending again, or `applying` for good, a status
        # nothing applies, discards or moves on from. The atomic replace wrote all of the file or none of it.
        store.set_staged_status(staged_id, PENDING, expected=APPLYING)
        raise
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


def _reason(error: OSError, path: str) -> str:
    """The system's reason, naming the file it concerns when that is not `path` (a folder on the way)."""
    reason = error.strerror or str(error)
    on_the_way = isinstance(error.filename, str) and error.filename in map(str, Path(path).parents)
    return f"{error.filename}: {reason}" if on_the_way else reason


def _write_atomically(path: Path, content: str) -> None:
    if not path.is_absolute():
        raise OSError(f"staged path {path} is not absolute")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file on the way: "File exists" named neither
        ways = (path.parent, *path.parent.parents)
        blocking = next((part for part in ways if part.exists() and not part.is_dir()), path.parent)
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", str(blocking)) from None
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".awb")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
