"""Fixtures for the web panel tests: a workbench whose `note_writer` tool may stage writes under a
directory of the test, and the panel app over it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from awb.clock import ManualClock
from awb.config import Config
from awb.web import Panel, create_panel
from awb.workbench import Workbench
from support import ORIGIN

NOTE_WRITER: dict[str, Any] = {
    "name": "note_writer",
    "description": "Write a note to a file (staged for review)",
    "code": "def run(params):\n    write_file(params['path'], params['text'])\n    return 'staged'\n",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    },
    "tags": ["files"],
}


@pytest.fixture
def note_writer() -> dict[str, Any]:
    return dict(NOTE_WRITER)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    directory = tmp_path / "notes"
    directory.mkdir()
    return directory


@pytest.fixture
def config(tmp_path: Path, notes: Path) -> Config:
    return Config(
        inventory_path=tmp_path / "inventory.db",
        pid_file=tmp_path / "awb.pid",
        sandbox={"grants": {"note_writer": [str(notes)]}},
    )


@pytest.fixture
async def workbench(config: Config, clock: ManualClock) -> AsyncIterator[Workbench]:
    async with Workbench(config, clock=clock) as wb:
        yield wb


@pytest.fixture
async def panel(workbench: Workbench) -> AsyncIterator[Panel]:
    panel = create_panel(workbench)
    yield panel
    panel.close()


@pytest.fixture
async def client(panel: Panel) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=panel)
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as http:
        yield http
