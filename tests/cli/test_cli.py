"""The `awb` command line, run as a person or a script would run it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from awb.cli.main import app
from awb.clock import ManualClock
from awb.config import load_config
from awb.workbench import Workbench
from support import REPO, add_tool, awb_env

pytestmark = pytest.mark.anyio
runner = CliRunner()


def awb(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "awb", *args],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_creates_config_inventory_and_tools_dir_and_refuses_to_overwrite(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "awb.config.json").exists()
    assert (tmp_path / "tools").is_dir()
    assert load_config(tmp_path / "awb.config.json", environ={}).inventory_path.exists()
    again = runner.invoke(app, ["init", str(tmp_path)])
    assert again.exit_code == 1
    assert "already exists" in again.output
    assert runner.invoke(app, ["init", str(tmp_path), "--force"]).exit_code == 0


def test_doctor_passes_on_a_fresh_workbench_and_reports_json(tmp_path: Path) -> None:
    result = awb(tmp_path, "doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    checks = {check["check"]: check["ok"] for check in report["checks"]}
    assert report["ok"] and checks["inventory"] and checks["fts5"] and checks["sandbox:monty"]


def test_doctor_fails_with_a_nonzero_exit_on_a_bad_config(tmp_path: Path) -> None:
    (tmp_path / "awb.config.json").write_text('{"port": "seven"}')
    result = awb(tmp_path, "doctor")
    assert result.returncode == 1
    assert "port" in result.stdout


def test_stop_says_clearly_when_nothing_runs(tmp_path: Path) -> None:
    result = awb(tmp_path, "stop")
    assert result.returncode == 0
    assert "no workbench is running" in result.stdout


def test_start_and_stop_through_the_pid_file(tmp_path: Path) -> None:
    from support import free_port, wait_for_ready

    process = subprocess.Popen(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--port", str(free_port())],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        reader = wait_for_ready(process)
        assert (tmp_path / "awb.pid").read_text() == str(process.pid)
        stopped = awb(tmp_path, "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert f"pid {process.pid}" in stopped.stdout
        assert process.wait(timeout=15) is not None
        assert not (tmp_path / "awb.pid").exists()
        reader.join(timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
        assert process.stderr is not None
        process.stderr.close()


async def test_inventory_commands_show_what_the_workbench_holds(tmp_path: Path) -> None:
    clock = ManualClock()
    async with Workbench(load_config(None, environ=awb_env(tmp_path)), clock=clock) as workbench:
        tool = await workbench.craft(add_tool("cli_adder"))
    listed = awb(tmp_path, "inventory", "list", "--json")
    assert json.loads(listed.stdout)["tools"][0]["tool_id"] == tool.tool_id
    table = awb(tmp_path, "inventory", "list")
    assert "cli_adder" in table.stdout
    found = json.loads(awb(tmp_path, "inventory", "search", "add numbers", "--json").stdout)
    assert found["results"][0]["name"] == "cli_adder"
    inspected = json.loads(awb(tmp_path, "inventory", "inspect", "cli_adder", "--json").stdout)
    assert inspected["tool"]["code"] == add_tool()["code"]
    missing = awb(tmp_path, "inventory", "inspect", "nope")
    assert missing.returncode == 1 and "tool_not_found" in missing.stderr
    empty = awb(tmp_path, "inventory", "search", "  ", "--json")
    assert empty.returncode == 2 and json.loads(empty.stdout)["error"]["code"] == "invalid_params"


def test_maintain_reports_what_it_moved(tmp_path: Path) -> None:
    result = awb(tmp_path, "maintain", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"changes": []}


def _command_paths(command: Any, prefix: str = "awb") -> list[str]:
    if hasattr(command, "commands"):
        paths = []
        for name, sub in command.commands.items():
            paths.extend(_command_paths(sub, f"{prefix} {name}"))
        return paths
    return [prefix]


def test_every_cli_command_is_documented_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [
        path
        for path in _command_paths(typer.main.get_command(app))
        if not re.search(re.escape(path) + r"(\s|`|$)", readme)
    ]
    assert missing == [], f"undocumented commands: {missing}"
