"""Connections to a PostgreSQL inventory: psycopg's pool, set up and migrated, and the URL as messages
show it (without its password). The store (awb.inventory.postgres) and the blueprint sessions' tables
(awb.blueprints.session_tables) each keep a pool of their own.

The database may go away and come back (a restart, a failover, a network cut) while servers run. Every
wait is bounded: a connection attempt by `CONNECT_SECONDS` (unless the URL says otherwise), a request's
wait for a pooled connection by `POOL_WAIT_SECONDS`. Meanwhile requests fail with `unavailable`, saying
which inventory; once the database is back the pool reconnects by itself, and a connection the
database closed while it sat idle is replaced before a request gets it. TCP keepalives find the
connections of a database that went away without a word (see `KEEPALIVE_IDLE_SECONDS`).
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from awb.errors import ConfigError, InventoryBusy, InventoryUnavailable
from awb.install_hint import install_hint
from awb.inventory.postgres_migrations import migrate
from awb.text import first_line

log = logging.getLogger("awb.inventory.postgres")

#: Connections a server's inventory pool keeps at most.
POOL_MAX = 8
#: How long a connection attempt may take when neither the URL nor PGCONNECT_TIMEOUT says (psycopg's
#: own default is 130 s: a host that swallows packets would hold a start, or a reconnect, that long).
CONNECT_SECONDS = 10.0
#: How long a request waits for a pooled connection before it fails with `unavailable` (the default of
#: the `inventory_pool_wait_seconds` setting).
POOL_WAIT_SECONDS = 10.0
#: How long one statement may run on a pooled connection (PostgreSQL's `statement_timeout`; the default of
#: the `inventory_statement_timeout_seconds` setting), unless the URL sets one: a statement blocked behind another's lock, or one the database is too slow for, ends
#: then and gives its connection back, where it would hold it (and the request) for as long as it waits.
STATEMENT_SECONDS = 10.0
#: The SQLSTATE of a statement cancelled, by `statement_timeout` among others.
QUERY_CANCELED = "57014"
#: While the database is taken for down, it is asked whether it is back at most this often.
PROBE_EVERY = 0.5
#: While a request waits for a connection, it looks this often whether the pool's attempts to open one
#: are failing (the database refuses them: a restart, a shutdown), and then says so instead of waiting on.
REFUSAL_CHECK_EVERY = 0.25
#: TCP keepalives on every connection, unless the URL sets its own. A database that goes away without a
#: word (its host gone, a failover to another address, a NAT or firewall that forgot an idle flow) sends
#: nothing, so only a probe of ours can tell: the change feed, which never sends, would follow nothing
#: for ever, and the pool would hand its dead connections to requests. Idle 10 s, then a probe every 5 s,
#: given up after 3 unanswered (the system's default waits two hours before the first probe).
KEEPALIVE_IDLE_SECONDS = 10
KEEPALIVE_INTERVAL_SECONDS = 5
KEEPALIVE_COUNT = 3
#: What was sent and never acknowledged fails the connection after this long (libpq's `tcp_user_timeout`,
#: milliseconds), so a request on a connection whose peer is gone waits that long at most, not the
#: quarter of an hour of the system's retransmissions (with the event loop waiting too).
TCP_USER_TIMEOUT_MS = 30_000


def psycopg_modules() -> Any:
    """psycopg and psycopg_pool, or `ConfigError` saying how to install them."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "inventory_url points at PostgreSQL, but psycopg is not installed: " + install_hint("postgres"),
            missing=str(exc.name),
        ) from exc
    return psycopg, psycopg_pool


def redacted(url: str) -> str:
    """`url` without its password (in the user part or as a `password` parameter), for messages."""
    parts = urlsplit(url)
    netloc = parts.netloc
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key == "password" for key, _ in pairs):
            query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="*")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def connect_options(url: str) -> dict[str, Any]:
    """Keyword arguments for psycopg's connect: a bounded connection attempt, unless the URL or the
    environment bounds it already, and keepalives that notice a silent loss, unless the URL sets them."""
    options: dict[str, Any] = {
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE_SECONDS,
        "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS,
        "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
    }
    if "connect_timeout=" not in url and not os.environ.get("PGCONNECT_TIMEOUT"):
        options["connect_timeout"] = CONNECT_SECONDS
    return {key: value for key, value in options.items() if f"{key}=" not in url}


def connect(url: str, **options: Any) -> Any:
    """One psycopg connection on `url` (autocommit), its attempt bounded as `connect_options` says."""
    psycopg, _ = psycopg_modules()
    return psycopg.connect(url, autocommit=True, **connect_options(url), **options)


def _still_open(conn: Any) -> None:
    """The pool's check of a connection it is about to hand out. An idle connection has nothing to read
    unless the server wrote to it on its own, which it does when it closes it (a restart, a terminated
    backend): only then is the connection tried with a round trip, and replaced if that fails."""
    psycopg, psycopg_pool = psycopg_modules()
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    # poll, not select: a busy server's descriptors pass select's limit of 1024.
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        psycopg_pool.ConnectionPool.check_connection(conn)


class InventoryPool:
    """psycopg's connection pool with the inventory's rules for a database that goes away: see the
    module's docstring. `connection()` is used as psycopg's is.

    Once a request found no connection in time, the database is taken for down: later requests ask it
    with one connection attempt (at most one every `PROBE_EVERY` seconds; the others fail at once), so
    they fail in milliseconds rather than each after a full wait, and the first attempt that succeeds
    replaces the pool, whose own reconnection backs off to half a minute and more during a long outage."""

    def __init__(self, make: Callable[[], Any], url: str, wait: float) -> None:
        self._make = make
        self._url = url
        self.where = redacted(url)
        self.wait = wait
        self._pool = make()
        self._lock = threading.Lock()
        #: None while the database is taken for up; else when it was last asked, and what it said.
        self._down: tuple[float, str] | None = None

    @contextmanager
    def connection(self) -> Iterator[Any]:
        psycopg, psycopg_pool = psycopg_modules()
        if self._down is not None:
            self._back_or_unavailable()
        pool = self._pool
        try:
            pool, conn = self._take(pool)
            try:
                with conn:
                    yield conn
            finally:
                pool.putconn(conn)
        except psycopg_pool.PoolTimeout as exc:
            with self._lock:
                self._down = (time.monotonic(), f"no connection within {self.wait:g} s")
            raise InventoryUnavailable(
                f"the inventory at {self.where} gave no connection within {self.wait:g} s "
                "(the database is down or unreachable); try again",
                inventory=self.where,
            ) from exc
        except psycopg.OperationalError as exc:
            if getattr(exc, "sqlstate", None) == QUERY_CANCELED:
                # `statement_timeout` ended it (blocked behind a lock, or a database too slow): the request
                # hears that the database did not answer in time, as when it says nothing at all.
                raise InventoryUnavailable(
                    f"the inventory at {self.where} did not finish a statement in time: {first_line(exc)}; try again",
                    inventory=self.where,
                ) from exc
            if not connection_lost(exc):
                raise  # a statement's own failure (a deadlock it lost, say): the caller's to handle
            # The others idle in the pool likely went the same way: replace them now, not one failed
            # request at a time.
            pool.check()
            raise InventoryUnavailable(
                f"lost the connection to the inventory at {self.where}: {first_line(exc)}; try again",
                inventory=self.where,
            ) from exc

    def _take(self, pool: Any) -> tuple[Any, Any]:
        """A connection within `self.wait`, and the pool it is to be given back to; `InventoryUnavailable`
        sooner when, meanwhile, the pool's attempts to open one fail and the database refuses ours too. A
        busy pool (every connection lent) makes no attempt, so its requests wait their turn as before."""
        _, psycopg_pool = psycopg_modules()
        deadline = time.monotonic() + self.wait
        failed = pool.get_stats().get("connections_errors", 0)
        while True:
            left = deadline - time.monotonic()
            if self._pool is not pool:  # replaced meanwhile (the database is back): the old one closes
                pool = self._pool
                failed = pool.get_stats().get("connections_errors", 0)
            try:
                return pool, pool.getconn(timeout=max(min(left, REFUSAL_CHECK_EVERY), 0.001))
            except psycopg_pool.PoolTimeout:
                if left <= REFUSAL_CHECK_EVERY:
                    if exhausted(pool, failed):
                        raise self._busy(pool) from None
                    raise
                if pool.get_stats().get("connections_errors", 0) > failed:
                    self._refused()
                    failed = pool.get_stats().get("connections_errors", 0)

    def _busy(self, pool: Any) -> InventoryBusy:
        size = pool.get_stats().get("pool_size", 0)
        return InventoryBusy(
            f"the inventory pool is exhausted: all {size} connections to {self.where} are in use by other "
            f"requests and none came free within {self.wait:g} s (the database answers); try again",
            inventory=self.where,
            connections=size,
        )

    def _refused(self) -> None:
        """The pool failed to open a connection: ask the database once ourselves (a refusal is answered
        at once); `InventoryUnavailable`, with the database taken for down, unless it answers."""
        psycopg, _ = psycopg_modules()
        try:
            with connect(self._url):
                return  # it answers (again): the request waits on for the pool
        except psycopg.Error as exc:
            said = first_line(exc)
        with self._lock:
            self._down = (time.monotonic(), said)
        raise self._unreachable(said)

    def _back_or_unavailable(self) -> None:
        """While the database is taken for down: back (and the pool replaced), or `InventoryUnavailable`."""
        psycopg, _ = psycopg_modules()
        with self._lock:
            down = self._down
            if down is None:
                return  # another request found it back
            asked, said = down
            if time.monotonic() - asked < PROBE_EVERY:
                raise self._unreachable(said)
            self._down = (time.monotonic(), said)  # the others fail at once while this one asks
        try:
            with connect(self._url):
                pass
        except psycopg.Error as exc:
            with self._lock:
                self._down = (time.monotonic(), first_line(exc))
            raise self._unreachable(first_line(exc)) from exc
        with self._lock:
            if self._down is None:
                return
            stale, self._pool, self._down = self._pool, self._make(), None
        log.warning("the inventory at %s answers again; its connections are renewed", self.where)
        # Its connections are returned (and closed) by the requests holding them; no request waits.
        threading.Thread(target=stale.close, name="awb-pg-pool-close", daemon=True).start()

    def _unreachable(self, said: str) -> InventoryUnavailable:
        return InventoryUnavailable(
            f"the inventory at {self.where} cannot be reached: {said}; try again", inventory=self.where
        )

    def wait_open(self) -> None:
        """Wait (bounded) for the pool's first connection: a URL that cannot serve is said at start."""
        self._pool.wait(timeout=self.wait)

    def check(self) -> None:
        self._pool.check()

    def close(self) -> None:
        self._pool.close()


def exhausted(pool: Any, failed: int) -> bool:
    """Whether a wait for a connection went unserved because every connection the pool may hold is lent
    (the pool is full and opened none in vain meanwhile: `failed` is its count of failed attempts when
    the wait began), not because it could not open one. A request then waits its turn: the database is
    not taken for down."""
    stats = pool.get_stats()
    return bool(stats.get("pool_size", 0) >= pool.max_size and stats.get("connections_errors", 0) <= failed)


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the connection itself failed or was closed by the server (SQLSTATE class 08,
    a shutdown or terminated backend, or no SQLSTATE at all: the client found the socket dead)."""
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")


def open_pool(
    url: str,
    *,
    max_size: int = POOL_MAX,
    migrate_schema: bool = True,
    durable: bool = False,
    wait: float = POOL_WAIT_SECONDS,
    statement: float | None = None,
) -> InventoryPool:
    """A connection pool on the inventory at `url` (autocommit: reads are one round trip, writes open
    their own transaction), after migrating its schema; `ConfigError` when it cannot be reached. Each
    statement on it runs under `statement_timeout` `statement` seconds (`STATEMENT_SECONDS` if None)
    unless the URL sets its own."""
    psycopg, psycopg_pool = psycopg_modules()
    timeout_ms = max(1, round((STATEMENT_SECONDS if statement is None else statement) * 1000))

    def configure(conn: Any) -> None:
        if "statement_timeout" not in url:
            conn.execute(f"SET statement_timeout = {timeout_ms}")
        if not durable:
            # Like SQLite's WAL with synchronous=NORMAL: a commit returns before its WAL record is on
            # disk. A crash of the database host can lose the last moments of commits, never corrupt
            # or half-apply one; every commit costs a round trip instead of an fsync.
            conn.execute("SET synchronous_commit = off")

    where = redacted(url)
    try:
        if migrate_schema:
            with connect(url) as conn:
                migrate(conn, where=where)

        def make() -> Any:
            return psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=max(max_size, 1),
                open=True,
                name="awb-inventory",
                kwargs={"autocommit": True, **connect_options(url)},
                configure=configure,
                check=_still_open,
                timeout=wait,
            )

        pool = InventoryPool(make, url, wait)
        try:
            pool.wait_open()
        except BaseException:
            pool.close()
            raise
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        raise ConfigError(f"cannot reach the inventory at {where}: {first_line(exc)}", url=where) from exc
    return pool
