"""The web panel's sign-outs in the inventory (`awb.sign_outs` keeps each server's copy): every server on
the store, and a server started again, refuses a pass signed out anywhere until it expires.

One row per pass signed out, named by a digest of its pass (never a part of the pass itself), with its
expiry; rows are numbered in the order they commit, so a server follows them from the last number it
read. Expired rows go at each sign-out. Past `keep` rows the ones that expire first are folded into one
floor row (`FLOOR`): every pass that expires no later than it is refused. Folding ends more sign-ins than
were signed out, never fewer, and holds the table to `keep` + 1 rows however many sign-outs come.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

#: The row whose expiry is the floor: no pass's key (a hex digest) is spelled so.
FLOOR = "*"
#: Rows `sign_outs_after` reads at once.
READ_BATCH = 5000
#: Each sign-out notifies this PostgreSQL channel (awb.inventory.postgres_notify listens to it).
SIGN_OUTS_CHANNEL = "awb_sign_outs"
#: Advisory lock key serialising sign-outs on PostgreSQL ("awb_out"): numbers then commit in the order
#: they are drawn, and a server that read past number n never misses an n - 1 committed later.
SIGN_OUT_LOCK = 0x6177625F6F7574

#: Migration 11 of the SQLite inventory.
SQLITE_SQL = """
CREATE TABLE IF NOT EXISTS panel_sign_outs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    pass_key TEXT NOT NULL UNIQUE,
    expires INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS panel_sign_outs_expires ON panel_sign_outs(expires);
"""

#: Migration 6 of the PostgreSQL inventory.
POSTGRES_SQL = """
CREATE TABLE IF NOT EXISTS panel_sign_outs (
    seq BIGSERIAL PRIMARY KEY,
    pass_key TEXT NOT NULL UNIQUE,
    expires BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS panel_sign_outs_expires ON panel_sign_outs(expires);
"""


def record(db: Any, mark: str, key: str, expires: int, now: int, keep: int) -> None:
    """Add the sign-out of `key` in the caller's transaction, drop expired rows, and fold the rows past
    `keep` (`db`: a sqlite3 or psycopg connection; `mark`: its parameter mark)."""
    db.execute(
        f"INSERT INTO panel_sign_outs (pass_key, expires) VALUES ({mark}, {mark}) ON CONFLICT (pass_key) DO NOTHING",
        (key, expires),
    )
    db.execute(f"DELETE FROM panel_sign_outs WHERE expires <= {mark}", (now,))
    past = db.execute(
        f"SELECT expires FROM panel_sign_outs WHERE pass_key <> {mark} ORDER BY expires DESC LIMIT 1 OFFSET {mark}",
        (FLOOR, keep),
    ).fetchone()
    if past is None:
        return
    # The old floor row is at most this (every row below it went when it was set), so it goes too, and
    # comes back with a new number: the servers following the table read the floor's rise.
    floor = int(past[0])
    db.execute(f"DELETE FROM panel_sign_outs WHERE expires <= {mark}", (floor,))
    db.execute(f"INSERT INTO panel_sign_outs (pass_key, expires) VALUES ({mark}, {mark})", (FLOOR, floor))


def after(db: Any, mark: str, seq: int) -> tuple[int, list[tuple[str, int]]]:
    """The sign-outs numbered after `seq` (the floor's row as `FLOOR`), and the number to read on from."""
    found: list[tuple[str, int]] = []
    while True:
        rows = db.execute(
            f"SELECT seq, pass_key, expires FROM panel_sign_outs WHERE seq > {mark} ORDER BY seq LIMIT {READ_BATCH}",
            (seq,),
        ).fetchall()
        found += [(str(key), int(expires)) for _, key, expires in rows]
        if rows:
            seq = int(rows[-1][0])
        if len(rows) < READ_BATCH:
            return seq, found


class SQLiteSignOuts:
    """Needs the store's write transaction (`_writing`) and its lock."""

    _db: Any
    _lock: threading.RLock
    _writing: Callable[[], AbstractContextManager[Any]]

    def record_sign_out(self, key: str, expires: int, *, now: int, keep: int) -> None:
        """Keep the sign-out of the pass `key` names until `expires` (one write transaction)."""
        with self._writing() as db:
            record(db, "?", key, expires, now, keep)

    def sign_outs_after(self, seq: int) -> tuple[int, list[tuple[str, int]]]:
        with self._lock:
            return after(self._db, "?", seq)


class PostgresSignOuts:
    """Needs the store's pool and its change feed (whose connection also LISTENs for sign-outs)."""

    _pool: Any
    _feed: Any

    def record_sign_out(self, key: str, expires: int, *, now: int, keep: int) -> None:
        """As on SQLite, one sign-out at a time across servers (`SIGN_OUT_LOCK`); every server's
        `subscribe_sign_outs` listeners hear of it when it commits."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SIGN_OUT_LOCK,))
            record(conn, "%s", key, expires, now, keep)
            conn.execute("SELECT pg_notify(%s, '')", (SIGN_OUTS_CHANNEL,))

    def sign_outs_after(self, seq: int) -> tuple[int, list[tuple[str, int]]]:
        with self._pool.connection() as conn:
            return after(conn, "%s", seq)

    def subscribe_sign_outs(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (on the feed's thread) when any server signs a pass out, and when the feed
        comes back after losing its connection (it may have missed some)."""
        unsubscribe: Callable[[], None] = self._feed.subscribe_wake(SIGN_OUTS_CHANNEL, listener)
        return unsubscribe


__all__ = [
    "FLOOR",
    "POSTGRES_SQL",
    "SIGN_OUTS_CHANNEL",
    "SIGN_OUT_LOCK",
    "SQLITE_SQL",
    "PostgresSignOuts",
    "SQLiteSignOuts",
    "after",
    "record",
]
