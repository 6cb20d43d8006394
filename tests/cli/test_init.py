"""`awb init`, run as the real executable: it checks everything first, then writes, so a failed init
leaves nothing that stops the next one."""

from __future__ import annotations

from pathlib import Path

from clitools import assert_one_error_line, clean_env, run_awb, snapshot


def _initialised(workspace: Path) -> None:
    assert (workspace / "awb.config.json").is_file()
    assert (workspace / "tools").is_dir()
    assert (workspace / ".awb" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_an_init_whose_config_would_not_load_writes_nothing_and_the_retry_succeeds(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    failed = run_awb(tmp_path, "init", str(workspace), env=clean_env(AWB_PORT="abc"))
    assert "port" in assert_one_error_line(failed, "config_invalid")
    assert not workspace.exists()
    retried = run_awb(tmp_path, "init", str(workspace))
    assert retried.returncode == 0, retried.stderr
    _initialised(workspace)


def test_an_init_over_an_unreadable_inventory_writes_no_config_and_the_retry_succeeds(tmp_path: Path) -> None:
    inventory = tmp_path / ".awb" / "inventory.db"
    inventory.parent.mkdir()
    inventory.write_bytes(b"not a database, not even close" * 100)
    before = snapshot(tmp_path)
    failed = run_awb(tmp_path, "init")
    assert_one_error_line(failed, "inventory_unreadable")
    assert snapshot(tmp_path) == before
    inventory.unlink()
    retried = run_awb(tmp_path, "init")
    assert retried.returncode == 0, retried.stderr
    _initialised(tmp_path)


def test_an_init_into_a_file_is_one_usage_error_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a folder\n", encoding="utf-8")
    result = run_awb(tmp_path, "init", "notes.txt")
    line = assert_one_error_line(result, "usage_error")
    assert result.returncode == 2 and "notes.txt is a file, not a directory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_init_where_a_file_has_the_name_of_a_folder_it_makes_names_that_file(tmp_path: Path) -> None:
    # Before: "cannot create the workbench in .: File exists", naming neither the file nor the folder.
    (tmp_path / "tools").write_text("notes\n", encoding="utf-8")
    line = assert_one_error_line(run_awb(tmp_path, "init"), "config_invalid")
    assert line.endswith(f"cannot create the workbench in .: {tmp_path / 'tools'} is a file, not a folder")
    (tmp_path / "tools").unlink()
    retried = run_awb(tmp_path, "init")
    assert retried.returncode == 0, retried.stderr
    _initialised(tmp_path)


def test_an_init_where_a_file_is_named_awb_names_that_file(tmp_path: Path) -> None:
    (tmp_path / ".awb").write_text("", encoding="utf-8")
    line = assert_one_error_line(run_awb(tmp_path, "init"), "inventory_unreadable")
    assert line.endswith(f"{tmp_path / '.awb'} is a file, not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".awb"]
