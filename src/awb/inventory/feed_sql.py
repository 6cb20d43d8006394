"""Migration 6 of the SQLite inventory: the workbench's event journal (read across processes by the web
panel, `awb.feed`) and the peak memory of each call."""

#: `workbench_events` keeps the last few thousand events (the store prunes on append); ids are the order.
FEED_SQL = """
CREATE TABLE workbench_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_id TEXT,
    data TEXT NOT NULL
);
ALTER TABLE calls ADD COLUMN peak_memory_bytes INTEGER;
"""
