"""Tool embeddings in the inventory: one float32 vector per tool, tagged with the model that made it.

Vectors of different models live in different spaces; the model id lets search ignore stale ones and
`awb reindex` find them. Functions take a `sqlite3.Connection` so the store keeps its own locking.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence

#: Migration 3 of the SQLite inventory. Deleting a tool forever removes its vector too.
VECTORS_SQL = """
CREATE TABLE tool_vectors (
    tool_id TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX tool_vectors_model ON tool_vectors(model_id);
CREATE TRIGGER tool_vectors_purge AFTER DELETE ON tools BEGIN
    DELETE FROM tool_vectors WHERE tool_id = old.tool_id;
END;
"""


def encode_vector(values: Sequence[float]) -> bytes:
    """Little-endian float32, the layout numpy reads back without a copy."""
    return struct.pack(f"<{len(values)}f", *values)


def put_vector(db: sqlite3.Connection, tool_id: str, model_id: str, values: Sequence[float]) -> None:
    db.execute(
        "INSERT INTO tool_vectors(tool_id, model_id, dim, vector) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(tool_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
        "vector = excluded.vector",
        (tool_id, model_id, len(values), encode_vector(values)),
    )


def delete_vector(db: sqlite3.Connection, tool_id: str) -> None:
    db.execute("DELETE FROM tool_vectors WHERE tool_id = ?", (tool_id,))


def load_vectors(db: sqlite3.Connection, model_id: str) -> list[tuple[str, int, bytes]]:
    """(tool_id, dim, float32 bytes) of the live tools whose vector was made by `model_id`."""
    rows = db.execute(
        "SELECT v.tool_id, v.dim, v.vector FROM tool_vectors v JOIN tools t ON t.tool_id = v.tool_id "
        "WHERE v.model_id = ? AND t.status != 'deleted' ORDER BY t.rowid",
        (model_id,),
    ).fetchall()
    return [(str(r[0]), int(r[1]), bytes(r[2])) for r in rows]


def tools_without_vector(db: sqlite3.Connection, model_id: str, limit: int) -> list[str]:
    """Live tools with no vector by `model_id` (imported, or crafted where search was text-only), oldest first."""
    rows = db.execute(
        "SELECT t.tool_id FROM tools t LEFT JOIN tool_vectors v ON v.tool_id = t.tool_id AND v.model_id = ? "
        "WHERE t.status != 'deleted' AND v.tool_id IS NULL ORDER BY t.rowid LIMIT ?",
        (model_id, limit),
    ).fetchall()
    return [str(r[0]) for r in rows]


def vector_model_ids(db: sqlite3.Connection) -> dict[str, int]:
    """How many live tools carry a vector of each model."""
    rows = db.execute(
        "SELECT v.model_id, count(*) FROM tool_vectors v JOIN tools t ON t.tool_id = v.tool_id "
        "WHERE t.status != 'deleted' GROUP BY v.model_id"
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


__all__ = [
    "VECTORS_SQL",
    "delete_vector",
    "encode_vector",
    "load_vectors",
    "put_vector",
    "tools_without_vector",
    "vector_model_ids",
]
