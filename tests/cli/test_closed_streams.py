"""`awb` started with a standard stream closed (`>&-`, `2>&-`, `<&-`): the descriptor is held on
/dev/null so that nothing the command opens takes its number, output to a closed stdout fails with
`output_failed` in one line, and a closed stderr costs nothing but the messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clitools import AWB, assert_one_error_line, run_awb, run_program


def run_closed(cwd: Path, fd: int, *args: str, program: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `awb args` (or `program`) with descriptor `fd` closed, as `>&-` leaves it."""
    return run_program(program or [AWB, *args], cwd, preexec_fn=lambda: os.close(fd))  # in the child, before exec


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    assert run_awb(tmp_path, "init").returncode == 0
    return tmp_path


@pytest.mark.parametrize("command", [("inventory", "list"), ("--version",), ("doctor", "--quick")])
def test_a_command_with_output_and_stdout_closed_says_it_could_not_write_it(
    workspace: Path, command: tuple[str, ...]
) -> None:
    line = assert_one_error_line(run_closed(workspace, 1, *command), "output_failed")
    assert "standard output is closed" in line


def test_with_json_the_error_is_json_on_stderr(workspace: Path) -> None:
    done = run_closed(workspace, 1, "inventory", "list", "--json")
    assert done.returncode == 1
    error = json.loads(done.stderr)["error"]
    assert error["code"] == "output_failed" and "standard output is closed" in error["message"]


def test_the_stdio_server_with_stdout_closed_says_so_in_one_line(workspace: Path) -> None:
    line = assert_one_error_line(run_closed(workspace, 1, "start"), "output_failed")
    assert line.endswith("cannot serve MCP on stdio: standard output is closed")


def test_with_stderr_closed_a_command_still_gives_its_output(workspace: Path) -> None:
    done = run_closed(workspace, 2, "inventory", "list", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["total"] == 0


def test_a_closed_descriptor_is_never_the_number_of_a_file_the_command_opens(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from awb.cli.output import hold_standard_streams\n"
        "hold_standard_streams()\n"
        f"opened = open({str(tmp_path / 'file')!r}, 'w')\n"
        "sys.stderr.write(str(opened.fileno()))\n"
    )
    done = run_closed(tmp_path, 1, program=[sys.executable, "-c", probe])
    assert done.returncode == 0, done.stderr
    assert int(done.stderr) > 2
