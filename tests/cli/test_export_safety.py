"""`awb inventory export -o` never writes over a file that is not an export, and `import` reads only UTF-8
text; both say what is wrong in one line. The real executable, in a workspace made by `awb init`."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import anyio
import pytest

from awb.config import Config
from awb.workbench import Workbench
from clitools import AWB, assert_one_error_line, clean_env, run_awb
from support import add_tool


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    assert run_awb(tmp_path, "init").returncode == 0

    async def craft() -> None:
        async with Workbench(Config(inventory_path=tmp_path / ".awb" / "inventory.db")) as workbench:
            await workbench.craft(add_tool())

    anyio.run(craft)
    return tmp_path


def tool_names(workspace: Path) -> list[str]:
    listed = run_awb(workspace, "inventory", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [tool["name"] for tool in json.loads(listed.stdout)["tools"]]


def test_an_export_over_the_inventory_its_sidecars_or_the_config_is_refused_and_loses_nothing(
    workspace: Path,
) -> None:
    inventory = workspace / ".awb" / "inventory.db"
    (workspace / "link.db").symlink_to(inventory)
    (workspace / "hard.db").hardlink_to(inventory)
    kept = {path: path.read_bytes() for path in (inventory, workspace / "awb.config.json")}
    own = (
        ".awb/inventory.db",
        ".awb/inventory.db-wal",
        ".awb/inventory.db-shm",
        "awb.config.json",
        "link.db",
        "hard.db",
    )
    for output in own:
        line = assert_one_error_line(run_awb(workspace, "inventory", "export", "-o", output), "usage_error")
        assert "one of the workspace's own files" in line, line
    # Another SQLite file (a copy of the inventory) is refused too: it is not an export.
    (workspace / "copy.db").write_bytes(inventory.read_bytes())
    line = assert_one_error_line(run_awb(workspace, "inventory", "export", "-o", "copy.db"), "usage_error")
    assert "is not an awb export" in line
    assert {path: path.read_bytes() for path in kept} == kept
    assert tool_names(workspace) == ["add_numbers"]


def test_an_export_replaces_an_earlier_export_but_never_another_file(workspace: Path) -> None:
    notes = workspace / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    line = assert_one_error_line(run_awb(workspace, "inventory", "export", "-o", "notes.txt"), "usage_error")
    assert "notes.txt exists and is not an awb export" in line
    assert notes.read_text(encoding="utf-8") == "my notes\n"

    first = run_awb(workspace, "inventory", "export", "-o", "out.jsonl")
    assert first.returncode == 0, first.stderr
    assert "exported 3 lines: the header and 2 records" in first.stderr  # the tool, and its one version
    again = run_awb(workspace, "inventory", "export", "-o", "out.jsonl")
    assert again.returncode == 0, again.stderr
    lines = (workspace / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "awb-inventory"
    assert [json.loads(line)["tool"]["name"] for line in lines[1:] if "tool" in json.loads(line)] == ["add_numbers"]
    assert not [p.name for p in workspace.iterdir() if p.name.endswith(".partial")]
    assert (workspace / "out.jsonl").stat().st_mode & 0o777 != 0o600  # a plain file's mode, not a temp file's


def test_an_export_to_a_missing_directory_or_without_an_inventory_is_one_error_line(tmp_path: Path) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    line = assert_one_error_line(run_awb(tmp_path, "inventory", "export", "-o", "nowhere/out.jsonl"), "usage_error")
    assert "is not a directory" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    line = assert_one_error_line(run_awb(empty, "inventory", "export", "-o", "out.jsonl"), "usage_error")
    assert "nothing to export" in line
    assert sorted(p.name for p in empty.iterdir()) == []


def test_import_of_text_that_is_not_utf8_or_of_a_missing_file_is_one_error_line(workspace: Path) -> None:
    export = run_awb(workspace, "inventory", "export", "-o", "out.jsonl")
    assert export.returncode == 0, export.stderr
    latin = workspace / "latin1.jsonl"
    latin.write_bytes((workspace / "out.jsonl").read_bytes() + b'{"note": "caf\xe9"}\n')
    line = assert_one_error_line(run_awb(workspace, "inventory", "import", str(latin)), "invalid_params")
    assert "line 4 of" in line and "is not UTF-8 text" in line
    line = assert_one_error_line(run_awb(workspace, "inventory", "import", "missing.jsonl"), "usage_error")
    assert "cannot read missing.jsonl: No such file or directory" in line
    as_json = run_awb(workspace, "inventory", "import", "missing.jsonl", "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stderr)["error"]["code"] == "usage_error"
    assert tool_names(workspace) == ["add_numbers"]


def test_an_import_with_a_bad_record_is_one_line_and_creates_no_inventory(workspace: Path, tmp_path: Path) -> None:
    assert run_awb(workspace, "inventory", "export", "-o", "out.jsonl").returncode == 0
    lines = (workspace / "out.jsonl").read_text(encoding="utf-8").splitlines()
    tool = json.loads(lines[1])
    tool["tool"]["memory_level"] = "forever"  # not a tier
    bad = workspace / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(tool), *lines[2:]]) + "\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "new.db"
    line = assert_one_error_line(
        run_awb(workspace, "inventory", "import", str(bad), "--inventory", str(target)), "invalid_params"
    )
    assert line.startswith("error (invalid_params): line 2 is not a valid record: memory_level: Input should be ")
    assert not target.exists()


def export_header(text: str) -> dict[str, object]:
    header: dict[str, object] = json.loads(text.splitlines()[0])
    assert header["format"] == "awb-inventory", text
    return header


@pytest.mark.parametrize("output", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "to-stdout"])
def test_an_export_to_a_name_of_stdout_writes_through_its_pipe(workspace: Path, output: str) -> None:
    (workspace / "to-stdout").symlink_to("/dev/stdout")  # a link to the link is followed the same way
    result = run_awb(workspace, "inventory", "export", "-o", output)
    assert result.returncode == 0, result.stderr
    assert export_header(result.stdout)["tools"] == 1
    assert len(result.stdout.splitlines()) == 3
    assert (workspace / "to-stdout").is_symlink()  # followed, never replaced


def test_an_export_to_dev_stderr_comes_before_the_note(workspace: Path) -> None:
    result = run_awb(workspace, "inventory", "export", "-o", "/dev/stderr")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    export_header(result.stderr)
    assert result.stderr.splitlines()[3] == "exported 3 lines: the header and 2 records"


def test_an_export_to_dev_stdout_appends_to_the_file_the_shell_opened_and_keeps_its_inode(workspace: Path) -> None:
    # `awb inventory export -o /dev/stdout >> log`: the log is the shell's open file, not one to replace.
    log = workspace / "log.txt"
    log.write_text("earlier lines\n", encoding="utf-8")
    inode = log.stat().st_ino
    with log.open("a", encoding="utf-8") as appended:
        result = subprocess.run(
            [AWB, "inventory", "export", "-o", "/dev/stdout"],
            cwd=workspace,
            env=clean_env(),
            stdout=appended,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    text = log.read_text(encoding="utf-8")
    assert text.startswith("earlier lines\n")
    export_header(text.removeprefix("earlier lines\n"))
    assert log.stat().st_ino == inode


def test_an_export_to_stdout_that_is_a_socket_is_written(workspace: Path) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        result = subprocess.run(
            [AWB, "inventory", "export", "-o", "/dev/stdout"],
            cwd=workspace,
            env=clean_env(),
            stdout=theirs,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        theirs.close()
        ours.settimeout(10)
        received = b"".join(iter(lambda: ours.recv(65536), b""))
    export_header(received.decode("utf-8"))


def test_an_export_to_a_fifo_or_a_character_device_is_written_in_place(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the export's open does not wait
    try:
        result = run_awb(workspace, "inventory", "export", "-o", "pipe")
        assert result.returncode == 0, result.stderr
        export_header(os.read(reader, 65536).decode("utf-8"))
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    for device in ("/dev/null", "/dev/zero"):
        result = run_awb(workspace, "inventory", "export", "-o", device)
        assert result.returncode == 0, result.stderr
        assert stat.S_ISCHR(Path(device).stat().st_mode)


def test_an_export_to_a_descriptor_that_is_not_open_is_one_error_line(workspace: Path) -> None:
    line = assert_one_error_line(run_awb(workspace, "inventory", "export", "-o", "/dev/fd/9"), "usage_error")
    assert line.endswith("cannot write /dev/fd/9: descriptor 9 is not open")


def test_an_export_to_a_block_device_is_refused(workspace: Path) -> None:
    disk = workspace / "disk"
    try:
        # Block major 240 is reserved for local use: no driver answers it, so nothing could be written.
        os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(240, 0))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    line = assert_one_error_line(run_awb(workspace, "inventory", "export", "-o", "disk"), "usage_error")
    assert "it is a block device" in line


def test_an_export_through_a_descriptor_open_on_the_inventory_is_refused(workspace: Path) -> None:
    # `-o /dev/stdout 1<>.awb/inventory.db`: the descriptor is written through, so it is checked like a path.
    inventory = workspace / ".awb" / "inventory.db"
    kept = inventory.read_bytes()
    with inventory.open("r+b") as opened:
        result = subprocess.run(
            [AWB, "inventory", "export", "-o", "/dev/stdout"],
            cwd=workspace,
            env=clean_env(),
            stdout=opened,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 2
    assert "/dev/stdout is one of the workspace's own files" in result.stderr
    assert inventory.read_bytes() == kept
