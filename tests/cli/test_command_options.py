"""What the README promises of every command: `--config PATH` wherever a workspace is read, and `--json`
for scripts (the error as JSON on stderr), checked on the real command tree and the real executable."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer.main

from awb.cli.main import app
from clitools import clean_env, run_awb
from support import REPO

#: Commands that read no workspace config: `init` makes one in DIR, `agents list` reads --agents-dir.
WITHOUT_CONFIG = {"awb init", "awb agents list"}


def _commands(command: Any, path: str = "awb") -> list[tuple[str, set[str]]]:
    if hasattr(command, "commands"):
        return [found for name, sub in command.commands.items() for found in _commands(sub, f"{path} {name}")]
    return [(path, {option for param in command.params for option in getattr(param, "opts", [])})]


def test_every_command_takes_json_and_every_command_that_reads_a_workspace_takes_config() -> None:
    commands = _commands(typer.main.get_command(app))
    assert [path for path, options in commands if "--json" not in options] == []
    assert sorted(path for path, options in commands if "--config" not in options) == sorted(WITHOUT_CONFIG)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "Every command takes `--config PATH`" not in readme
    for path in WITHOUT_CONFIG:
        assert re.search(re.escape(f"`{path.removeprefix('awb ')}") + r"[` ]", readme), path


def test_start_stop_and_init_speak_json_for_scripts(tmp_path: Path) -> None:
    env = clean_env(AWB_PID_FILE=str(tmp_path / "awb.pid"))
    refused = run_awb(tmp_path, "start", "--transport", "carrier-pigeon", "--json", env=env)
    assert refused.returncode == 2 and json.loads(refused.stderr)["error"]["code"] == "usage_error"
    bad_env = run_awb(tmp_path, "start", "--json", env=clean_env(AWB_PORT="seven"))
    assert json.loads(bad_env.stderr)["error"]["code"] == "config_invalid"
    created = run_awb(tmp_path, "init", "ws", "--json", env=env)
    assert created.returncode == 0, created.stderr
    made = json.loads(created.stdout)
    assert made["config"] == str((tmp_path / "ws" / "awb.config.json").resolve())
    assert Path(made["inventory"]).is_file() and Path(made["tools_dir"]).is_dir()
    again = run_awb(tmp_path, "init", "ws", "--json", env=env)
    assert json.loads(again.stderr)["error"]["code"] == "config_invalid" and again.stdout == ""
    stopped = run_awb(tmp_path / "ws", "stop", "--json", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {
        "stopped": False,
        "server": None,
        "message": f"no workbench is running (no pid file at {tmp_path / 'awb.pid'})",
    }
    for command in (("inventory", "export"), ("blueprints", "schemas", "--part", "tail")):
        failed = run_awb(tmp_path, *command, "--json", env=env)
        assert failed.returncode != 0 and json.loads(failed.stderr)["error"]["code"] in (
            "usage_error",
            "invalid_params",
        )


def test_export_and_import_name_a_bad_inventory_url_or_both_inventories_as_a_usage_error(tmp_path: Path) -> None:
    """`--inventory-url foo` was an `internal_error` quoting pydantic's whole ValidationError (its newlines
    escaped, a link to pydantic's docs); `--inventory` beside `--inventory-url` dropped the URL unsaid."""
    (tmp_path / "x.jsonl").write_text("")
    for command in (("inventory", "export"), ("inventory", "import", "x.jsonl")):
        bad = run_awb(tmp_path, *command, "--inventory-url", "foo")
        assert bad.returncode == 2, bad
        assert bad.stderr.startswith("error (usage_error): --inventory-url: String should match pattern"), bad.stderr
        assert len(bad.stderr.splitlines()) == 1 and "pydantic" not in bad.stderr
        both = run_awb(tmp_path, *command, "--inventory", "a.db", "--inventory-url", "postgresql://x@127.0.0.1:1/db")
        assert both.returncode == 2, both
        assert both.stderr == "error (usage_error): --inventory and --inventory-url name two inventories; give one\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]
