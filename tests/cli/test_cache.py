"""`awb cache status|clear` and the `awb doctor` row of the tool vector cache: where it is, what it holds and
for which model, cleared only once a person said so, and a damaged file a warning that says what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from awb.config import Config, SearchConfig
from awb.search.vector_cache import VectorCache
from clitools import AWB, clean_env, run_awb

MODEL = "all-MiniLM-L6-v2/5f3a/onnxruntime 1.20.1/256/folded"


def workspace(tmp_path: Path, entries: int = 300) -> Path:
    """A workspace whose config puts the cache in `.awb/`, holding `entries` vectors of MODEL."""
    (tmp_path / "awb.config.json").write_text(json.dumps({"search": {"vector_cache": ".awb/vectors.sqlite3"}}))
    path = tmp_path / ".awb" / "vectors.sqlite3"
    if entries:
        cache = VectorCache(path)
        cache.put_many(MODEL, [(i.to_bytes(32, "little"), b"\x00" * 1536) for i in range(entries)])
        cache.close()
    return path


def doctor_row(tmp_path: Path) -> dict[str, object]:
    from awb.cli.cache import vector_cache_check
    from awb.config import load_config

    return vector_cache_check(load_config(tmp_path / "awb.config.json"))


def test_doctor_names_the_cache_its_entries_size_and_model(tmp_path: Path) -> None:
    path = workspace(tmp_path)
    result = run_awb(tmp_path, "doctor", "--quick", "--json")
    row = next(c for c in json.loads(result.stdout)["checks"] if c["check"] == "tool vector cache")
    assert row["ok"] and not row["warning"]
    assert row["detail"].startswith(f"{path}: 300 entries, 0.") and " MB (" in row["detail"]
    assert row["detail"].endswith(f"(at most 10000); keyed to {MODEL} (300)")


def test_doctor_says_where_the_cache_will_be_and_when_it_is_off(tmp_path: Path) -> None:
    path = workspace(tmp_path, entries=0)
    assert doctor_row(tmp_path)["detail"] == f"{path}: none yet (`awb plan` makes it)"
    off = Config(search=SearchConfig(vector_cache=path, vector_cache_entries=0))
    from awb.cli.cache import vector_cache_check

    assert vector_cache_check(off)["detail"] == f"off (search.vector_cache_entries is 0); {path}: none yet"


def test_a_damaged_or_unreadable_cache_is_a_doctor_warning_that_says_what_to_do(tmp_path: Path) -> None:
    path = workspace(tmp_path, entries=0)
    path.parent.mkdir()
    path.write_bytes(b"this is no database " * 100)
    row = doctor_row(tmp_path)
    assert row["ok"] and row["warning"]  # a planner goes on without it: no failed doctor for a cache
    assert "not a database" in str(row["detail"]) and "`awb cache clear` removes it" in str(row["detail"])
    path.unlink()
    path.mkdir()  # unreadable as a database by anyone, root included
    row = doctor_row(tmp_path)
    assert row["ok"] and row["warning"] and "set search.vector_cache" in str(row["detail"])


def test_the_doctor_row_loads_neither_numpy_nor_the_model_and_writes_nothing(tmp_path: Path) -> None:
    path = workspace(tmp_path)
    probe = (
        "import sys\nfrom awb.cli.cache import vector_cache_check\nfrom awb.config import load_config\n"
        "row = vector_cache_check(load_config())\nassert 'keyed to' in row['detail'], row\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'onnxruntime', 'tokenizers')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert sorted(p.name for p in path.parent.iterdir()) == ["vectors.sqlite3"]


def test_cache_status_json_says_what_the_cache_holds(tmp_path: Path) -> None:
    path = workspace(tmp_path)
    result = run_awb(tmp_path, "cache", "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["path"] == str(path) and status["entries"] == 300 and status["models"] == {MODEL: 300}
    assert status["size_bytes"] > 0 and status["problem"] is None


def test_cache_clear_without_a_terminal_refuses_unless_told_yes(tmp_path: Path) -> None:
    path = workspace(tmp_path)
    refused = run_awb(tmp_path, "cache", "clear")
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    assert json.loads(run_awb(tmp_path, "cache", "status", "--json").stdout)["entries"] == 300
    done = run_awb(tmp_path, "cache", "clear", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["path"] == str(path) and report["cleared"] == 300 and report["freed_bytes"] > 0
    assert json.loads(run_awb(tmp_path, "cache", "status", "--json").stdout)["entries"] == 0
    again = run_awb(tmp_path, "cache", "clear")  # empty: nothing to ask about
    assert again.returncode == 0 and "nothing to clear" in again.stdout


def test_cache_clear_asks_a_person_first_and_keeps_the_cache_on_no(tmp_path: Path) -> None:
    workspace(tmp_path)

    def answered(answer: str) -> subprocess.CompletedProcess[str]:
        person, terminal = os.openpty()
        try:
            os.write(person, answer.encode())
            return subprocess.run(
                [AWB, "cache", "clear", "--json"],
                env=clean_env(),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=terminal,
            )
        finally:
            os.close(terminal)
            os.close(person)

    kept = answered("n\n")
    assert kept.returncode == 1 and kept.stdout == ""
    assert "300 entries" in kept.stderr and "clear the tool vector cache?" in kept.stderr
    assert json.loads(run_awb(tmp_path, "cache", "status", "--json").stdout)["entries"] == 300
    done = answered("y\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cleared"] == 300  # stdout is the JSON result alone


def test_cache_clear_removes_a_damaged_cache(tmp_path: Path) -> None:
    path = workspace(tmp_path, entries=0)
    path.parent.mkdir()
    path.write_bytes(b"this is no database " * 100)
    done = run_awb(tmp_path, "cache", "clear", "--yes")
    assert done.returncode == 0, done.stderr
    assert "removed the damaged cache" in done.stdout and not path.exists()


def test_cache_clear_says_why_when_the_cache_cannot_be_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder on the way this user may not enter (root enters every one, so the look is made to say it).
    import awb.search.vector_cache_upkeep as upkeep
    from awb.cli.cache import clear_command
    from awb.search.vector_cache_upkeep import CacheContents

    path = workspace(tmp_path, entries=0)
    problem = f"cannot reach {path} (Permission denied): check the permissions of its folder"
    monkeypatch.setattr(upkeep, "look", lambda where: CacheContents(where, problem=problem))
    with pytest.raises(typer.Exit) as ended:
        clear_command(config_path=tmp_path / "awb.config.json", yes=True, as_json=True)
    assert ended.value.exit_code == 1
    assert json.loads(capsys.readouterr().err)["error"] == {"code": "unavailable", "message": problem, "details": {}}
