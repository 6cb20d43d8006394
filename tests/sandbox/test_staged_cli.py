"""`awb staged`: list, show, apply, discard through the Typer app."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from awb.cli.staged import staged_app
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import staging
from sandbox_support import granted_tool


def _setup(tmp_path: Path) -> tuple[Path, Path, int]:
    config = tmp_path / "awb.config.json"
    config.write_text(json.dumps({"inventory_path": "inv.db", "sandbox": {"grants": {"tool_x": ["out"]}}}))
    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(granted_tool("tool_x", tmp_path / "out"))
    target = tmp_path / "out" / "file.txt"
    staged_id = store.stage_write("tool_x", str(target), "staged content", datetime.now(UTC), call_id="call_1")
    store.close()
    return config, target, staged_id


def test_list_show_apply_and_refused_second_apply(tmp_path: Path) -> None:
    config, target, staged_id = _setup(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(staged_app, ["list", "--config", str(config), "--json"])
    assert listed.exit_code == 0, listed.output
    assert [w["id"] for w in json.loads(listed.output)["writes"]] == [staged_id]
    shown = runner.invoke(staged_app, ["show", str(staged_id), "--config", str(config)])
    assert "staged content" in shown.output
    applied = runner.invoke(staged_app, ["apply", str(staged_id), "--config", str(config)])
    assert applied.exit_code == 0, applied.output
    assert target.read_text() == "staged content"
    again = runner.invoke(staged_app, ["apply", str(staged_id), "--config", str(config), "--json"])
    assert again.exit_code != 0
    assert json.loads(again.output)["error"]["code"] == "invalid_params"


def test_discard_writes_nothing(tmp_path: Path) -> None:
    config, target, staged_id = _setup(tmp_path)
    result = CliRunner().invoke(staged_app, ["discard", str(staged_id), "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "discarded" in result.output
    assert not target.exists()
    listed = CliRunner().invoke(staged_app, ["list", "--config", str(config)])
    assert "no pending staged writes" in listed.output


def test_list_and_show_name_the_call_that_staged_the_write(tmp_path: Path) -> None:
    config, _, staged_id = _setup(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(staged_app, ["list", "--config", str(config), "--json"])
    assert [w["call_id"] for w in json.loads(listed.output)["writes"]] == ["call_1"]
    shown = runner.invoke(staged_app, ["show", str(staged_id), "--config", str(config), "--json"])
    assert json.loads(shown.output)["call_id"] == "call_1"
    for command in (["list"], ["show", str(staged_id)]):
        result = runner.invoke(staged_app, [*command, "--config", str(config)], terminal_width=200)
        assert result.exit_code == 0, result.output
        assert "call_1" in result.output


HOSTILE_PATHS = [
    "[red]fake[/red] [link=http://x]click[/link]",
    "[/]",
    "\x1b[2J\x1b[31mcleared",
    "name\u202etxt.exe",
    "bell\x07and\x9bcsi",
    "back\\x1bslash",
]


def _stage_hostile(tmp_path: Path) -> tuple[Path, list[int]]:
    config = tmp_path / "awb.config.json"
    config.write_text(json.dumps({"inventory_path": "inv.db", "sandbox": {"grants": {"tool_[bold]x": ["out"]}}}))
    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(granted_tool("tool_[bold]x", tmp_path / "out"))
    ids = [
        store.stage_write(
            "tool_[bold]x",
            str(tmp_path / "out" / name),
            "line one\n\x1b]0;pwned\x07[blink]content[/blink]\x1b[8m",
            datetime.now(UTC),
            call_id="call_\x1b[1m",
        )
        for name in HOSTILE_PATHS
    ]
    store.close()
    return config, ids


def test_list_and_show_print_hostile_paths_and_contents_literally_and_escaped(tmp_path: Path) -> None:
    config, ids = _stage_hostile(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(staged_app, ["list", "--config", str(config)], env={"COLUMNS": "400"})
    assert listed.exit_code == 0, listed.output
    outputs = [listed.output]
    for staged_id in ids:
        shown = runner.invoke(staged_app, ["show", str(staged_id), "--config", str(config)], env={"COLUMNS": "400"})
        assert shown.exit_code == 0, shown.output
        assert "[blink]content[/blink]" in shown.output
        assert "⟨U+001B⟩]0;pwned⟨U+0007⟩" in shown.output
        assert "line one\n" in shown.output
        assert "Hidden characters. 3 invisible or control characters" in shown.output
        outputs.append(shown.output)
    for output in outputs:
        assert "\x1b" not in output and "\x07" not in output and "\x9b" not in output and "\u202e" not in output
    shown_all = "".join(outputs)
    assert "[red]fake[/red]" in shown_all
    assert "\\x1b[2J" in shown_all and "\\u202e" in shown_all
    assert "back\\\\x1bslash" in shown_all


def test_applying_a_hostile_path_reports_it_escaped(tmp_path: Path) -> None:
    config, ids = _stage_hostile(tmp_path)
    result = CliRunner().invoke(staged_app, ["apply", str(ids[2]), "--config", str(config)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b[2J" in result.output
    assert (tmp_path / "out" / HOSTILE_PATHS[2]).read_text().startswith("line one")


def test_apply_outside_the_grants_is_refused_without_force_and_done_with_it(tmp_path: Path) -> None:
    config, _, _ = _setup(tmp_path)
    store = SQLiteStore(tmp_path / "inv.db")
    outside = tmp_path / "elsewhere.txt"
    moved = store.stage_write("tool_x", str(outside), "moved", datetime.now(UTC), call_id="call_2")
    store.close()
    runner = CliRunner()
    refused = runner.invoke(staged_app, ["apply", str(moved), "--config", str(config), "--json"])
    assert refused.exit_code != 0
    assert json.loads(refused.output)["error"]["code"] == "sandbox_violation"
    assert not outside.exists()
    forced = runner.invoke(staged_app, ["apply", str(moved), "--force", "--config", str(config)])
    assert forced.exit_code == 0, forced.output
    assert outside.read_text() == "moved"


def test_apply_onto_the_config_file_is_refused_even_with_force(tmp_path: Path) -> None:
    config, _, _ = _setup(tmp_path)
    before = config.read_text()
    store = SQLiteStore(tmp_path / "inv.db")
    staged_id = store.stage_write("tool_x", str(config), "{}", datetime.now(UTC), call_id="call_3")
    store.close()
    result = CliRunner().invoke(staged_app, ["apply", str(staged_id), "--force", "--config", str(config), "--json"])
    assert result.exit_code != 0
    assert json.loads(result.output)["error"]["code"] == "sandbox_violation"
    assert config.read_text() == before


def test_ids_past_the_databases_integers_and_unknown_statuses_are_invalid_params(tmp_path: Path) -> None:
    config, target, staged_id = _setup(tmp_path)
    runner = CliRunner()
    huge = str(2**63)
    for command in (["show", huge], ["apply", huge], ["discard", huge], ["list", "--status", "bogus"]):
        result = runner.invoke(staged_app, [*command, "--config", str(config), "--json"])
        assert result.exit_code == 2, (command, result.output)
        assert json.loads(result.output)["error"]["code"] == "invalid_params", command
    assert not target.exists()
    listed = runner.invoke(staged_app, ["list", "--config", str(config), "--json"])
    assert [w["id"] for w in json.loads(listed.output)["writes"]] == [staged_id]


def test_show_prints_the_content_as_written_with_hidden_characters_marked(tmp_path: Path) -> None:
    config = tmp_path / "awb.config.json"
    config.write_text(json.dumps({"inventory_path": "inv.db", "sandbox": {"grants": {"tool_x": ["out"]}}}))
    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(granted_tool("tool_x", tmp_path / "out"))
    content = "C:\\temp\\new été 漢字 🙂\nname\u202etxt.exe\u200b\r\n\\u202e stays text\n"
    staged_id = store.stage_write("tool_x", str(tmp_path / "out" / "f.txt"), content, datetime.now(UTC), call_id="c1")
    plain_id = store.stage_write("tool_x", str(tmp_path / "out" / "g.txt"), "a\\b\n", datetime.now(UTC), call_id="c2")
    store.close()
    runner = CliRunner()
    shown = runner.invoke(staged_app, ["show", str(staged_id), "--config", str(config)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert "\u202e" not in shown.output and "\u200b" not in shown.output and "\r" not in shown.output
    # One backslash for each written, letters as written, each hidden character a mark as in tool code.
    body = shown.output.split("-" * 40 + "\n", 1)[1]
    warning, marked = body.split("\n", 1)
    assert marked == "C:\\temp\\new été 漢字 🙂\nname⟨U+202E⟩txt.exe⟨U+200B⟩⟨U+000D⟩\n\\u202e stays text\n\n"
    assert warning == (
        "Hidden characters. 3 invisible or control characters, shown as ⟨U+…⟩ marks: "
        "U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, U+000D control."
    )
    clean = runner.invoke(staged_app, ["show", str(plain_id), "--config", str(config)], env={"COLUMNS": "400"})
    assert clean.output.endswith("-" * 40 + "\na\\b\n\n") and "Hidden characters" not in clean.output


def test_list_without_limit_shows_one_page_and_how_to_get_the_next(tmp_path: Path) -> None:
    config, _, first = _setup(tmp_path)
    store = SQLiteStore(tmp_path / "inv.db")
    now = datetime.now(UTC)
    ids = [first] + [
        store.stage_write("tool_x", str(tmp_path / "out" / f"f{n}.txt"), "x", now, call_id=f"call_{n}")
        for n in range(staging.PAGE + 4)
    ]
    store.close()
    runner = CliRunner()
    shown = runner.invoke(staged_app, ["list", "--config", str(config)], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert f"awb staged list --after {ids[staging.PAGE - 1]}" in shown.stderr
    assert f"f{staging.PAGE - 2}.txt" in shown.stdout and f"f{staging.PAGE - 1}.txt" not in shown.stdout
    last = runner.invoke(staged_app, ["list", "--config", str(config), "--after", str(ids[-2])], terminal_width=200)
    assert "--after" not in last.stderr and f"f{staging.PAGE + 3}.txt" in last.stdout
    page = json.loads(runner.invoke(staged_app, ["list", "--config", str(config), "--json"]).stdout)
    assert [w["id"] for w in page["writes"]] == ids[: staging.PAGE]
    assert page["count"] == staging.PAGE and page["next_after"] == ids[staging.PAGE - 1]
    assert all("content" not in w for w in page["writes"])
    rest = runner.invoke(staged_app, ["list", "--config", str(config), "--json", "--after", str(page["next_after"])])
    following = json.loads(rest.stdout)
    assert [w["id"] for w in following["writes"]] == ids[staging.PAGE :]
    assert following["count"] == 5 and following["next_after"] is None
    widest = runner.invoke(staged_app, ["list", "--config", str(config), "--json", "--limit", str(staging.MAX_PAGE)])
    assert json.loads(widest.stdout)["count"] == staging.PAGE + 5
