"""The SQLite inventory's schema: forward migrations, one at a time (`PRAGMA user_version` counts them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from awb.inventory.feed_sql import FEED_SQL
from awb.inventory.panel_sign_outs import SQLITE_SQL as SIGN_OUTS_SQL
from awb.inventory.sessions_sql import SESSIONS_SQL
from awb.inventory.vectors import VECTORS_SQL

_V1 = """
CREATE TABLE tools (
    rowid INTEGER PRIMARY KEY,
    tool_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    search_name TEXT NOT NULL,
    description TEXT NOT NULL,
    language TEXT NOT NULL,
    runtime TEXT NOT NULL,
    code TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    output_schema TEXT,
    examples TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]',
    tags_text TEXT NOT NULL DEFAULT '',
    problem TEXT NOT NULL DEFAULT '',
    created_by_agent TEXT NOT NULL DEFAULT '',
    capabilities TEXT NOT NULL DEFAULT '{}',
    version INTEGER NOT NULL DEFAULT 1,
    parent_version INTEGER,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_used_at TEXT,
    usage_count INTEGER NOT NULL DEFAULT 0,
    success_count INTEGER NOT NULL DEFAULT 0,
    failure_count INTEGER NOT NULL DEFAULT 0,
    memory_level TEXT NOT NULL DEFAULT 'short_term',
    status TEXT NOT NULL DEFAULT 'active',
    equipped INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX tools_live_name ON tools(name) WHERE status != 'deleted';
CREATE INDEX tools_level ON tools(status, memory_level);
CREATE INDEX tools_equipped ON tools(equipped) WHERE equipped = 1;

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
    usage_count INTEGER NOT NULL DEFAULT 0,
    failure_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tool_id, version)
);

CREATE TABLE calls (
    id INTEGER PRIMARY KEY,
    tool_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    ok INTEGER NOT NULL,
    error_code TEXT
);
CREATE INDEX calls_tool ON calls(tool_id, id);

CREATE TABLE staged_writes (
    id INTEGER PRIMARY KEY,
    tool_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
);

CREATE VIRTUAL TABLE tools_fts USING fts5(
    search_name, description, problem, tags_text,
    content='tools', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO tools_fts(tools_fts, rank) VALUES ('rank', 'bm25(4.0, 1.0, 1.0, 2.0)');
CREATE TRIGGER tools_fts_insert AFTER INSERT ON tools BEGIN
    INSERT INTO tools_fts(rowid, search_name, description, problem, tags_text)
    VALUES (new.rowid, new.search_name, new.description, new.problem, new.tags_text);
END;
CREATE TRIGGER tools_fts_delete AFTER DELETE ON tools BEGIN
    INSERT INTO tools_fts(tools_fts, rowid, search_name, description, problem, tags_text)
    VALUES ('delete', old.rowid, old.search_name, old.description, old.problem, old.tags_text);
END;
CREATE TRIGGER tools_fts_update AFTER UPDATE OF search_name, description, problem, tags_text ON tools BEGIN
    INSERT INTO tools_fts(tools_fts, rowid, search_name, description, problem, tags_text)
    VALUES ('delete', old.rowid, old.search_name, old.description, old.problem, old.tags_text);
    INSERT INTO tools_fts(rowid, search_name, description, problem, tags_text)
    VALUES (new.rowid, new.search_name, new.description, new.problem, new.tags_text);
END;
"""

TIER_ORDER = "CASE memory_level WHEN 'long_term' THEN 0 WHEN 'medium_term' THEN 1 WHEN 'short_term' THEN 2 ELSE 3 END"

# Listing walks this index in order and stops at LIMIT instead of sorting every live tool.
_V2 = f"""
CREATE INDEX tools_hot ON tools({TIER_ORDER}, usage_count DESC, rowid DESC) WHERE status != 'deleted';
"""

# Each call gets the id its staged writes carry; calls recorded before ids existed keep NULL.
_V4 = """
ALTER TABLE calls ADD COLUMN call_id TEXT;
CREATE UNIQUE INDEX calls_call_id ON calls(call_id) WHERE call_id IS NOT NULL;
"""

# A call names its tool, and a name may be a deleted tool's too (`awb_call` says so rather than "not
# found"): tools_live_name leaves deleted tools out, so that lookup read the whole table on every call.
_V7 = """
CREATE INDEX IF NOT EXISTS tools_name ON tools(name);
"""

# Listing by tag read every tool's JSON tags (0.1-0.36 s at 100,000 tools): each tag of each tool is
# a row here too, kept by triggers, so a tag filter reads only its own tools.
_TAGS_OF_NEW = "SELECT value, new.rowid FROM json_each(CASE WHEN json_valid(new.tags) THEN new.tags ELSE '[]' END)"
_V8 = f"""
CREATE TABLE IF NOT EXISTS tool_tags (
    tag TEXT NOT NULL,
    tool_rowid INTEGER NOT NULL,
    PRIMARY KEY (tag, tool_rowid)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tool_tags_tool ON tool_tags(tool_rowid);
INSERT OR IGNORE INTO tool_tags (tag, tool_rowid)
    SELECT each.value, t.rowid FROM tools t, json_each(CASE WHEN json_valid(t.tags) THEN t.tags ELSE '[]' END) each
    WHERE each.type = 'text';
CREATE TRIGGER IF NOT EXISTS tool_tags_insert AFTER INSERT ON tools BEGIN
    INSERT OR IGNORE INTO tool_tags (tag, tool_rowid) {_TAGS_OF_NEW} WHERE type = 'text';
END;
CREATE TRIGGER IF NOT EXISTS tool_tags_update AFTER UPDATE OF tags ON tools BEGIN
    DELETE FROM tool_tags WHERE tool_rowid = old.rowid;
    INSERT OR IGNORE INTO tool_tags (tag, tool_rowid) {_TAGS_OF_NEW} WHERE type = 'text';
END;
CREATE TRIGGER IF NOT EXISTS tool_tags_delete AFTER DELETE ON tools BEGIN
    DELETE FROM tool_tags WHERE tool_rowid = old.rowid;
END;
"""

# Every staged write checks the pending writes' number and bytes against the staging caps: summing the
# lengths of their contents read every one of them (and walked every write ever staged, for its status)
# under the store's lock. With each write's length indexed beside its status and tool, the check reads
# the index alone (`STAGED_SIZE` is the indexed expression, written the same way in the query).
STAGED_SIZE = "length(CAST(content AS BLOB))"
_V9 = f"""
CREATE INDEX IF NOT EXISTS staged_pending ON staged_writes(status, tool_id, {STAGED_SIZE});
"""

# Tool names are unique ignoring case (awb.inventory.names): tools crafted from now on carry case_variant 0
# and the index lets one live tool per lower-cased name hold it. Case-variants an older inventory holds are
# all kept: the first crafted keeps 0, each later one the next number, so the index builds on any file.
_V10 = """
ALTER TABLE tools ADD COLUMN case_variant INTEGER NOT NULL DEFAULT 0;
UPDATE tools SET case_variant = (
    SELECT count(*) FROM tools older
    WHERE older.status != 'deleted' AND lower(older.name) = lower(tools.name) AND older.rowid < tools.rowid
) WHERE rowid IN (
    SELECT id FROM (
        SELECT rowid AS id, row_number() OVER (PARTITION BY lower(name) ORDER BY rowid) AS n
        FROM tools WHERE status != 'deleted'
    ) WHERE n > 1
);
CREATE UNIQUE INDEX IF NOT EXISTS tools_live_name_folded ON tools(lower(name), case_variant) WHERE status != 'deleted';
"""

# Migration 11: the web panel's sign-outs, so they hold across restarts and servers (awb.inventory.panel_sign_outs).

#: Forward migrations: MIGRATIONS[n] is the SQL that takes a database from schema n to n + 1. Never edit
#: one that has shipped (tests/inventory/test_upgrade.py holds them), add the next; and only add to the
#: schema: an older awb still serving goes on using the file the next one migrated.
MIGRATIONS: list[str] = [_V1, _V2, VECTORS_SQL, _V4, SESSIONS_SQL, FEED_SQL, _V7, _V8, _V9, _V10, SIGN_OUTS_SQL]
SCHEMA_VERSION = len(MIGRATIONS)

# BM25 column weights (name, description, problem, tags): a word in the name says more than one
# in a long description.
BM25_WEIGHTS = (4.0, 1.0, 1.0, 2.0)


def statements(script: str) -> Iterator[str]:
    """Split a script into statements without `executescript`, which would commit our transaction."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


__all__ = ["BM25_WEIGHTS", "MIGRATIONS", "SCHEMA_VERSION", "TIER_ORDER", "statements"]
