"""`awb staged apply|discard` on several writes at once, or on every pending one (`--all`), run as the real
executable: each write is done on its own and reported, and one that fails fails the command."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from awb.inventory.sqlite import SQLiteStore
from clitools import AWB, assert_one_error_line, clean_env, run_awb
from sandbox_support import granted_tool


def _workspace(tmp_path: Path, count: int) -> tuple[Path, list[int]]:
    """A config, and `count` pending writes of a tool granted `out/`, to out/0.txt, out/1.txt, ..."""
    (tmp_path / "awb.config.json").write_text(
        json.dumps({"inventory_path": "inv.db", "sandbox": {"grants": {"tool_x": ["out"]}}})
    )
    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(granted_tool("tool_x", tmp_path / "out"))
    ids = [
        store.stage_write("tool_x", str(tmp_path / "out" / f"{i}.txt"), f"note {i}", datetime.now(UTC), call_id="c")
        for i in range(count)
    ]
    store.close()
    return tmp_path / "out", ids


def _statuses(tmp_path: Path) -> dict[int, str]:
    listed = run_awb(tmp_path, "staged", "list", "--status", "all", "--json")
    return {write["id"]: write["status"] for write in json.loads(listed.stdout)["writes"]}


def test_discard_of_several_ids_reports_each_and_fails_when_one_did(tmp_path: Path) -> None:
    _, ids = _workspace(tmp_path, 4)
    assert run_awb(tmp_path, "staged", "discard", str(ids[3])).returncode == 0
    result = run_awb(tmp_path, "staged", "discard", str(ids[0]), str(ids[1]), "999", str(ids[3]), str(ids[1]))
    assert result.returncode == 2, result
    done = result.stdout.splitlines()
    assert done[:2] == [f"discarded #{ids[0]}: {tmp_path}/out/0.txt", f"discarded #{ids[1]}: {tmp_path}/out/1.txt"]
    assert done[2:] == []  # the count of a run that failed somewhere goes to stderr, with the errors
    assert result.stderr.splitlines() == [
        "error (invalid_params): #999: no staged write with id 999",
        f"error (invalid_params): #{ids[3]}: staged write {ids[3]} is discarded, not pending; it cannot be discarded",
        "discarded 2 of 4 staged writes; 2 failed",
    ]
    assert _statuses(tmp_path) == {ids[0]: "discarded", ids[1]: "discarded", ids[2]: "pending", ids[3]: "discarded"}


def test_apply_of_several_ids_as_json_gives_a_result_per_id(tmp_path: Path) -> None:
    out, ids = _workspace(tmp_path, 2)
    result = run_awb(tmp_path, "staged", "apply", str(ids[0]), "999", str(ids[1]), "--json")
    assert result.returncode == 2, result
    report = json.loads(result.stdout)
    assert (report["count"], report["failed"]) == (3, 1)
    assert [(r["id"], r["ok"]) for r in report["results"]] == [(ids[0], True), (999, False), (ids[1], True)]
    assert report["results"][0]["write"]["status"] == "applied" and "content" not in report["results"][0]["write"]
    assert report["results"][1]["error"]["code"] == "invalid_params"
    assert (out / "0.txt").read_text() == "note 0" and (out / "1.txt").read_text() == "note 1"


def test_one_id_is_said_as_before(tmp_path: Path) -> None:
    _, ids = _workspace(tmp_path, 1)
    said = run_awb(tmp_path, "staged", "discard", str(ids[0]), "--json")
    assert said.returncode == 0 and json.loads(said.stdout)["status"] == "discarded"
    assert "is discarded, not pending" in assert_one_error_line(
        run_awb(tmp_path, "staged", "discard", str(ids[0])), "invalid_params"
    )


def test_all_without_a_terminal_refuses_unless_yes_and_then_does_every_pending_write(tmp_path: Path) -> None:
    out, ids = _workspace(tmp_path, 3)
    assert run_awb(tmp_path, "staged", "apply", str(ids[0])).returncode == 0
    refused = run_awb(tmp_path, "staged", "discard", "--all")
    assert "no terminal to ask on; pass --yes" in assert_one_error_line(refused, "usage_error")
    assert _statuses(tmp_path) == {ids[0]: "applied", ids[1]: "pending", ids[2]: "pending"}
    done = run_awb(tmp_path, "staged", "discard", "--all", "--yes")
    assert done.returncode == 0, done.stderr
    assert "2 pending staged writes to discard" in done.stdout
    assert done.stdout.splitlines()[-1] == "discarded 2 of 2 staged writes"
    assert _statuses(tmp_path) == {ids[0]: "applied", ids[1]: "discarded", ids[2]: "discarded"}
    assert not (out / "1.txt").exists()
    again = run_awb(tmp_path, "staged", "discard", "--all", "--yes", "--json")
    assert json.loads(again.stdout) == {"results": [], "count": 0, "failed": 0}


def test_apply_all_writes_each_and_reports_the_one_outside_its_grants(tmp_path: Path) -> None:
    out, ids = _workspace(tmp_path, 2)
    store = SQLiteStore(tmp_path / "inv.db")
    outside = store.stage_write("tool_x", str(tmp_path / "elsewhere.txt"), "x", datetime.now(UTC), call_id="c")
    store.close()
    result = run_awb(tmp_path, "staged", "apply", "--all", "--yes", "--json")
    assert result.returncode == 1, result  # sandbox_violation's exit code
    report = json.loads(result.stdout)
    assert [(r["id"], r["ok"]) for r in report["results"]] == [(ids[0], True), (ids[1], True), (outside, False)]
    assert report["results"][2]["error"]["code"] == "sandbox_violation"
    assert (out / "1.txt").read_text() == "note 1" and not (tmp_path / "elsewhere.txt").exists()


def test_ids_and_all_together_or_neither_is_a_usage_error(tmp_path: Path) -> None:
    _, ids = _workspace(tmp_path, 1)
    both = run_awb(tmp_path, "staged", "discard", str(ids[0]), "--all", "--yes")
    assert "not both" in assert_one_error_line(both, "usage_error")
    neither = run_awb(tmp_path, "staged", "apply")
    assert "staged write ids, or --all" in assert_one_error_line(neither, "usage_error")
    assert _statuses(tmp_path) == {ids[0]: "pending"}


def test_all_where_there_is_no_inventory_has_nothing_to_do_and_creates_nothing(tmp_path: Path) -> None:
    said = run_awb(tmp_path, "staged", "discard", "--all", "--yes")
    assert said.returncode == 0 and said.stdout.strip() == "no pending staged writes"
    several = run_awb(tmp_path, "staged", "discard", "1", "2")
    assert "no staged writes #1, #2: there is no inventory at" in assert_one_error_line(several, "invalid_params")
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_all_as_json_asked_at_a_terminal_keeps_stdout_json(tmp_path: Path) -> None:
    # `out=$(awb staged discard --all --json)` at a terminal: the question goes to stderr, where the person
    # sees it; on stdout it was captured (the command seemed to hang) and put before the JSON.
    _, ids = _workspace(tmp_path, 2)
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [AWB, "staged", "discard", "--all", "--json"],
            cwd=tmp_path,
            env=clean_env(),
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(terminal)
        os.write(controller, b"y\n")
        stdout, stderr = process.communicate(timeout=60)
    finally:
        os.close(controller)
    assert process.returncode == 0, stderr
    assert "discard these 2 staged writes?" in stderr
    assert json.loads(stdout)["count"] == 2
    assert _statuses(tmp_path) == {ids[0]: "discarded", ids[1]: "discarded"}
