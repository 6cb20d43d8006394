"""Tables of the blueprint runtime (`awb.blueprints.sessions`) in the SQLite inventory: exchanges of each
session and the run logs, both in insertion order (AUTOINCREMENT ids are the chronology)."""

#: Migration 5 of the SQLite inventory: blueprint sessions and run logs.
SESSIONS_SQL = """
CREATE TABLE blueprint_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    blueprint_id TEXT NOT NULL,
    at TEXT NOT NULL,
    message TEXT NOT NULL,
    response TEXT NOT NULL
);
CREATE INDEX blueprint_messages_session ON blueprint_messages(session_id, id);
CREATE TABLE blueprint_run_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX blueprint_run_logs_session ON blueprint_run_logs(session_id, id);
"""
