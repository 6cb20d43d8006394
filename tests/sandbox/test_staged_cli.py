"""`awb staged`: list, show, apply, discard through the Typer app."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from awb.cli.staged import staged_app
from awb.inventory.sqlite import SQLiteStore
from sandbox_support import granted_tool


def _setup(tmp_path: Path) -> tuple[Path, Path, int]:
    config = tmp_path / "awb.config.json"
    config.write_text(json.dumps({"inventory_path": "inv.db"}))
    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(granted_tool("tool_x", tmp_path / "out"))
    target = tmp_path / "out" / "file.txt"
    staged_id = store.stage_write("tool_x", str(target), "staged content", datetime.now(UTC), call_id="call_1")
    store.close()
    return config, target, staged_id


def test_list_show_apply_and_refused_second_apply(tmp_path: Path) -> None:
    config, target, staged_id = _setup(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(staged_app, ["list", "--config", str(config), "--json"])
    assert listed.exit_code == 0, listed.output
    assert [w["id"] for w in json.loads(listed.output)] == [staged_id]
    shown = runner.invoke(staged_app, ["show", str(staged_id), "--config", str(config)])
    assert "staged content" in shown.output
    applied = runner.invoke(staged_app, ["apply", str(staged_id), "--config", str(config)])
    assert applied.exit_code == 0, applied.output
    assert target.read_text() == "staged content"
    again = runner.invoke(staged_app, ["apply", str(staged_id), "--config", str(config), "--json"])
    assert again.exit_code != 0
    assert json.loads(again.output)["error"]["code"] == "invalid_params"


def test_discard_writes_nothing(tmp_path: Path) -> None:
    config, target, staged_id = _setup(tmp_path)
    result = CliRunner().invoke(staged_app, ["discard", str(staged_id), "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "discarded" in result.output
    assert not target.exists()
    listed = CliRunner().invoke(staged_app, ["list", "--config", str(config)])
    assert "no pending staged writes" in listed.output


def test_list_and_show_name_the_call_that_staged_the_write(tmp_path: Path) -> None:
    config, _, staged_id = _setup(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(staged_app, ["list", "--config", str(config), "--json"])
    assert [w["call_id"] for w in json.loads(listed.output)] == ["call_1"]
    shown = runner.invoke(staged_app, ["show", str(staged_id), "--config", str(config), "--json"])
    assert json.loads(shown.output)["call_id"] == "call_1"
    for command in (["list"], ["show", str(staged_id)]):
        result = runner.invoke(staged_app, [*command, "--config", str(config)], terminal_width=200)
        assert result.exit_code == 0, result.output
        assert "call_1" in result.output
