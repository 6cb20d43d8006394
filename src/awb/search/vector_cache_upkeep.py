"""The tool vector cache as a person sees it outside any run: what the file holds, and clearing it.

Reading opens the file read-only and loads neither numpy nor a model (`awb doctor` says it in a row);
clearing empties it in one transaction, so a planner that has it open meanwhile goes on with an empty
cache rather than a deleted file.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awb.errors import Busy, Unavailable
from awb.search.vector_cache import BUSY_CODES, BUSY_TIMEOUT_MS, SCHEMA_VERSION, is_corrupt, sqlite_code

#: The files a SQLite database in WAL mode is made of.
COMPANIONS = ("", "-wal", "-shm")
#: How long a look waits for a writer that holds the file (a checkpoint); a reader in WAL mode never
#: waits otherwise. Short: `awb doctor` is not held up by a planner.
LOOK_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class CacheContents:
    """What the cache file holds: entries by the model identity they are keyed to, and its size on disk."""

    path: Path
    exists: bool = False
    entries: int = 0
    size_bytes: int = 0
    #: Entries by embedder identity (`vector_cache.embedder_identity`), most first.
    models: dict[str, int] = field(default_factory=dict)
    #: Why the file could not be read, with what to do; None when it was read (or is not there).
    problem: str | None = None
    #: The file is no cache of this awb's (damaged, not a database, another schema): a planner rebuilds it.
    damaged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "exists": self.exists,
            "entries": self.entries,
            "size_bytes": self.size_bytes,
            "models": self.models,
            "problem": self.problem,
            "damaged": self.damaged,
        }


def size_on_disk(path: Path) -> int:
    """The bytes of the file and its WAL companions (those that exist)."""
    total = 0
    for suffix in COMPANIONS:
        try:
            total += Path(f"{path}{suffix}").stat().st_size
        except FileNotFoundError:
            continue
    return total


def look(path: Path) -> CacheContents:
    """What the cache at `path` holds, read without writing (no file is made where there is none). A
    file that cannot be read is described, with what to do, never raised."""
    try:
        if not path.exists():
            return CacheContents(path)
        size = size_on_disk(path)
    except OSError as exc:
        return CacheContents(path, problem=_unreachable(path, exc.strerror or str(exc)))
    # Read-only: a WAL file there says a planner has the cache open (or left it so): read through it. None
    # there, no process has it open and nothing changes it (writers write to the WAL they make first):
    # `immutable` reads it without making the -wal and -shm files a read-only connection otherwise leaves.
    live = Path(f"{path}-wal").exists()
    uri = f"{path.absolute().as_uri()}?mode=ro" + ("" if live else "&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=LOOK_TIMEOUT_S)
    except sqlite3.Error as exc:
        return _unread(path, size, exc)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            problem = (
                f"{path} is not a cache of this awb's (schema {version}, this awb's {SCHEMA_VERSION}): the next "
                "`awb plan` makes it again, or `awb cache clear` removes it now"
            )
            return CacheContents(path, exists=True, size_bytes=size, problem=problem, damaged=True)
        # The primary key is (model, text_hash): counted from its index, not the vectors' pages.
        rows = conn.execute("SELECT model, count(*) FROM vectors GROUP BY model ORDER BY count(*) DESC, model")
        models = {str(model): int(count) for model, count in rows}
    except sqlite3.Error as exc:
        return _unread(path, size, exc)
    finally:
        conn.close()
    return CacheContents(path, exists=True, entries=sum(models.values()), size_bytes=size, models=models)


def clear(path: Path) -> int:
    """Empty the cache at `path` and give its space back; the entries removed. A file that is not a
    cache (damaged, not a database, another schema) is removed with its companions, as a planner would
    rebuild it. `Busy` when a planner holds it past the busy timeout, `Unavailable` when it cannot be
    written."""
    try:
        if not path.exists():
            return 0
    except OSError as exc:
        raise Unavailable(
            f"cannot clear the tool vector cache: {_unreachable(path, exc.strerror or str(exc))}"
        ) from None
    uri = f"{path.absolute().as_uri()}?mode=rw"  # never makes a file: one gone meanwhile stays gone
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as exc:
        raise _cannot_clear(path, exc) from None
    removed, damaged = 0, False
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            damaged = True  # another awb's cache, or an empty file: nothing a planner would read
        else:
            conn.execute("BEGIN IMMEDIATE")
            removed = int(conn.execute("DELETE FROM vectors").rowcount)
            conn.execute("COMMIT")
            _give_back_space(conn)
    except sqlite3.DatabaseError as exc:
        if not is_corrupt(exc):
            raise _cannot_clear(path, exc) from None
        damaged = True
    finally:
        conn.close()
    if damaged:
        _remove(path)
    return removed


def _give_back_space(conn: sqlite3.Connection) -> None:
    """The pages the entries held go back to the file system. A planner reading meanwhile may keep the
    WAL from shrinking until it is done: the cache is empty either way."""
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError:
        pass


def _cannot_clear(path: Path, exc: sqlite3.Error) -> Busy | Unavailable:
    if isinstance(exc, sqlite3.DatabaseError) and sqlite_code(exc) in BUSY_CODES:
        return Busy(f"the tool vector cache {path} is busy (a planner writes to it); try again", path=str(path))
    return Unavailable(f"cannot clear the tool vector cache {path}: {exc}", path=str(path))


def _remove(path: Path) -> None:
    for suffix in COMPANIONS:
        try:
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        except OSError as exc:
            raise Unavailable(
                f"cannot remove the damaged tool vector cache {path}{suffix}: {exc.strerror}", path=str(path)
            ) from None


def _unread(path: Path, size: int, exc: sqlite3.Error) -> CacheContents:
    damaged = isinstance(exc, sqlite3.DatabaseError) and is_corrupt(exc)
    return CacheContents(path, exists=True, size_bytes=size, problem=_unreadable(path, exc), damaged=damaged)


def _unreachable(path: Path, reason: str) -> str:
    return (
        f"cannot reach {path} ({reason}): check the permissions of its folder, or set search.vector_cache to a "
        "file of this user's"
    )


def _unreadable(path: Path, exc: sqlite3.Error) -> str:
    if isinstance(exc, sqlite3.DatabaseError) and is_corrupt(exc):
        return (
            f"{path} is damaged or not a database ({exc}): `awb cache clear` removes it; the next `awb plan` "
            "would rebuild it empty"
        )
    return (
        f"cannot read {path} ({exc}): check its permissions, or set search.vector_cache to a file of this "
        "user's; `awb cache clear` removes it"
    )


__all__ = ["CacheContents", "clear", "look", "size_on_disk"]
