"""Shared fixtures (helpers live in support.py): a workbench on a temporary inventory with a clock that tests move by hand."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from awb.clock import ManualClock
from awb.config import Config, SearchConfig
from awb.workbench import Workbench
from pg_support import clean_pg_url, pg_url  # noqa: F401 - PostgreSQL fixtures for every folder
from support import awb_env, free_port, wait_for_ready


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    # Text search: the default `auto` would load the embedding model wherever the extra is installed,
    # and these tests hold BM25's ranking; the hybrid tests ask for hybrid themselves.
    return Config(
        inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "awb.pid", search=SearchConfig(mode="text")
    )


@pytest.fixture
async def workbench(config: Config, clock: ManualClock) -> AsyncIterator[Workbench]:
    async with Workbench(config, clock=clock) as wb:
        yield wb


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """A real `awb start --transport http` process; yields its MCP URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--port", str(port)],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    reader: threading.Thread | None = None
    try:
        reader = wait_for_ready(process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        if reader is not None:
            reader.join(timeout=5)
        if process.stderr is not None:
            process.stderr.close()
