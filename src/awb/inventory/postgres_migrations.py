"""The PostgreSQL inventory's schema: numbered migrations, each applied once, under an advisory lock.

Several servers may start together on one database. Each takes the same transaction-scoped advisory
lock before reading `awb_migrations`, so exactly one applies a missing migration and the others, once
the lock is theirs, find it done. A migration and its row in `awb_migrations` commit together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from awb.errors import ConfigError
from awb.inventory.panel_sign_outs import POSTGRES_SQL as SIGN_OUTS_SQL
from awb.inventory.postgres_notify import EVENTS_CHANNEL

#: Key of the advisory lock that serialises migrations (any constant 64-bit number; "awb_mig" in ASCII).
MIGRATION_LOCK = 0x6177625F6D6967
#: Key of the advisory lock that serialises journal appends ("awb_evt").
EVENT_LOCK = 0x6177625F657674

# Tools: the text search document is a generated column (name weighted highest, like SQLite's BM25
# weights 4:2:1:1 for name, tags, description, problem). It has no GIN index: every server ranks from
# its in-memory copy of the postings (awb.inventory.postgres_text), and a GIN index on a column that
# every call's counter update rewrites cost more than it served (ts_rank is only a benchmark option). JSON fields stay TEXT so a
# record round-trips byte for byte; timestamps are ISO strings as in SQLite, so both stores compare
# and return them alike.
_V1 = """
CREATE TABLE tools (
    seq BIGSERIAL UNIQUE,
    tool_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    search_name TEXT NOT NULL,
    description TEXT NOT NULL,
    language TEXT NOT NULL,
    runtime TEXT NOT NULL,
    code TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    output_schema TEXT,
    examples TEXT NOT NULL DEFAULT '[]',
    tags TEXT[] NOT NULL DEFAULT '{}',
    tags_text TEXT NOT NULL DEFAULT '',
    problem TEXT NOT NULL DEFAULT '',
    created_by_agent TEXT NOT NULL DEFAULT '',
    capabilities TEXT NOT NULL DEFAULT '{}',
    version INTEGER NOT NULL DEFAULT 1,
    parent_version INTEGER,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_used_at TEXT,
    usage_count BIGINT NOT NULL DEFAULT 0,
    success_count BIGINT NOT NULL DEFAULT 0,
    failure_count BIGINT NOT NULL DEFAULT 0,
    memory_level TEXT NOT NULL DEFAULT 'short_term',
    tier SMALLINT GENERATED ALWAYS AS (
        CASE memory_level WHEN 'long_term' THEN 0 WHEN 'medium_term' THEN 1 WHEN 'short_term' THEN 2 ELSE 3 END
    ) STORED,
    status TEXT NOT NULL DEFAULT 'active',
    equipped BOOLEAN NOT NULL DEFAULT FALSE,
    document TSVECTOR GENERATED ALWAYS AS (
        setweight(to_tsvector('english', search_name), 'A')
        || setweight(to_tsvector('english', tags_text), 'B')
        || setweight(to_tsvector('english', description), 'C')
        || setweight(to_tsvector('english', problem), 'D')
    ) STORED
);
CREATE UNIQUE INDEX tools_live_name ON tools(name) WHERE status <> 'deleted';
CREATE INDEX tools_hot ON tools(tier, usage_count DESC, seq DESC) WHERE status <> 'deleted';
CREATE INDEX tools_equipped ON tools(equipped) WHERE equipped;
-- fastupdate off: a pending list would make an occasional call flush megabytes of index entries.
CREATE INDEX tools_tags ON tools USING GIN (tags) WITH (fastupdate = off);

-- Live (not deleted) tools, kept by a trigger: checking max_tools costs one row, not a count.
CREATE TABLE awb_live_tools (id BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id), count BIGINT NOT NULL);
INSERT INTO awb_live_tools VALUES (TRUE, 0);
CREATE FUNCTION awb_count_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE awb_live_tools SET count = count
        + (CASE WHEN TG_OP <> 'DELETE' AND NEW.status <> 'deleted' THEN 1 ELSE 0 END)
        - (CASE WHEN TG_OP <> 'INSERT' AND OLD.status <> 'deleted' THEN 1 ELSE 0 END);
    RETURN NULL;
END $$;
CREATE TRIGGER tools_count_live AFTER INSERT OR DELETE OR UPDATE OF status ON tools
    FOR EACH ROW EXECUTE FUNCTION awb_count_live();

CREATE TABLE tool_versions (
    tool_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    code TEXT NOT NULL,
    description TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    output_schema TEXT,
    examples TEXT NOT NULL DEFAULT '[]',
    runtime TEXT NOT NULL,
    created_at TEXT NOT NULL,
    usage_count BIGINT NOT NULL DEFAULT 0,
    failure_count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tool_id, version)
);

CREATE TABLE calls (
    id BIGSERIAL PRIMARY KEY,
    call_id TEXT UNIQUE,
    tool_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    duration_ms DOUBLE PRECISION NOT NULL,
    ok BOOLEAN NOT NULL,
    error_code TEXT
);
CREATE INDEX calls_tool ON calls(tool_id, id);

CREATE TABLE staged_writes (
    id BIGSERIAL PRIMARY KEY,
    tool_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
);

CREATE TABLE tool_vectors (
    tool_id TEXT PRIMARY KEY REFERENCES tools(tool_id) ON DELETE CASCADE,
    model_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BYTEA NOT NULL
);
CREATE INDEX tool_vectors_model ON tool_vectors(model_id);
"""


# The event journal (the web panel's toasts, read by every server: awb.feed), the blueprint runtime's
# sessions and run logs (awb.blueprints.postgres_sessions), and each call's peak memory: what the SQLite
# inventory gained in its migrations 5 and 6. Text a person or agent typed (session messages) is kept as
# JSON text, which PostgreSQL's TEXT can hold whatever it contains (a NUL byte included).
_V2 = """
ALTER TABLE calls ADD COLUMN peak_memory_bytes BIGINT;

CREATE TABLE workbench_events (
    id BIGSERIAL PRIMARY KEY,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_id TEXT,
    data TEXT NOT NULL
);

CREATE TABLE blueprint_messages (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL,
    blueprint_id TEXT NOT NULL,
    at TEXT NOT NULL,
    message TEXT NOT NULL,
    response TEXT NOT NULL
);
CREATE INDEX blueprint_messages_session ON blueprint_messages(session_id, id);

CREATE TABLE blueprint_run_logs (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX blueprint_run_logs_session ON blueprint_run_logs(session_id, id);

-- One round trip per event. Appenders take turns until they commit, so ids commit in the order they
-- are drawn and a reader past id n never misses an n - 1 committed later; the NOTIFY goes out with
-- the commit and wakes every server's journal readers. Every 100th append prunes what is past keeping.
CREATE OR REPLACE FUNCTION awb_append_event(p_at TEXT, p_kind TEXT, p_tool_id TEXT, p_data TEXT, p_kept BIGINT)
RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    new_id BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(EVENT_LOCK);
    INSERT INTO workbench_events (at, kind, tool_id, data) VALUES (p_at, p_kind, p_tool_id, p_data)
        RETURNING id INTO new_id;
    PERFORM pg_notify('EVENTS_CHANNEL', new_id::text);
    IF new_id % 100 = 0 THEN
        DELETE FROM workbench_events WHERE id <= new_id - p_kept;
    END IF;
    RETURN new_id;
END $$;
""".replace("EVENT_LOCK", str(EVENT_LOCK)).replace("EVENTS_CHANNEL", EVENTS_CHANNEL)


_V5 = """
ALTER TABLE tools ADD COLUMN IF NOT EXISTS case_variant INTEGER NOT NULL DEFAULT 0;
UPDATE tools SET case_variant = v.n FROM (
    SELECT seq, row_number() OVER (PARTITION BY lower(name) ORDER BY seq) - 1 AS n
    FROM tools WHERE status <> 'deleted'
) v WHERE tools.seq = v.seq AND v.n > 0;
CREATE UNIQUE INDEX IF NOT EXISTS tools_live_name_folded ON tools(lower(name), case_variant) WHERE status <> 'deleted';
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


#: Forward migrations, applied in order; never edit one that has shipped (tests/inventory/test_upgrade.py
#: pins them), add the next; and only add to the schema: older servers still running go on using it.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tools, versions, calls, staged writes, vectors", _V1),
    Migration(2, "event journal, blueprint sessions and run logs, peak memory of calls", _V2),
    # A call names its tool, and a name may be a deleted tool's: tools_live_name leaves those out, so a
    # lookup the cache could not answer read the whole table.
    Migration(
        3, "an index on every tool's name, deleted ones too", "CREATE INDEX IF NOT EXISTS tools_name ON tools(name)"
    ),
    # Every staged write checks the pending writes' number and bytes against the staging caps: an
    # index on status and tool finds the pending ones without reading every write ever staged, and
    # octet_length reads a stored text's size without its content.
    Migration(
        4,
        "staged writes indexed by status, tool and size",
        "CREATE INDEX IF NOT EXISTS staged_pending ON staged_writes(status, tool_id, octet_length(content))",
    ),
    # Tool names are unique ignoring case (awb.inventory.names); the case-variants an older inventory
    # holds are all kept, numbered in the order crafted, so the index builds on any database.
    Migration(5, "tool names unique ignoring case", _V5),
    # The web panel's sign-outs, so a pass signed out on one server is refused by all of them, and after a
    # restart (awb.inventory.panel_sign_outs).
    Migration(6, "web panel sign-outs", SIGN_OUTS_SQL),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

_LEDGER = """
CREATE TABLE IF NOT EXISTS awb_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


def applied_versions(conn: Any) -> list[int]:
    """Versions recorded in `awb_migrations` (empty on a database awb has never opened)."""
    row = conn.execute("SELECT to_regclass('awb_migrations')").fetchone()
    if row is None or row[0] is None:
        return []
    return [int(r[0]) for r in conn.execute("SELECT version FROM awb_migrations ORDER BY version")]


def migrate(conn: Any, *, where: str = "the database") -> list[int]:
    """Apply every missing migration in one transaction under the advisory lock; returns those applied.

    `conn` is a psycopg connection not inside a transaction. Refuses a database migrated by a newer awb.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(_LEDGER)
        done = set(applied_versions(conn))
        newest = max(done, default=0)
        if newest > SCHEMA_VERSION:
            raise ConfigError(
                f"inventory {where} has schema {newest}, newer than this awb ({SCHEMA_VERSION}); upgrade agent-workbench",
                schema=newest,
            )
        applied = []
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO awb_migrations(version, name) VALUES (%s, %s)", (migration.version, migration.name)
            )
            applied.append(migration.version)
    return applied


def pending(conn: Any) -> list[Migration]:
    done = set(applied_versions(conn))
    return [m for m in MIGRATIONS if m.version not in done]


__all__ = [
    "EVENT_LOCK",
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "SCHEMA_VERSION",
    "Migration",
    "applied_versions",
    "migrate",
    "pending",
]
