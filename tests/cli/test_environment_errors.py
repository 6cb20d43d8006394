"""Files and devices the `awb` executable cannot use (a config that is a folder or not UTF-8, a pid or
log file that cannot be made, an output with no room): one line with the code that says so, never an
`internal_error`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from awb.config import Config
from awb.workbench import Workbench
from clitools import AWB, assert_one_error_line, clean_env, run_awb
from support import ADD_CODE, add_tool


def test_a_config_path_that_is_a_folder_is_one_config_error_line(tmp_path: Path) -> None:
    result = run_awb(tmp_path, "inventory", "list", "--config", str(tmp_path))
    assert "Is a directory" in assert_one_error_line(result, "config_invalid")
    assert result.returncode == 2


def test_an_environment_value_that_is_not_json_is_one_config_error_line_naming_the_variable(tmp_path: Path) -> None:
    env = clean_env(AWB_ALLOWED_HOSTS="db.internal:*")
    result = run_awb(tmp_path, "inventory", "list", env=env)
    assert "AWB_ALLOWED_HOSTS must be a list written as JSON" in assert_one_error_line(result, "config_invalid")
    assert result.returncode == 2
    as_json = run_awb(tmp_path, "inventory", "list", "--json", env=env)
    assert json.loads(as_json.stderr)["error"]["details"]["variable"] == "AWB_ALLOWED_HOSTS"
    doctor = run_awb(tmp_path, "doctor", "--quick", "--json", env=env)
    config_row = next(c for c in json.loads(doctor.stdout)["checks"] if c["check"] == "config")
    assert doctor.returncode == 1 and not config_row["ok"] and "AWB_ALLOWED_HOSTS" in config_row["detail"]


def test_a_config_file_that_is_not_utf8_is_one_config_error_line_and_a_byte_order_mark_is_read(
    tmp_path: Path,
) -> None:
    config = tmp_path / "awb.config.json"
    config.write_bytes(b"\xff\xfe{\x00}\x00")  # UTF-16, as some editors save
    result = run_awb(tmp_path, "inventory", "list")
    assert "is not UTF-8 text" in assert_one_error_line(result, "config_invalid")
    config.write_bytes(b"\xef\xbb\xbf" + json.dumps({"port": 7001}).encode())
    listed = run_awb(tmp_path, "inventory", "list", "--json")
    assert listed.returncode == 0, listed.stderr


def _unusable_paths(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    return {
        "in /proc": "/proc/awb-test.pid",
        "a folder": str(tmp_path / "a-folder"),
        # What a read-only workspace does to `.awb/`: its folder cannot be made.
        "under a file": str(tmp_path / "a-file" / "awb.pid"),
    }


@pytest.mark.parametrize("where", ["in /proc", "a folder", "under a file"])
def test_a_pid_file_that_cannot_be_made_is_one_startup_failed_line(tmp_path: Path, where: str) -> None:
    pid_file = _unusable_paths(tmp_path)[where]
    env = clean_env(AWB_PID_FILE=pid_file, AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"))
    result = run_awb(tmp_path, "start", "--transport", "http", "--port", "0", env=env)
    line = assert_one_error_line(result, "startup_failed")
    assert f"cannot use the pid file {pid_file}" in line and "AWB_PID_FILE" in line
    stopped = run_awb(tmp_path, "stop", env=env)
    if where == "a folder":
        assert "cannot read the pid file" in assert_one_error_line(stopped, "config_invalid")
    else:
        assert stopped.returncode == 0 and "no workbench is running" in stopped.stdout, stopped


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("where", ["in /proc", "a folder", "under a file"])
def test_a_log_file_that_cannot_be_made_is_one_startup_failed_line(tmp_path: Path, where: str, transport: str) -> None:
    log_file = _unusable_paths(tmp_path)[where]
    env = clean_env(
        AWB_LOG_FILE=log_file,
        AWB_PID_FILE=str(tmp_path / "awb.pid"),
        AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"),
    )
    port = ("--port", "0") if transport == "http" else ()
    result = run_awb(tmp_path, "start", "--transport", transport, *port, env=env)
    assert f"cannot write the log file {log_file}" in assert_one_error_line(result, "startup_failed")
    assert not (tmp_path / "awb.pid").exists()


@pytest.mark.parametrize(
    "command", [("inventory", "export"), ("inventory", "list"), ("inventory", "list", "--json"), ("doctor", "--quick")]
)
def test_output_to_a_full_device_is_one_output_failed_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [AWB, *command],
            cwd=tmp_path,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    stderr = result.stderr.strip()
    if "--json" in command:
        assert json.loads(stderr)["error"]["code"] == "output_failed"
    else:
        assert stderr.count("\n") == 0 and stderr.startswith("error (output_failed): cannot write the "), stderr
        assert stderr.endswith("No space left on device")
    assert result.returncode == 1


@pytest.mark.parametrize("command", [("inventory", "export"), ("inventory", "inspect", "bulky_0")])
def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path, command: tuple[str, ...]) -> None:
    assert run_awb(tmp_path, "init").returncode == 0

    async def craft() -> None:
        # Far more than a pipe holds (64 KiB), so the command is still writing when `head` leaves.
        bulky = "# " + "padding " * 20_000 + "\n" + ADD_CODE
        config = Config(inventory_path=tmp_path / ".awb" / "inventory.db", max_code_bytes=len(bulky))
        async with Workbench(config) as workbench:
            for n in range(3):
                await workbench.craft(add_tool(f"bulky_{n}", code=bulky))

    anyio.run(craft)
    shell = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$0" "$@" | head -1', AWB, *command],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shell.returncode == 0 and shell.stderr == "", shell
    assert shell.stdout.count("\n") == 1


@pytest.mark.parametrize(
    "command",
    [
        ("inventory", "list"),
        ("inventory", "search", "add"),
        ("staged", "list"),
        ("staged", "show", "1"),
        ("maintain",),
        ("reindex",),
        ("db", "status"),
        ("inventory", "export"),
    ],
)
def test_an_inventory_whose_existence_cannot_be_told_is_one_inventory_unreadable_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # The check for "no inventory yet" ran `Path.exists`, which raises on anything but a missing file:
    # a `.awb` of another user's (permission denied), or here a name too long, was an `internal_error`.
    env = clean_env(AWB_INVENTORY_PATH=str(tmp_path / ("x" * 300) / "inventory.db"))
    line = assert_one_error_line(run_awb(tmp_path, *command, env=env), "inventory_unreadable")
    assert "cannot reach the inventory" in line and "File name too long" in line


def test_doctor_fails_the_inventory_row_whose_existence_cannot_be_told(tmp_path: Path) -> None:
    env = clean_env(AWB_INVENTORY_PATH=str(tmp_path / ("x" * 300) / "inventory.db"))
    doctor = run_awb(tmp_path, "doctor", "--quick", "--json", env=env)
    checks = {check["check"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert not checks["inventory"]["ok"] and "File name too long" in checks["inventory"]["detail"]
    assert doctor.returncode == 1


@pytest.mark.parametrize(
    "command",
    [("inventory", "list"), ("db", "status"), ("reindex",), ("inventory", "export"), ("doctor", "--quick", "--json")],
    ids=" ".join,
)
def test_an_inventory_sqlite_cannot_open_says_why(tmp_path: Path, command: tuple[str, ...]) -> None:
    # SQLite says only "unable to open database file" (of a folder, or a file this user may not open);
    # `awb db status`, `reindex`, `inventory export` and doctor's store row did not even catch it (an
    # `internal_error`).
    (tmp_path / "inventory.db").mkdir()
    result = run_awb(tmp_path, *command, env=clean_env(AWB_INVENTORY_PATH=str(tmp_path / "inventory.db")))
    if command[0] == "doctor":
        checks = {check["check"]: check for check in json.loads(result.stdout)["checks"]}
        said = [checks["store"]["detail"], checks["inventory"]["detail"]]
        assert not checks["store"]["ok"] and not checks["inventory"]["ok"] and result.returncode == 1
    else:
        said = [assert_one_error_line(result, "inventory_unreadable")]
    assert all(f"cannot open the inventory {tmp_path / 'inventory.db'}: Is a directory" in line for line in said)
