"""The CLI's output: tables and lines shown literally, and its reader leaving (`| head -1`) told from any
other broken pipe."""

from __future__ import annotations

import os

import pytest

from awb.cli import output


def test_stdout_is_closed_only_when_its_reader_went_away(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as stdout:
        monkeypatch.setattr("sys.stdout", stdout)
        assert not output.stdout_closed()
        os.close(read_end)
        assert output.stdout_closed()


def test_every_table_cell_and_title_is_shown_literally_with_escape_sequences_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output.table(
        "found [bold]x[/bold]", ["[i]column[/i]"], [["pip install 'agent-workbench[javascript]'"], ["\x1b[2Jgone"]]
    )
    shown = capsys.readouterr().out
    assert "found [bold]x[/bold]" in shown and "[i]column[/i]" in shown
    assert "pip install 'agent-workbench[javascript]'" in shown
    assert "\\x1b[2Jgone" in shown and "\x1b" not in shown
