"""A command that asks before doing everything (`awb staged apply|discard --all`, `awb inventory purge`)
asks on stderr: with `--json` and a person at the terminal, stdout is the JSON result alone, so
`awb staged apply --all --json > done.json` answered `y` leaves JSON a script can read."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import anyio

from awb.config import Config
from awb.inventory.sqlite import SQLiteStore
from awb.workbench import Workbench
from clitools import AWB, clean_env
from sandbox_support import granted_tool
from support import add_tool


def _answered(tmp_path: Path, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`awb ARGS` with a terminal on stdin that has `answer` typed, stdout and stderr captured."""
    person, terminal = os.openpty()
    try:
        os.write(person, answer.encode())  # waits in the terminal's input until the command reads it
        return subprocess.run(
            [AWB, *args],
            env=clean_env(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=terminal,
        )
    finally:
        os.close(terminal)
        os.close(person)


def _workspace(tmp_path: Path) -> SQLiteStore:
    (tmp_path / "awb.config.json").write_text(json.dumps({"inventory_path": "inv.db"}))
    return SQLiteStore(tmp_path / "inv.db")


def test_staged_all_json_asks_on_stderr_and_prints_only_json(tmp_path: Path) -> None:
    store = _workspace(tmp_path)
    store.add_tool(granted_tool("tool_x", tmp_path / "out"))
    store.stage_write("tool_x", str(tmp_path / "out" / "a.txt"), "note", datetime.now(UTC), call_id="c")
    store.close()
    done = _answered(tmp_path, "y\n", "staged", "discard", "--all", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("{") and json.loads(done.stdout)["count"] == 1  # stdout is the result alone
    assert "discard this staged write?" in done.stderr
    assert "tool_x" in done.stderr  # what the person is asked about is listed beside the question


def test_purge_json_asks_on_stderr_and_prints_only_json(tmp_path: Path) -> None:
    _workspace(tmp_path).close()
    workbench = Workbench(Config(inventory_path=tmp_path / "inv.db"))

    async def doom() -> None:
        async with workbench:
            await workbench.craft(add_tool("doomed"))
            workbench.delete("doomed")

    anyio.run(doom)
    kept = _answered(tmp_path, "n\n", "inventory", "purge", "--deleted", "--json")
    assert kept.returncode == 1 and kept.stdout == "", kept.stdout
    assert "remove this tool for good?" in kept.stderr and "doomed" in kept.stderr
    assert "1 tool to remove for good" in kept.stderr and "1 tools" not in kept.stderr
    done = _answered(tmp_path, "y\n", "inventory", "purge", "--deleted", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("{") and json.loads(done.stdout)["count"] == 1
