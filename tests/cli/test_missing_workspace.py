"""Commands run where there is no inventory (the wrong folder, a mistyped `--config` or path): one error
line or an empty answer, and nothing created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clitools import assert_one_error_line, clean_env, run_awb


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    "command",
    [
        ("inventory", "equip", "adder"),
        ("inventory", "unequip", "adder"),
        ("inventory", "delete", "adder"),
        ("inventory", "rollback", "adder", "1"),
        ("inventory", "inspect", "adder"),
        ("inventory", "versions", "adder"),
    ],
)
def test_a_command_on_a_tool_where_there_is_no_inventory_is_one_line_and_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    line = assert_one_error_line(run_awb(tmp_path, *command), "tool_not_found")
    assert f"no tool 'adder': there is no inventory at {tmp_path / '.awb' / 'inventory.db'}" in line
    # A mistyped inventory path names folders that do not exist: none of them is made.
    typo = tmp_path / "no-such-folder" / "inventory.db"
    as_json = run_awb(tmp_path, *command, "--json", env=clean_env(AWB_INVENTORY_PATH=str(typo)))
    assert as_json.returncode == 1 and json.loads(as_json.stderr)["error"]["code"] == "tool_not_found"
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("action", ["show", "apply", "discard"])
def test_a_command_on_a_staged_write_where_there_is_no_inventory_is_one_line_and_creates_nothing(
    tmp_path: Path, action: str
) -> None:
    line = assert_one_error_line(run_awb(tmp_path, "staged", action, "1"), "invalid_params")
    assert "no staged write #1: there is no inventory at" in line
    assert _tree(tmp_path) == []


def test_purge_where_there_is_no_inventory_has_nothing_to_purge_and_creates_nothing(tmp_path: Path) -> None:
    said = run_awb(tmp_path, "inventory", "purge", "--deleted", "--yes")
    assert said.returncode == 0 and "nothing to purge" in said.stdout
    as_json = run_awb(tmp_path, "inventory", "purge", "--deleted", "--json")
    assert json.loads(as_json.stdout) == {"purged": [], "count": 0}
    assert _tree(tmp_path) == []


def test_a_tool_command_on_a_postgresql_inventory_never_looks_for_the_sqlite_file(tmp_path: Path) -> None:
    # Nothing listens on port 1: the command must try the database the config names, not report the
    # (unused) SQLite path as a missing inventory.
    env = clean_env(AWB_INVENTORY_URL="postgresql://nobody@127.0.0.1:1/awb")
    line = assert_one_error_line(run_awb(tmp_path, "inventory", "inspect", "adder", env=env), "config_invalid")
    assert "cannot reach the inventory at postgresql://" in line
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("days", ["-5", "nan", "1e9"])
def test_purge_with_days_out_of_range_is_one_usage_line_naming_the_option(tmp_path: Path, days: str) -> None:
    line = assert_one_error_line(run_awb(tmp_path, "inventory", "purge", "--archived-before", days), "usage_error")
    assert "--archived-before takes a number of days from 0 to 36500" in line
    assert _tree(tmp_path) == []


def test_listings_where_there_is_no_inventory_are_empty_pages_of_the_usual_shape(tmp_path: Path) -> None:
    """A script reads the same keys with or without an inventory (`next_offset` was missing here)."""
    tools = json.loads(run_awb(tmp_path, "inventory", "list", "--offset", "5", "--json").stdout)
    assert tools == {"tools": [], "total": 0, "offset": 5, "next_offset": None, "count": 0}
    writes = json.loads(run_awb(tmp_path, "staged", "list", "--json").stdout)
    assert writes == {"writes": [], "count": 0, "next_after": None}
    assert _tree(tmp_path) == []


def test_db_status_where_there_is_no_inventory_says_so_and_creates_nothing(tmp_path: Path) -> None:
    """It answered `schema 0` with every migration pending and not a word more, which reads as an old
    inventory to migrate: `awb db migrate` then made a new one wherever a mistyped `--config` pointed."""
    said = run_awb(tmp_path, "db", "status")
    assert said.returncode == 0, said
    assert said.stderr == (
        f"no awb.config.json here; no inventory at {tmp_path / '.awb' / 'inventory.db'} yet "
        "(`awb init` or `awb start` creates it)\n"
    )
    as_json = run_awb(tmp_path, "db", "status", "--json")
    assert json.loads(as_json.stdout)["schema"] == 0 and "no inventory at" in as_json.stderr
    assert _tree(tmp_path) == []
