"""Tool code in the terminal (`awb inventory inspect`): as written, each character that does not show as itself
a styled mark, after a warning line that counts them."""

from __future__ import annotations

from pathlib import Path

import pytest

from awb.cli.safe_text import MARK_STYLE, code
from awb.config import load_config
from awb.workbench import Workbench
from clitools import clean_env, run_awb

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
