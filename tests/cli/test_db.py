"""`awb db migrate|status`, `awb doctor`'s store line and `awb inventory export|import` across stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from typer.testing import CliRunner

from awb.cli.main import app
from awb.config import Config
from awb.inventory import transfer
from awb.inventory.open import open_store
from awb.inventory.postgres_migrations import SCHEMA_VERSION
from awb.workbench import Workbench
from support import add_tool

runner = CliRunner()


def write_config(tmp_path: Path, **fields: object) -> Path:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"inventory_path": str(tmp_path / "inventory.db"), **fields}), encoding="utf-8")
    return path


def test_db_migrate_then_status_report_the_postgres_schema(tmp_path: Path, clean_pg_url: str) -> None:
    config = write_config(tmp_path, inventory_url=clean_pg_url)
    migrated = runner.invoke(app, ["db", "migrate", "--config", str(config), "--json"])
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(migrated.output)["schema"] == SCHEMA_VERSION
    status = runner.invoke(app, ["db", "status", "--config", str(config), "--json"])
    data = json.loads(status.output)
    assert (data["store"], data["schema"], data["pending"]) == ("postgresql", SCHEMA_VERSION, [])
    assert "LISTEN/NOTIFY" in data["vector_search"] and data["server_version"]


def test_db_status_on_a_new_sqlite_inventory_lists_its_pending_migrations(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    # stdout alone: stderr says there is no inventory yet.
    before = json.loads(runner.invoke(app, ["db", "status", "--config", str(config), "--json"]).stdout)
    assert before["store"] == "sqlite" and before["schema"] == 0 and before["pending"]
    applied = json.loads(runner.invoke(app, ["db", "migrate", "--config", str(config), "--json"]).output)
    assert applied["applied"] == before["pending"]


def test_db_status_says_clearly_when_the_server_is_unreachable(tmp_path: Path) -> None:
    config = write_config(tmp_path, inventory_url="postgresql://x@127.0.0.1:1/none?connect_timeout=2")
    result = runner.invoke(app, ["db", "status", "--config", str(config), "--json"])
    assert result.exit_code != 0
    assert "cannot reach the inventory" in json.loads(result.output)["error"]["message"]


def test_doctor_names_the_postgres_store_its_schema_and_vector_path(tmp_path: Path, clean_pg_url: str) -> None:
    config = write_config(tmp_path, inventory_url=clean_pg_url, port=1)
    result = runner.invoke(app, ["doctor", "--config", str(config), "--json"])
    checks = {c["check"]: c for c in json.loads(result.output)["checks"]}
    assert checks["store"]["ok"] and "postgresql" in checks["store"]["detail"]
    assert "exact cosine up to 20,000 tools" in checks["store"]["detail"]
    assert checks["inventory"]["ok"], checks["inventory"]


async def _fill(config: Config) -> None:
    from awb.blueprints.journal import LogEntry
    from awb.blueprints.session_tables import open_session_store
    from awb.inventory.models import CallRecord

    async with Workbench(config) as workbench:
        await workbench.craft(add_tool("kept", tags=["math", "ünïcode"]))
        await workbench.update("kept", code="def run(params):\n    return params['a'] + params['b'] + 0\n")
        await workbench.call("kept", {"a": 1, "b": 2})
        workbench.equip("kept")
        await workbench.craft(add_tool("dropped"))
        workbench.delete("dropped")
        await workbench.craft(add_tool("dropped"))  # a live tool may share a deleted one's name
        kept = workbench.resolve("kept")
        at = workbench.clock.now()
        workbench.store.record_call(
            CallRecord(
                call_id="call_00000000000000f1",
                tool_id=kept.tool_id,
                version=2,
                at=at,
                duration_ms=7.25,
                ok=False,
                error_code="timeout",
                peak_memory_bytes=5 << 20,
            )
        )
        workbench.store.record_call(CallRecord(tool_id=kept.tool_id, version=1, at=at, duration_ms=1, ok=True))
        for n, text in enumerate(("pending ✓", "applied", "discarded")):
            staged = workbench.store.stage_write(
                kept.tool_id, f"/tmp/out{n}.txt", text, at, call_id="call_00000000000000f1"
            )
            if n:
                cast(Any, workbench.store).set_staged_status(staged, text)
    sessions = open_session_store(config)
    try:
        sessions.add_exchange("session-1", "bp-1", at, "What is 1 + 2?", "3, I think")
        sessions.append_logs("session-1", [LogEntry(at=at, run_id="run-1", kind="run_end", data={"ok": True})])
        sessions.append_logs("logs-only", [LogEntry(at=at, run_id="run-2", kind="run_start", data={"message": "é"})])
    finally:
        sessions.close()


def _snapshot(config: Config) -> dict[str, Any]:
    """Every tool (deleted ones too) with its versions, calls and staged writes, in tool_id order, and
    every blueprint session."""
    from awb.blueprints.session_tables import open_session_store

    store: Any = open_store(config)
    sessions = open_session_store(config, inventory=store)
    try:
        tools = store.list_tools(limit=100) + store.purge_candidates(archived_before=None, deleted=True)
        records = [
            {
                "tool": t.model_dump(mode="json"),
                "versions": [v.model_dump(mode="json") for v in store.versions(t.tool_id)],
                "calls": [c.model_dump(mode="json") for _, c in store.call_history(t.tool_id)],
                "staged": [{k: v for k, v in w.items() if k != "id"} for w in store.staged_writes(tool_id=t.tool_id)],
            }
            for t in tools
        ]
        kept_sessions = {
            s: (
                [e.model_dump(mode="json") for e in sessions.exchanges(s)],
                [e.model_dump(mode="json") for e in sessions.logs(s)],
            )
            for s in sessions.session_ids()
        }
    finally:
        sessions.close()
        store.close()
    return {"tools": sorted(records, key=lambda r: r["tool"]["tool_id"]), "sessions": kept_sessions}


@pytest.mark.anyio
async def test_export_and_import_move_an_inventory_sqlite_to_postgres_and_back_unchanged(
    tmp_path: Path, clean_pg_url: str
) -> None:
    sqlite_config = Config(inventory_path=tmp_path / "a.db")
    await _fill(sqlite_config)
    first = tmp_path / "first.jsonl"
    args = ["inventory", "export", "--inventory", str(tmp_path / "a.db"), "--output", str(first)]
    assert runner.invoke(app, args).exit_code == 0
    into_pg = runner.invoke(app, ["inventory", "import", str(first), "--inventory-url", clean_pg_url, "--json"])
    assert json.loads(into_pg.output) == {
        "imported": 3,
        "skipped": 0,
        "calls": 3,
        "staged": 3,
        "sessions": 2,
        "sessions_skipped": 0,
    }
    again = runner.invoke(app, ["inventory", "import", str(first), "--inventory-url", clean_pg_url, "--json"])
    assert json.loads(again.output) == {
        "imported": 0,
        "skipped": 3,
        "calls": 0,
        "staged": 0,
        "sessions": 0,
        "sessions_skipped": 2,
    }
    second = tmp_path / "second.jsonl"
    assert (
        runner.invoke(app, ["inventory", "export", "--inventory-url", clean_pg_url, "-o", str(second)]).exit_code == 0
    )
    back = runner.invoke(app, ["inventory", "import", str(second), "--inventory", str(tmp_path / "b.db"), "--json"])
    assert json.loads(back.output)["imported"] == 3
    original = await anyio.to_thread.run_sync(_snapshot, sqlite_config)
    assert _snapshot(Config(inventory_url=clean_pg_url)) == original
    assert _snapshot(Config(inventory_path=tmp_path / "b.db")) == original
    tools = original["tools"]
    assert len(tools) == 3 and sum(len(r["versions"]) for r in tools) == 4
    [kept] = [r for r in tools if r["tool"]["name"] == "kept"]
    calls = [(c["ok"], c["peak_memory_bytes"]) for c in kept["calls"]]
    # The real call carries what the runtime measured (Monty measures; the figure round-trips as it is).
    assert calls[0][0] is True and (calls[0][1] is None or calls[0][1] >= 0)
    assert calls[1:] == [(False, 5 << 20), (True, None)]
    assert [w["status"] for w in kept["staged"]] == ["pending", "applied", "discarded"]
    assert set(original["sessions"]) == {"session-1", "logs-only"}


def test_a_bad_line_anywhere_in_an_export_stops_the_import_before_anything_is_written(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    anyio.run(_fill, Config(inventory_path=tmp_path / "a.db"))
    assert (
        runner.invoke(app, ["inventory", "export", "--inventory", str(tmp_path / "a.db"), "-o", str(good)]).exit_code
        == 0
    )
    lines = good.read_text(encoding="utf-8").splitlines()
    call_line = next(i for i, line in enumerate(lines) if line.startswith('{"call"'))
    call = json.loads(lines[call_line])["call"]
    for broken in (
        [*lines[:call_line], json.dumps({"call": {**call, "ok": "perhaps"}}), *lines[call_line + 1 :]],
        [lines[0], *lines[call_line:]],  # calls with no tool line above them
        [*lines, "{not json"],
    ):
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join(broken) + "\n", encoding="utf-8")
        result = runner.invoke(app, ["inventory", "import", str(bad), "--inventory", str(tmp_path / "c.db"), "--json"])
        assert result.exit_code != 0
        assert json.loads(result.output)["error"]["code"] == "invalid_params"
        assert _snapshot(Config(inventory_path=tmp_path / "c.db")) == {"tools": [], "sessions": {}}


def test_an_export_of_the_first_format_still_imports(tmp_path: Path) -> None:
    anyio.run(_fill, Config(inventory_path=tmp_path / "a.db"))
    export = tmp_path / "v1.jsonl"
    assert (
        runner.invoke(app, ["inventory", "export", "--inventory", str(tmp_path / "a.db"), "-o", str(export)]).exit_code
        == 0
    )
    records = _as_format_2([json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()])
    header = {"format": "awb-inventory", "version": 1, "tools": records[0]["tools"]}
    v1 = [header, *(r for r in records[1:] if "tool" in r)]
    assert sum(len(r["versions"]) for r in v1[1:]) == 4
    export.write_text("".join(json.dumps(r) + "\n" for r in v1), encoding="utf-8")
    result = runner.invoke(app, ["inventory", "import", str(export), "--inventory", str(tmp_path / "b.db"), "--json"])
    assert json.loads(result.output) == {
        "imported": 3,
        "skipped": 0,
        "calls": 0,
        "staged": 0,
        "sessions": 0,
        "sessions_skipped": 0,
    }


def _as_format_2(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An export's records as format 2 wrote them: versions on their tool's line, exchanges and run logs on
    their session's."""
    older: list[dict[str, Any]] = [{**records[0], "version": 2}]
    for record in records[1:]:
        if "tool" in record:
            older.append({**record, "versions": []})
        elif "session" in record:
            older.append({**record, "exchanges": [], "logs": []})
        elif "version" in record:
            older[-1]["versions"].append(record["version"])
        elif "exchange" in record or "log" in record:
            older[-1]["exchanges" if "exchange" in record else "logs"].append(record.get("exchange", record.get("log")))
        else:
            older.append(record)
    return older


def test_an_export_of_the_second_format_imports_the_same_records(tmp_path: Path) -> None:
    """Format 3 gives versions, exchanges and run-log entries lines of their own; format 2 files still import."""
    config = Config(inventory_path=tmp_path / "a.db")
    anyio.run(_fill, config)
    export = tmp_path / "v3.jsonl"
    assert (
        runner.invoke(
            app, ["inventory", "export", "--inventory", str(config.inventory_path), "-o", str(export)]
        ).exit_code
        == 0
    )
    records = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    assert records[0]["version"] == 3 and all("versions" not in r and "logs" not in r for r in records)
    assert {"version", "exchange", "log"} <= {key for r in records for key in r}
    older = tmp_path / "v2.jsonl"
    older.write_text("".join(json.dumps(r) + "\n" for r in _as_format_2(records)), encoding="utf-8")
    result = runner.invoke(app, ["inventory", "import", str(older), "--inventory", str(tmp_path / "b.db"), "--json"])
    assert result.exit_code == 0, result.output
    assert _snapshot(Config(inventory_path=tmp_path / "b.db")) == _snapshot(config)


def test_a_line_past_the_bound_is_refused_naming_its_number_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines were read whole, however long: `awb inventory import /dev/zero` grew until memory ran out."""
    monkeypatch.setattr(transfer, "MAX_LINE_BYTES", 1000)
    header = json.dumps({"format": "awb-inventory", "version": 3, "tools": 0, "sessions": 1}) + "\n"
    at_bound = json.dumps({"session": "s" * (1000 - 15)}) + "\n"
    assert len(at_bound) == 1001  # the bound, and its newline
    fits = tmp_path / "fits.jsonl"
    fits.write_text(header + at_bound, encoding="utf-8")
    result = runner.invoke(app, ["inventory", "import", str(fits), "--inventory", str(tmp_path / "a.db"), "--json"])
    assert result.exit_code == 0, result.output
    for tail in (at_bound[:-1] + " \n", "x" * 1001, "\0" * 5000):
        long = tmp_path / "long.jsonl"
        long.write_text(header + tail, encoding="utf-8")
        result = runner.invoke(app, ["inventory", "import", str(long), "--inventory", str(tmp_path / "b.db"), "--json"])
        assert result.exit_code != 0
        error = json.loads(result.output)["error"]
        assert error["code"] == "invalid_params" and error["details"] == {"line": 2, "limit": 1000}
        assert error["message"] == f"line 2 of {long} is longer than 1000 bytes (an export's lines are far shorter)"
        assert not (tmp_path / "b.db").exists()


def test_an_import_refuses_a_tag_holding_nul_naming_its_line_and_the_tag(tmp_path: Path) -> None:
    anyio.run(_fill, Config(inventory_path=tmp_path / "a.db"))
    export = tmp_path / "out.jsonl"
    assert (
        runner.invoke(app, ["inventory", "export", "--inventory", str(tmp_path / "a.db"), "-o", str(export)]).exit_code
        == 0
    )
    records = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    records[1]["tool"]["metadata"]["tags"] = ["fine", "a\x00b"]
    export.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = runner.invoke(app, ["inventory", "import", str(export), "--inventory", str(tmp_path / "b.db"), "--json"])
    assert result.exit_code != 0
    error = json.loads(result.output)["error"]
    assert error["code"] == "invalid_params" and error["message"].startswith("line 2: the tag 'a\\x00b' holds U+0000")
    assert not (tmp_path / "b.db").exists()


def test_import_refuses_a_file_that_is_not_an_export(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text('{"hello": 1}\n', encoding="utf-8")
    result = runner.invoke(app, ["inventory", "import", str(bogus), "--inventory", str(tmp_path / "x.db"), "--json"])
    assert result.exit_code != 0
    assert "not an awb inventory export" in json.loads(result.output)["error"]["message"]


def test_staged_writes_in_a_postgres_inventory_are_reviewed_with_awb_staged(tmp_path: Path, clean_pg_url: str) -> None:
    from datetime import UTC, datetime

    from awb.inventory.models import Tool

    store = open_store(Config(inventory_url=clean_pg_url))
    now = datetime.now(UTC)
    try:
        store.add_tool(
            Tool(
                tool_id="tool_writer",
                name="writer",
                description="writes",
                language="python",
                runtime="monty",
                code="def run(params):\n    return 1\n",
                input_schema={"type": "object"},
                created_at=now,
                updated_at=now,
            )
        )
        store.stage_write("tool_writer", str(tmp_path / "out.txt"), "hello", now, call_id="call_00000000000000ab")
        for n in range(2):
            store.stage_write("tool_writer", str(tmp_path / f"more{n}.txt"), "x", now, call_id=f"call_{n:016x}")
    finally:
        store.close()
    config = write_config(tmp_path, inventory_url=clean_pg_url)
    result = runner.invoke(app, ["staged", "list", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    assert "call_00000000000000ab" in result.output and "writer" in result.output
    # A page at a time: --limit, then --after the last id shown.
    first = runner.invoke(app, ["staged", "list", "--config", str(config), "--json", "--limit", "2"])
    page = [w["id"] for w in json.loads(first.output)["writes"]]
    assert len(page) == 2
    rest = runner.invoke(app, ["staged", "list", "--config", str(config), "--json", "--after", str(page[-1])])
    assert [w["call_id"] for w in json.loads(rest.output)["writes"]] == ["call_0000000000000001"]
    refused = runner.invoke(app, ["staged", "list", "--config", str(config), "--json", "--limit", "0"])
    assert refused.exit_code != 0 and "--limit" in refused.output


def test_a_server_on_postgres_names_that_inventory_not_a_sqlite_path(tmp_path: Path, clean_pg_url: str) -> None:
    from clitools import clean_env, http_server

    with http_server(tmp_path, env=clean_env(AWB_INVENTORY_URL=clean_pg_url)) as server:
        banner = next(line for line in server.seen if line.startswith("awb 0."))
        record = json.loads((tmp_path / ".awb" / "awb.pid").read_text())
    assert banner.rstrip().endswith(f"(inventory {clean_pg_url})")
    assert record["inventory"] == clean_pg_url
    assert ".db" not in banner


def test_an_import_says_to_reindex_the_tools_it_brought_and_only_then(tmp_path: Path) -> None:
    anyio.run(_fill, Config(inventory_path=tmp_path / "a.db"))
    export = tmp_path / "out.jsonl"
    source = ["--inventory", str(tmp_path / "a.db")]
    assert runner.invoke(app, ["inventory", "export", *source, "-o", str(export)]).exit_code == 0
    target = ["--inventory", str(tmp_path / "b.db")]
    first = runner.invoke(app, ["inventory", "import", str(export), *target])
    assert first.exit_code == 0 and "imported 3 tools" in first.output and "awb reindex" in first.output
    again = runner.invoke(app, ["inventory", "import", str(export), *target])
    assert again.exit_code == 0 and "imported 0 tools" in again.output and "reindex" not in again.output


def test_db_status_and_migrate_name_a_url_libpq_cannot_read_as_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, inventory_url="postgresql://u:s3cret@127.0.0.1:notaport/db")
    for command in ("status", "migrate"):
        result = runner.invoke(app, ["db", command, "--config", str(config), "--json"])
        error = json.loads(result.output)["error"]
        assert (result.exit_code, error["code"]) == (2, "config_invalid"), result.output
        assert "cannot reach the inventory" in error["message"] and "s3cret" not in result.output


def test_db_status_refuses_a_postgres_schema_newer_than_this_awb(tmp_path: Path, clean_pg_url: str) -> None:
    import psycopg

    config = write_config(tmp_path, inventory_url=clean_pg_url)
    assert runner.invoke(app, ["db", "migrate", "--config", str(config)]).exit_code == 0
    newer = SCHEMA_VERSION + 1
    with psycopg.connect(clean_pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO awb_migrations(version, name) VALUES (%s, 'from a newer awb')", (newer,))
    try:
        for command in (["db", "status"], ["db", "migrate"]):
            result = runner.invoke(app, [*command, "--config", str(config), "--json"])
            assert result.exit_code == 2, (command, result.output)
            error = json.loads(result.output)["error"]
            assert error["code"] == "config_invalid"
            assert f"has schema {newer}, newer than this awb ({SCHEMA_VERSION})" in error["message"]
        plain = runner.invoke(app, ["db", "status", "--config", str(config)])
        assert plain.exit_code == 2 and "newer than this awb" in plain.output
    finally:
        with psycopg.connect(clean_pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM awb_migrations WHERE version = %s", (newer,))


def test_db_status_refuses_a_sqlite_schema_newer_than_this_awb(tmp_path: Path) -> None:
    import sqlite3

    from awb.inventory.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA

    config = write_config(tmp_path)
    with sqlite3.connect(tmp_path / "inventory.db") as db:
        db.execute(f"PRAGMA user_version = {SQLITE_SCHEMA + 1}")
    result = runner.invoke(app, ["db", "status", "--config", str(config), "--json"])
    assert result.exit_code == 2, result.output
    assert "newer than this awb" in json.loads(result.output)["error"]["message"]


def test_export_format_2_is_what_an_awb_before_format_3_wrote(tmp_path: Path) -> None:
    """Going back to an older awb: it reads formats 1 and 2 only, and `--format 2` writes format 2."""
    config = Config(inventory_path=tmp_path / "a.db")
    anyio.run(_fill, config)
    newer, older = tmp_path / "v3.jsonl", tmp_path / "v2.jsonl"
    for path, extra in ((newer, []), (older, ["--format", "2"])):
        args = ["inventory", "export", "--inventory", str(config.inventory_path), "-o", str(path), *extra]
        assert runner.invoke(app, args).exit_code == 0
    records = [json.loads(line) for line in newer.read_text(encoding="utf-8").splitlines()]
    written = [json.loads(line) for line in older.read_text(encoding="utf-8").splitlines()]
    assert written == _as_format_2(records)
    assert written[0]["version"] == 2 and any(r.get("versions") for r in written)
    result = runner.invoke(app, ["inventory", "import", str(older), "--inventory", str(tmp_path / "b.db"), "--json"])
    assert result.exit_code == 0, result.output
    assert _snapshot(Config(inventory_path=tmp_path / "b.db")) == _snapshot(config)
    bad = runner.invoke(app, ["inventory", "export", "--inventory", str(config.inventory_path), "--format", "4"])
    assert bad.exit_code == 2 and "--format takes 2 or 3" in bad.output
