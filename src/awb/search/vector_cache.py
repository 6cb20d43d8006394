"""A persistent cache of tool vectors: one small SQLite file, so a catalogue embedded once is not embedded again.

An entry is keyed by the embedding model's identity and a hash of the exact texts embedded, and holds
the vector's float32 bytes as they were computed: a hit is the same vector, bit for bit. The file is
bounded (least recently used entries pruned past `max_entries`), shared by processes (WAL, busy
timeout), and never fatal: a corrupt file is rebuilt empty with a warning, and a cache that cannot be
opened or written is skipped (the vectors are then computed, as without a cache).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awb.search.cache_home import cache_home
from awb.search.numpy_once import ensure_numpy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from awb.search.embeddings import Embedder

log = logging.getLogger("awb.search")

FILENAME = "tool-vectors.sqlite3"
#: ~1.6 KB a 384-dimension vector: about 16 MB, twice a 5,000-tool catalogue.
DEFAULT_ENTRIES = 10_000
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5_000
#: An entry's last use is written again only when it is older than this: a warm run over 5,000 tools
#: reads them without writing each one back.
TOUCH_AFTER_S = 3_600
#: Keys per lookup statement (SQLite's older builds bind at most 999 values).
LOOKUP_CHUNK = 500
#: SQLite's codes for a file that is not (or no longer) a database: rebuilt, not reported as a failure.
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED


def default_cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/awb/tool-vectors.sqlite3`, else `~/.cache/awb/tool-vectors.sqlite3`."""
    return cache_home(environ) / FILENAME


def vector_cache_at(path: Path | None, max_entries: int = DEFAULT_ENTRIES) -> VectorCache | None:
    """A cache in `path` (None: `default_cache_path()`), or None when `max_entries` is 0 or there is no
    home directory to hold it. Nothing is opened until it is used."""
    if max_entries <= 0:
        return None
    try:
        return VectorCache(path if path is not None else default_cache_path(), max_entries=max_entries)
    except RuntimeError as exc:  # Path.home() without HOME or a passwd entry
        log.warning("the tool vector cache is off: %s", exc)
        return None


def text_key(texts: Sequence[str]) -> bytes:
    """The hash of exactly these texts, in this order (each length-prefixed: no two lists share one)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.digest()


def embedder_identity(embedder: Embedder) -> str:
    """What makes an embedder's vectors what they are: its `identity` when it has one (the local model's
    says its files' hash and runtime), else its model id and dimension."""
    identity = getattr(embedder, "identity", None)
    return str(identity) if identity else f"{embedder.model_id}/{embedder.dim}"


class VectorCache:
    """Vectors by (model identity, text hash) in a SQLite file, opened on first use; thread-safe."""

    def __init__(self, path: Path, *, max_entries: int = DEFAULT_ENTRIES, clock: Callable[[], float] = time.time):
        self.path = path
        self.max_entries = max(1, max_entries)
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        #: Set when the file cannot be used at all (no permission, no room): the process goes on without it.
        self._broken: str | None = None
        self.hits = 0
        self.misses = 0

    # --- the file ---------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is None and self._broken is None:
            try:
                self._conn = self._open()
            except sqlite3.DatabaseError as exc:
                if is_corrupt(exc):
                    self._conn = self._rebuild(exc)
                elif sqlite_code(exc) in BUSY_CODES:
                    # Another process holds it (making it, most likely) past the timeout: try again next time.
                    log.info("tool vector cache %s is busy: %s", self.path, exc)
                else:
                    self._give_up(exc)
            except OSError as exc:
                self._give_up(exc)
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Before the first write only (a new file): five 1.5 KB vectors to a page, where 4 KB pages
            # held two (2.1 KB an entry on disk, 1.65 with these).
            conn.execute("PRAGMA page_size = 8192")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                conn.execute("BEGIN IMMEDIATE")
                # Another process may have made it meanwhile; a file of another schema is only a cache.
                if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    conn.execute("DROP TABLE IF EXISTS vectors")
                    conn.execute(
                        "CREATE TABLE vectors (model TEXT NOT NULL, text_hash BLOB NOT NULL, vector BLOB NOT NULL,"
                        " used INTEGER NOT NULL, PRIMARY KEY (model, text_hash))"
                    )
                    conn.execute("CREATE INDEX vectors_used ON vectors (used)")
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            else:
                # A file whose pages are damaged may still say its version: read a row to find out.
                conn.execute("SELECT count(*) FROM (SELECT 1 FROM vectors LIMIT 1)").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def _rebuild(self, exc: BaseException) -> sqlite3.Connection | None:
        log.warning("tool vector cache %s was unreadable (%s): rebuilt empty", self.path, exc)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for suffix in ("", "-wal", "-shm"):
            try:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            except OSError:
                pass
        try:
            return self._open()
        except (sqlite3.DatabaseError, OSError) as again:
            self._give_up(again)
            return None

    def _give_up(self, exc: BaseException) -> None:
        self._broken = str(exc)
        log.warning("tool vector cache %s is not used: %s", self.path, exc)

    def _run(self, work: Callable[[sqlite3.Connection], Any], default: Any) -> Any:
        """`work` on the connection; a corrupt file is rebuilt and `work` tried once more, any other
        failure (a lock held past the timeout, a full disk) gives `default`."""
        with self._lock:
            for attempt in range(2):
                conn = self._connection()
                if conn is None:
                    return default
                try:
                    return work(conn)
                except sqlite3.DatabaseError as exc:
                    if conn.in_transaction:
                        conn.rollback()
                    if not is_corrupt(exc) or attempt:
                        log.warning("tool vector cache %s: %s", self.path, exc)
                        return default
                    self._conn = self._rebuild(exc)
            return default

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # --- entries ----------------------------------------------------------------------------------

    def get_many(self, model: str, keys: Sequence[bytes], *, size: int) -> dict[bytes, bytes]:
        """The stored vectors of these keys that are `size` bytes long (any other is a miss)."""

        def read(conn: sqlite3.Connection) -> dict[bytes, bytes]:
            found: dict[bytes, bytes] = {}
            stale: list[tuple[int, str, bytes]] = []
            now = int(self._clock())
            for start in range(0, len(keys), LOOKUP_CHUNK):
                part = keys[start : start + LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    f"SELECT text_hash, vector, used FROM vectors WHERE model = ? AND text_hash IN ({marks})",
                    (model, *part),
                ).fetchall()
                for key, vector, used in rows:
                    if len(vector) == size:
                        found[key] = vector
                        if used < now - TOUCH_AFTER_S:
                            stale.append((now, model, key))
            if stale:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany("UPDATE vectors SET used = ? WHERE model = ? AND text_hash = ?", stale)
                    conn.execute("COMMIT")
                except sqlite3.OperationalError:  # another process writes: the order of use is a hint
                    if conn.in_transaction:
                        conn.rollback()
            return found

        found: dict[bytes, bytes] = self._run(read, {})
        return found

    def put_many(self, model: str, entries: Sequence[tuple[bytes, bytes]]) -> None:
        """Store these (key, vector bytes), then prune the least recently used past `max_entries`."""
        if not entries:
            return

        def write(conn: sqlite3.Connection) -> None:
            now = int(self._clock())
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (model, text_hash, vector, used) VALUES (?, ?, ?, ?)",
                [(model, key, vector, now) for key, vector in entries],
            )
            over = conn.execute("SELECT count(*) FROM vectors").fetchone()[0] - self.max_entries
            if over > 0:
                conn.execute(
                    "DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM vectors ORDER BY used, rowid LIMIT ?)",
                    (over,),
                )
            conn.execute("COMMIT")

        self._run(write, None)

    def count(self) -> int:
        counted: int = self._run(lambda conn: conn.execute("SELECT count(*) FROM vectors").fetchone()[0], 0)
        return counted

    def vectors(
        self,
        embedder: Embedder,
        keys: Sequence[bytes],
        compute: Callable[[list[int]], npt.NDArray[np.float32]],
    ) -> npt.NDArray[np.float32]:
        """The vectors of `keys`, in order: those stored come from the file, the rest from
        `compute(positions)`, and are stored."""
        ensure_numpy()
        import numpy as np

        model, dim = embedder_identity(embedder), embedder.dim
        found = self.get_many(model, keys, size=4 * dim)
        result: npt.NDArray[np.float32] = np.zeros((len(keys), dim), dtype=np.float32)
        missing = [i for i, key in enumerate(keys) if key not in found]
        for i, key in enumerate(keys):
            if key in found:
                result[i] = np.frombuffer(found[key], dtype="<f4")
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            computed = np.asarray(compute(missing), dtype="<f4")
            result[missing] = computed
            self.put_many(model, [(keys[i], row.tobytes()) for i, row in zip(missing, computed, strict=True)])
        return result


def sqlite_code(exc: sqlite3.DatabaseError) -> int | None:
    """SQLite's primary result code of `exc`, where Python says it."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF  # the primary code, without the extended bits


def is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Whether `exc` says the file is damaged or not a database (rebuilt, not reported as a failure)."""
    code = sqlite_code(exc)
    if code is not None:
        return code in _CORRUPT_CODES
    return "not a database" in str(exc) or "malformed" in str(exc)


__all__ = [
    "BUSY_CODES",
    "DEFAULT_ENTRIES",
    "VectorCache",
    "default_cache_path",
    "embedder_identity",
    "is_corrupt",
    "sqlite_code",
    "text_key",
    "vector_cache_at",
]
