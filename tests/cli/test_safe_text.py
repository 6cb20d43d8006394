"""Tool code in the terminal (`awb inventory inspect`): as written, each character that does not show as itself
a styled mark, after a warning line that counts them."""

from __future__ import annotations

from pathlib import Path

import pytest

from awb.cli.safe_text import MARK_STYLE, code
from awb.config import load_config
from awb.install_hint import install_hint
from awb.workbench import Workbench
from clitools import assert_one_error_line, clean_env, run_awb

pytestmark = pytest.mark.anyio

TROJAN = 'def run(params):\n    folder = "C:\\\\temp\\\\été"\n    # \u202e} \u2066\x1b[2J\n    return folder\n'


def test_a_mark_is_styled_apart_from_the_code_around_it() -> None:
    shown = code("a\u202eb '⟨U+0000⟩'")
    assert shown.plain == "a⟨U+202E⟩b '⟨U+0000⟩'"
    assert [(span.start, span.end, span.style) for span in shown.spans] == [(1, 9, MARK_STYLE)]


async def test_inventory_inspect_marks_hidden_characters_in_the_code_and_warns(tmp_path: Path) -> None:
    env = clean_env(AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"), AWB_PID_FILE=str(tmp_path / "awb.pid"))
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(
            {
                "name": "folder",
                "description": "Name the folder",
                "code": TROJAN,
                "examples": [{"params": {}, "expected": "C:\\temp\\été"}],
            }
        )
    result = run_awb(tmp_path, "inventory", "inspect", "folder", env=env)
    assert result.returncode == 0, result.stderr
    for raw in ("\u202e", "\u2066", "\x1b"):
        assert raw not in result.stdout
    assert "Hidden characters. 3 invisible or control characters" in result.stdout
    assert "    # ⟨U+202E⟩} ⟨U+2066⟩⟨U+001B⟩[2J\n" in result.stdout
    assert '    folder = "C:\\\\temp\\\\été"\n' in result.stdout


async def test_inventory_tables_show_descriptions_tags_and_schemas_literally(tmp_path: Path) -> None:
    # Tool-written text is never console markup: `[a-z]` stays, a bidi override is escaped.
    env = clean_env(AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"), AWB_PID_FILE=str(tmp_path / "awb.pid"))
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^[a-z]+$"}}}
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(
            {
                "name": "matcher",
                "description": "Match [a-z]+ words \u202eexe.txt",
                "code": "def run(params):\n    return 1\n",
                "input_schema": schema,
                "tags": ["[bold]loud[/bold]"],
            }
        )
    inspected = run_awb(tmp_path, "inventory", "inspect", "matcher", env=env).stdout
    listed = run_awb(tmp_path, "inventory", "list", env=env).stdout
    for shown in (inspected, listed):
        assert "Match [a-z]+ words \\u202eexe.txt" in shown and "\u202e" not in shown
    assert "[bold]loud[/bold]" in inspected and '"pattern": "^[a-z]+$"' in inspected


def test_doctor_shows_an_install_hint_with_its_extra(tmp_path: Path) -> None:
    # The javascript runtime made to look uninstalled: its row says how to install it, `[javascript]` and all.
    hidden = tmp_path / "site"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['quickjs'] = None\n")
    result = run_awb(tmp_path, "doctor", "--quick", env=clean_env(PYTHONPATH=str(hidden)))
    # Said as this copy of awb was installed (from this clone, in the tests): `[javascript]` and all.
    assert install_hint("javascript") in result.stdout, result.stdout
    assert "[javascript]'" in install_hint("javascript")


def test_messages_show_brackets_literally_and_escape_sequences_escaped(tmp_path: Path) -> None:
    workspace = "ws [bold]loud[/bold]"
    created = run_awb(tmp_path, "init", workspace)
    assert created.returncode == 0, created.stderr
    assert f"created {workspace}/awb.config.json" in created.stdout
    stopped = run_awb(tmp_path / workspace, "stop")
    assert "[bold]loud[/bold]/.awb/awb.pid" in stopped.stdout
    refused = run_awb(tmp_path, "inventory", "list", "--config", "\x1b[2Jgone.json")
    assert "config file not found: \\x1b[2Jgone.json" in assert_one_error_line(refused, "config_invalid")
    assert "\x1b" not in refused.stderr


async def test_inspect_and_list_mark_fillers_and_odd_spaces_and_show_emoji_as_written(tmp_path: Path) -> None:
    env = clean_env(
        AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"), AWB_PID_FILE=str(tmp_path / "awb.pid"), COLUMNS="400"
    )
    async with Workbench(load_config(None, environ=env)) as workbench:
        await workbench.craft(
            {
                "name": "greeter",
                "description": "Greets 👋🏽 with\u3000a\u00a0gap",
                "code": 'def run(params):\n    \u3164 = "❤\ufe0f"\n    return \u3164\n',
                "tags": ["👨\u200d👩\u200d👧"],
            }
        )
    inspected = run_awb(tmp_path, "inventory", "inspect", "greeter", env=env).stdout
    listed = run_awb(tmp_path, "inventory", "list", env=env).stdout
    assert "Hidden characters. 2 invisible or control characters" in inspected
    assert "U+3164 HANGUL FILLER (2)" in inspected
    assert '    ⟨U+3164⟩ = "❤\ufe0f"\n    return ⟨U+3164⟩\n' in inspected
    for shown in (inspected, listed):
        assert "Greets 👋🏽 with\\u3000a\\xa0gap" in shown
        assert "\u3164" not in shown and "\u3000" not in shown and "\u00a0" not in shown
    assert "👨\u200d👩\u200d👧" in inspected
