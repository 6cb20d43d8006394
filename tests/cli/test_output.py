"""How the CLI tells its own output's reader leaving (`| head -1`, quiet) from any other broken pipe."""

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
