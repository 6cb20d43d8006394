-- An inventory at SQLite schema 8, as awb before schema 9 (commit c1680e2) made it: its eight
-- migrations as it ran them, then rows it wrote (tools crafted, called, updated, equipped and
-- deleted over MCP; staged writes; a blueprint session; journal events). Search vectors left out.
-- Kept as text: tests/inventory/test_upgrade.py builds the file from it and opens it with this awb.
-- Never edit it to follow today's schema: it is what awb's users have on disk.

-- schema 1
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

-- schema 2
CREATE INDEX tools_hot ON tools(CASE memory_level WHEN 'long_term' THEN 0 WHEN 'medium_term' THEN 1 WHEN 'short_term' THEN 2 ELSE 3 END, usage_count DESC, rowid DESC) WHERE status != 'deleted';

-- schema 3
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

-- schema 4
ALTER TABLE calls ADD COLUMN call_id TEXT;
CREATE UNIQUE INDEX calls_call_id ON calls(call_id) WHERE call_id IS NOT NULL;

-- schema 5
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

-- schema 6
CREATE TABLE workbench_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_id TEXT,
    data TEXT NOT NULL
);
ALTER TABLE calls ADD COLUMN peak_memory_bytes INTEGER;

-- schema 7
CREATE INDEX IF NOT EXISTS tools_name ON tools(name);

-- schema 8
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
    INSERT OR IGNORE INTO tool_tags (tag, tool_rowid) SELECT value, new.rowid FROM json_each(CASE WHEN json_valid(new.tags) THEN new.tags ELSE '[]' END) WHERE type = 'text';
END;
CREATE TRIGGER IF NOT EXISTS tool_tags_update AFTER UPDATE OF tags ON tools BEGIN
    DELETE FROM tool_tags WHERE tool_rowid = old.rowid;
    INSERT OR IGNORE INTO tool_tags (tag, tool_rowid) SELECT value, new.rowid FROM json_each(CASE WHEN json_valid(new.tags) THEN new.tags ELSE '[]' END) WHERE type = 'text';
END;
CREATE TRIGGER IF NOT EXISTS tool_tags_delete AFTER DELETE ON tools BEGIN
    DELETE FROM tool_tags WHERE tool_rowid = old.rowid;
END;


-- tools
INSERT INTO tools (rowid, tool_id, name, search_name, description, language, runtime, code, input_schema, output_schema, examples, tags, tags_text, problem, created_by_agent, capabilities, version, parent_version, created_at, updated_at, last_used_at, usage_count, success_count, failure_count, memory_level, status, equipped) VALUES (1, 'tool_7c8db1a8f26142a0', 'adder', 'adder', 'Add two numbers, version three', 'python', 'monty', 'def run(params):
    # v2
    return params[''a''] + params[''b'']
', '{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}', NULL, '[{"params": {"a": 1, "b": 2}, "expected": 3, "expected_error": null}]', '["math", "demo"]', 'math demo', '', '', '{"read_dirs": []}', 3, 2, '2026-11-28T04:46:43.237242+00:00', '2026-11-28T04:46:43.363264+00:00', '2026-11-28T04:46:43.382746+00:00', 8, 8, 0, 'medium_term', 'active', 0);
INSERT INTO tools (rowid, tool_id, name, search_name, description, language, runtime, code, input_schema, output_schema, examples, tags, tags_text, problem, created_by_agent, capabilities, version, parent_version, created_at, updated_at, last_used_at, usage_count, success_count, failure_count, memory_level, status, equipped) VALUES (2, 'tool_bdc77a1d9ecf4338', 'writer', 'writer', 'Write a text to a file for review', 'python', 'cpython', 'def run(params):
    write_file(params[''path''], params[''text''])
    return len(params[''text''])
', '{"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path", "text"]}', NULL, '[]', '[]', '', '', '', '{"read_dirs": ["/srv/workspace/tools/out"]}', 1, NULL, '2026-11-28T04:46:43.399019+00:00', '2026-11-28T04:46:43.399019+00:00', '2026-11-28T04:46:43.492329+00:00', 4, 4, 0, 'short_term', 'active', 0);
INSERT INTO tools (rowid, tool_id, name, search_name, description, language, runtime, code, input_schema, output_schema, examples, tags, tags_text, problem, created_by_agent, capabilities, version, parent_version, created_at, updated_at, last_used_at, usage_count, success_count, failure_count, memory_level, status, equipped) VALUES (3, 'tool_c68910b4eec6415d', 'upper', 'upper', 'Upper-case a text', 'python', 'monty', 'def run(params):
    return params[''s''].upper()
', '{"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}', NULL, '[]', '[]', '', '', '', '{"read_dirs": []}', 1, NULL, '2026-11-28T04:46:43.501454+00:00', '2026-11-28T04:46:43.536942+00:00', '2026-11-28T04:46:43.546900+00:00', 1, 1, 0, 'short_term', 'active', 1);
INSERT INTO tools (rowid, tool_id, name, search_name, description, language, runtime, code, input_schema, output_schema, examples, tags, tags_text, problem, created_by_agent, capabilities, version, parent_version, created_at, updated_at, last_used_at, usage_count, success_count, failure_count, memory_level, status, equipped) VALUES (4, 'tool_862d5c91a8734a31', 'doomed', 'doomed', 'Will be deleted', 'python', 'monty', 'def run(params):
    return 0
', '{"type": "object"}', NULL, '[]', '[]', '', '', '', '{"read_dirs": []}', 1, NULL, '2026-11-28T04:46:43.560463+00:00', '2026-11-28T04:46:43.592384+00:00', NULL, 0, 0, 0, 'short_term', 'deleted', 0);

-- tool_versions
INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count) VALUES ('tool_7c8db1a8f26142a0', 1, 'def run(params):
    return params[''a''] + params[''b'']
', 'Add two numbers', '{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}', NULL, '[{"params": {"a": 1, "b": 2}, "expected": 3, "expected_error": null}]', 'monty', '2026-11-28T04:46:43.237242+00:00', 7, 0);
INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count) VALUES ('tool_7c8db1a8f26142a0', 2, 'def run(params):
    # v2
    return params[''a''] + params[''b'']
', 'Add two numbers', '{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}', NULL, '[{"params": {"a": 1, "b": 2}, "expected": 3, "expected_error": null}]', 'monty', '2026-11-28T04:46:43.344884+00:00', 0, 0);
INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count) VALUES ('tool_7c8db1a8f26142a0', 3, 'def run(params):
    # v2
    return params[''a''] + params[''b'']
', 'Add two numbers, version three', '{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}', NULL, '[{"params": {"a": 1, "b": 2}, "expected": 3, "expected_error": null}]', 'monty', '2026-11-28T04:46:43.363264+00:00', 1, 0);
INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count) VALUES ('tool_862d5c91a8734a31', 1, 'def run(params):
    return 0
', 'Will be deleted', '{"type": "object"}', NULL, '[]', 'monty', '2026-11-28T04:46:43.560463+00:00', 0, 0);
INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count) VALUES ('tool_bdc77a1d9ecf4338', 1, 'def run(params):
    write_file(params[''path''], params[''text''])
    return len(params[''text''])
', 'Write a text to a file for review', '{"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path", "text"]}', NULL, '[]', 'cpython', '2026-11-28T04:46:43.399019+00:00', 4, 0);
INSERT INTO tool_versions (tool_id, version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count) VALUES ('tool_c68910b4eec6415d', 1, 'def run(params):
    return params[''s''].upper()
', 'Upper-case a text', '{"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}', NULL, '[]', 'monty', '2026-11-28T04:46:43.501454+00:00', 1, 0);

-- calls
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (1, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.328450+00:00', 0.8834580003167503, 1, NULL, 'call_dcc778d7dd7a4e08', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (2, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.332776+00:00', 0.4033159998471092, 1, NULL, 'call_784c9f888a5d161d', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (3, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.334701+00:00', 0.34270500009370153, 1, NULL, 'call_eac2a3aaa2e9557c', 4096);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (4, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.337932+00:00', 0.3942329999517824, 1, NULL, 'call_9a19febc579bd273', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (5, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.339368+00:00', 0.2953739999611571, 1, NULL, 'call_a245eb5c4924dfc5', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (6, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.340749+00:00', 0.27762700028688414, 1, NULL, 'call_f18d60764ed8340d', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (7, 'tool_7c8db1a8f26142a0', 1, '2026-11-28T04:46:43.341935+00:00', 0.26944399996864377, 1, NULL, 'call_d2d00aef29b4cc0e', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (8, 'tool_7c8db1a8f26142a0', 3, '2026-11-28T04:46:43.382746+00:00', 0.598950000039622, 1, NULL, 'call_d15847101f4b2256', 0);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (9, 'tool_bdc77a1d9ecf4338', 1, '2026-11-28T04:46:43.454312+00:00', 5.253773000276851, 1, NULL, 'call_2dc99c89e158284a', 20480);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (10, 'tool_bdc77a1d9ecf4338', 1, '2026-11-28T04:46:43.465079+00:00', 3.143162000014854, 1, NULL, 'call_063c6bab90d4eee9', 24576);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (11, 'tool_bdc77a1d9ecf4338', 1, '2026-11-28T04:46:43.484660+00:00', 13.345258999834186, 1, NULL, 'call_1b2b503ddbbf8073', 20480);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (12, 'tool_bdc77a1d9ecf4338', 1, '2026-11-28T04:46:43.492329+00:00', 4.774893000103475, 1, NULL, 'call_03356195dde51053', 20480);
INSERT INTO calls (id, tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes) VALUES (13, 'tool_c68910b4eec6415d', 1, '2026-11-28T04:46:43.546900+00:00', 5.736519000038243, 1, NULL, 'call_7baf5b5dea82bdda', 131072);

-- staged_writes
INSERT INTO staged_writes (id, tool_id, call_id, path, content, created_at, status) VALUES (1, 'tool_bdc77a1d9ecf4338', 'call_2dc99c89e158284a', '/srv/workspace/tools/out/f0.txt', 'héllo wörld', '2026-11-28T04:46:43.451115+00:00', 'pending');
INSERT INTO staged_writes (id, tool_id, call_id, path, content, created_at, status) VALUES (2, 'tool_bdc77a1d9ecf4338', 'call_063c6bab90d4eee9', '/srv/workspace/tools/out/f1.txt', '', '2026-11-28T04:46:43.463417+00:00', 'pending');
INSERT INTO staged_writes (id, tool_id, call_id, path, content, created_at, status) VALUES (3, 'tool_bdc77a1d9ecf4338', 'call_1b2b503ddbbf8073', '/srv/workspace/tools/out/f2.txt', printf('%.5000c', 'x'), '2026-11-28T04:46:43.483608+00:00', 'pending');
INSERT INTO staged_writes (id, tool_id, call_id, path, content, created_at, status) VALUES (4, 'tool_bdc77a1d9ecf4338', 'call_03356195dde51053', '/srv/workspace/tools/out/f3.txt', 'plain', '2026-11-28T04:46:43.491266+00:00', 'pending');

-- blueprint_messages
INSERT INTO blueprint_messages (id, session_id, blueprint_id, at, message, response) VALUES (1, 'upgrade-s1', 'bp_8327310989d55960bab7', '2026-11-28T04:49:06.110420+00:00', 'hello there', 'reply to ## Task
{"history": [], "message": "hell');
INSERT INTO blueprint_messages (id, session_id, blueprint_id, at, message, response) VALUES (2, 'upgrade-s1', 'bp_8327310989d55960bab7', '2026-11-28T04:49:06.956476+00:00', 'second', 'reply to ## Task
{"history": [{"assistant": "repl');

-- blueprint_run_logs
INSERT INTO blueprint_run_logs (id, session_id, run_id, at, kind, data) VALUES (1, 'upgrade-s1', '4ff0632db8e247609cbccef235ed5ba1', '2026-11-28T04:49:05.971999+00:00', 'run_start', '{"blueprint_id": "bp_8327310989d55960bab7", "blueprint_name": "helper", "mode": "single_agent", "history_turns": 0}');
INSERT INTO blueprint_run_logs (id, session_id, run_id, at, kind, data) VALUES (2, 'upgrade-s1', '4ff0632db8e247609cbccef235ed5ba1', '2026-11-28T04:49:06.108974+00:00', 'run_end', '{"status": "ok", "latency_ms": 136.867}');
INSERT INTO blueprint_run_logs (id, session_id, run_id, at, kind, data) VALUES (3, 'upgrade-s1', '6a030aaefb2b4b398509b562df6182f6', '2026-11-28T04:49:06.829281+00:00', 'run_start', '{"blueprint_id": "bp_8327310989d55960bab7", "blueprint_name": "helper", "mode": "single_agent", "history_turns": 1}');
INSERT INTO blueprint_run_logs (id, session_id, run_id, at, kind, data) VALUES (4, 'upgrade-s1', '6a030aaefb2b4b398509b562df6182f6', '2026-11-28T04:49:06.954817+00:00', 'run_end', '{"status": "ok", "latency_ms": 125.382}');

-- workbench_events
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (1, '2026-11-28T04:46:43.235096+00:00', 'craft_started', NULL, '{"name": "adder", "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (2, '2026-11-28T04:46:43.277717+00:00', 'crafted', 'tool_7c8db1a8f26142a0', '{"name": "adder", "version": 1, "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (3, '2026-11-28T04:46:43.359027+00:00', 'updated', 'tool_7c8db1a8f26142a0', '{"version": 2, "previous": 1, "equipped": false, "name": "adder", "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (4, '2026-11-28T04:46:43.377478+00:00', 'updated', 'tool_7c8db1a8f26142a0', '{"version": 3, "previous": 2, "equipped": false, "name": "adder", "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (5, '2026-11-28T04:46:43.387239+00:00', 'craft_started', NULL, '{"name": "writer", "runtime": "cpython"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (6, '2026-11-28T04:46:43.421767+00:00', 'crafted', 'tool_bdc77a1d9ecf4338', '{"name": "writer", "version": 1, "runtime": "cpython"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (7, '2026-11-28T04:46:43.501029+00:00', 'craft_started', NULL, '{"name": "upper", "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (8, '2026-11-28T04:46:43.517672+00:00', 'crafted', 'tool_c68910b4eec6415d', '{"name": "upper", "version": 1, "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (9, '2026-11-28T04:46:43.537379+00:00', 'equipped', 'tool_c68910b4eec6415d', '{"name": "upper", "version": 1, "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (10, '2026-11-28T04:46:43.559136+00:00', 'craft_started', NULL, '{"name": "doomed", "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (11, '2026-11-28T04:46:43.571317+00:00', 'crafted', 'tool_862d5c91a8734a31', '{"name": "doomed", "version": 1, "runtime": "monty"}');
INSERT INTO workbench_events (id, at, kind, tool_id, data) VALUES (12, '2026-11-28T04:46:43.592663+00:00', 'deleted', 'tool_862d5c91a8734a31', '{"equipped": false, "name": "doomed", "version": 1, "runtime": "monty"}');

PRAGMA user_version = 8;
