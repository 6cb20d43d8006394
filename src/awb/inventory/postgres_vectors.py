"""The optional pgvector path of the PostgreSQL inventory: each tool's vector also in an HNSW index.

`tool_vectors` stays the record (export, import and the in-memory path read it); when the server has
the `vector` extension and `search.pgvector` is `auto`, every vector is mirrored, in the same
transaction, into a table per dimension (`tool_vectors_hnsw_<dim>`, an HNSW index on cosine distance)
and search asks the database for the nearest tools instead of holding every vector in each server's
memory. Without the extension (Debian's PostgreSQL packages do not ship it) nothing changes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from awb.search.numpy_once import ensure_numpy
from awb.search.vector_index import SEARCH_PATH

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger("awb.inventory")

PgVectorSetting = Literal["auto", "off"]
#: pgvector's HNSW indexes `vector` columns of at most this many dimensions.
HNSW_MAX_DIM = 2000
#: hnsw.ef_search of a search, at least. Top-10 overlap with exact cosine at 10,000 random 384-dimension
#: vectors: 0.57 at 100, 0.78 at 200, 0.93 at 400 (0.80, 0.88, 0.95 for queries near a stored vector),
#: for 12-19 ms a query here (noisy): see benchmarks/scale.py --pgvector.
MIN_EF_SEARCH = 400
#: pgvector refuses a larger hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Serialises CREATE EXTENSION and the creation of a dimension's table across servers ("awb_pgv").
PGVECTOR_LOCK = 0x6177625F706776
TABLE_PREFIX = "tool_vectors_hnsw_"
#: Rows the backfill writes per statement.
BACKFILL_BATCH = 500
IN_MEMORY_PATH = f"{SEARCH_PATH}, kept in step by LISTEN/NOTIFY"


def table_name(dim: int) -> str:
    return f"{TABLE_PREFIX}{int(dim)}"


def vector_text(values: Sequence[float]) -> str:
    """pgvector's text form. repr of a float32 widened to float64 is exact, and pgvector's strtof
    reads the same float32 back."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


@dataclass(frozen=True)
class PgVectorState:
    """Whether this store searches through pgvector, and, when it does not, why."""

    active: bool
    version: str | None
    reason: str

    @property
    def path(self) -> str:
        """The vector search path as `awb doctor` and `awb db status` say it."""
        if self.active:
            return f"pgvector HNSW (extension {self.version}), cosine distance in the database"
        return f"{IN_MEMORY_PATH} (pgvector not used: {self.reason})"


def probe(conn: Any, setting: PgVectorSetting) -> PgVectorState:
    """What the path is on this database, read-only (`awb db status`: nothing is created)."""
    if setting == "off":
        return PgVectorState(False, None, "search.pgvector is 'off'")
    installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if installed is not None:
        return PgVectorState(True, str(installed[0]), "")
    available = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if available is None:
        return PgVectorState(False, None, "the server has no pgvector extension")
    return PgVectorState(
        False,
        str(available[0]),
        f"pgvector {available[0]} is available; a server creates it when it opens the inventory",
    )


def enable(conn: Any, setting: PgVectorSetting) -> PgVectorState:
    """Create the extension when the server has it (under a lock: servers may start together); a
    failure (no privilege) leaves the in-memory path, with why."""
    import psycopg

    state = probe(conn, setting)
    if state.active or state.version is None:
        return state
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (PGVECTOR_LOCK,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        reason = f"CREATE EXTENSION vector failed: {str(exc).strip().splitlines()[0]}"
        log.warning("vector search stays in memory: %s", reason)
        return PgVectorState(False, state.version, reason)
    return probe(conn, setting)


def known_tables(conn: Any) -> set[int]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE %s",
        (TABLE_PREFIX + "%",),
    ).fetchall()
    return {int(r[0][len(TABLE_PREFIX) :]) for r in rows if r[0][len(TABLE_PREFIX) :].isdigit()}


def ensure_table(conn: Any, dim: int, *, index: bool = True) -> None:
    """The table and HNSW index for vectors of `dim` dimensions, in the caller's transaction.

    A purge deletes the row with the tool (the foreign key cascades)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (PGVECTOR_LOCK,))
    table = table_name(dim)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (tool_id TEXT PRIMARY KEY REFERENCES tools(tool_id) ON DELETE CASCADE, "
        f"model_id TEXT NOT NULL, embedding vector({int(dim)}) NOT NULL)"
    )
    if index:
        conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)")


class PgVectorMirror:
    """Keeps the pgvector tables in step with `tool_vectors` for one store.

    A server with `search.pgvector` off searches in memory but still writes into the tables it finds at
    start, so servers configured differently on one database leave no stale mirror behind; it creates
    none. Vectors that reach `tool_vectors` by another way are mirrored by the next active start."""

    def __init__(self, state: PgVectorState) -> None:
        self.state = state
        self.dims: set[int] = set()

    @classmethod
    def open(cls, pool: Any, setting: PgVectorSetting) -> PgVectorMirror:
        with pool.connection() as conn:
            mirror = cls(enable(conn, setting))
            if mirror.state.active or probe(conn, "auto").active:
                mirror.dims = known_tables(conn)
        if mirror.state.active:
            mirror.backfill(pool)
        return mirror

    @property
    def active(self) -> bool:
        return self.state.active

    def put(self, conn: Any, tool_id: str, model_id: str, values: Sequence[float]) -> None:
        """Mirror one vector, in the caller's transaction (the one writing `tool_vectors`)."""
        dim = len(values)
        if dim > HNSW_MAX_DIM or (not self.active and dim not in self.dims):
            return
        if dim not in self.dims:
            ensure_table(conn, dim)
        # A vector of another dimension (a new model) leaves its old table.
        for other in self.dims - {dim}:
            conn.execute(f"DELETE FROM {table_name(other)} WHERE tool_id = %s", (tool_id,))
        conn.execute(
            f"INSERT INTO {table_name(dim)} (tool_id, model_id, embedding) VALUES (%s, %s, %s::vector) "
            "ON CONFLICT (tool_id) DO UPDATE SET model_id = excluded.model_id, embedding = excluded.embedding",
            (tool_id, model_id, vector_text(values)),
        )
        self.dims.add(dim)

    def backfill(self, pool: Any) -> int:
        """Mirror every vector of `tool_vectors` missing from its table (or there under another model):
        the path's first start, an import, or a server with `search.pgvector` off wrote them."""
        ensure_numpy()
        import numpy as np

        done = 0
        with pool.connection() as conn:
            dims = [int(r[0]) for r in conn.execute("SELECT DISTINCT dim FROM tool_vectors").fetchall()]
        for dim in dims:
            if dim > HNSW_MAX_DIM:
                continue
            with pool.connection() as conn, conn.transaction():
                # A new table is filled first and indexed after: building HNSW over 3,000 rows at once
                # took 1 s here, inserting them one by one into the index 9 s.
                fresh = dim not in self.dims
                if fresh:
                    ensure_table(conn, dim, index=False)
                rows = conn.execute(
                    f"SELECT v.tool_id, v.model_id, v.vector FROM tool_vectors v LEFT JOIN {table_name(dim)} p "
                    "ON p.tool_id = v.tool_id WHERE v.dim = %s AND (p.tool_id IS NULL OR p.model_id <> v.model_id)",
                    (dim,),
                ).fetchall()
                for start in range(0, len(rows), BACKFILL_BATCH):
                    batch = rows[start : start + BACKFILL_BATCH]
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            f"INSERT INTO {table_name(dim)} (tool_id, model_id, embedding) VALUES (%s, %s, %s::vector) "
                            "ON CONFLICT (tool_id) DO UPDATE SET model_id = excluded.model_id, "
                            "embedding = excluded.embedding",
                            [
                                (r[0], r[1], vector_text(np.frombuffer(bytes(r[2]), dtype="<f4").tolist()))
                                for r in batch
                            ],
                        )
                if fresh:
                    ensure_table(conn, dim)
                    self.dims.add(dim)
                if rows:
                    conn.execute(f"ANALYZE {table_name(dim)}")
                done += len(rows)
        if done:
            log.info("pgvector: mirrored %d stored vectors", done)
        return done

    def index(self, pool: Any, model_id: str, dim: int) -> PgVectorIndex | None:
        """What search asks for the nearest tools, or None (search then loads the in-memory index)."""
        if not self.active or dim > HNSW_MAX_DIM:
            return None
        return PgVectorIndex(pool, model_id, dim)


class PgVectorIndex:
    """`VectorIndex.nearest` answered by the database: the HNSW index ranks, nothing is held here.

    put and remove do nothing: the store writes the mirror with `tool_vectors`, and a deleted tool is
    left out by the query (a purge deletes its row)."""

    def __init__(self, pool: Any, model_id: str, dim: int) -> None:
        self._pool = pool
        self.model_id = model_id
        self.dim = dim
        self.table = table_name(dim)
        #: Once a vector has been seen the answer stays yes; an empty inventory asks again each search.
        self._seen = False

    def has_vectors(self) -> bool:
        if not self._seen:
            with self._pool.connection() as conn:
                exists = conn.execute("SELECT to_regclass(%s)", (self.table,)).fetchone()[0]
                if exists is not None:
                    row = conn.execute(f"SELECT 1 FROM {self.table} WHERE model_id = %s LIMIT 1", (self.model_id,))
                    self._seen = row.fetchone() is not None
        return self._seen

    def put(self, tool_id: str, vector: Any) -> None:
        self._seen = True

    def remove(self, tool_id: str) -> None:
        return None

    def nearest(self, query: npt.NDArray[np.float32], k: int, also: Sequence[str] = ()) -> dict[str, float]:
        """Cosines of the k nearest live tools (HNSW: approximate) and of the tools in `also` (exact),
        in one round trip."""
        # Deleted tools stay in the table until purged, and a tool whose vector is of another model
        # (a model change before `awb reindex`) too: both are dropped after the index scan, which has
        # no WHERE clause (with one the planner may scan the table instead). Twice k are fetched, so
        # a few of them among the nearest do not shorten the answer.
        fetch = 2 * k
        ef_search = min(MAX_EF_SEARCH, max(fetch, MIN_EF_SEARCH))
        near = vector_text(query.tolist())
        # A deleted tool is looked up by its key for each row read (a subquery per row: a join may be
        # planned as a scan of every tool).
        live = "(SELECT t.status FROM tools t WHERE t.tool_id = {0}.tool_id) <> 'deleted'"
        sql = (
            f"WITH near AS (SELECT tool_id, model_id, embedding <=> %(q)s::vector AS d FROM {self.table} "
            f"  ORDER BY embedding <=> %(q)s::vector LIMIT %(fetch)s) "
            f"SELECT n.tool_id, 1 - n.d, 0 FROM near n WHERE n.model_id = %(m)s AND {live.format('n')} "
            "UNION ALL SELECT p.tool_id, 1 - (p.embedding <=> %(q)s::vector), 1 "
            f"  FROM {self.table} p WHERE p.tool_id = ANY(%(also)s) AND p.model_id = %(m)s AND {live.format('p')}"
        )
        args = {"q": near, "m": self.model_id, "fetch": fetch, "also": list(also)}
        with self._pool.connection() as conn, conn.pipeline():
            # Two statements, one round trip. The setting stays on this pooled connection, where only
            # these queries (each setting its own) read it.
            conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
            rows = conn.execute(sql, args).fetchall()
        ranked = sorted(((float(r[1]), str(r[0])) for r in rows if r[2] == 0), reverse=True)[:k]
        cosines = {tool_id: cosine for cosine, tool_id in ranked}
        cosines.update({str(r[0]): float(r[1]) for r in rows if r[2] == 1})
        if cosines:
            self._seen = True
        return cosines


__all__ = [
    "IN_MEMORY_PATH",
    "PgVectorIndex",
    "PgVectorMirror",
    "PgVectorSetting",
    "PgVectorState",
    "enable",
    "probe",
]
