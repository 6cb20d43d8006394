"""Shared fixtures (helpers live in support.py): a workbench on a temporary inventory with a clock that tests move by hand."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from awb.clock import ManualClock
from awb.config import Config, SearchConfig
from awb.workbench import Workbench
from pg_support import clean_pg_url, pg_url  # noqa: F401 - PostgreSQL fixtures for every folder
from support import awb_env, awb_http


@pytest.fixture(autouse=True, scope="session")
def own_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The planner keeps tool vectors in the user's cache directory: the tests keep theirs in a temporary one
    (the processes they start too)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield
    patch.undo()


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
    with awb_http(tmp_path, awb_env(tmp_path)) as base:
        yield f"{base}/mcp"
