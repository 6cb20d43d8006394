"""Fixtures for the store suite: every contract test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from awb.config import Config
from awb.inventory.store import Store


@pytest.fixture(params=["sqlite", "postgres"])
def store_config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """A config whose inventory is an empty SQLite file or an empty PostgreSQL database."""
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "awb.pid")
    if request.param == "postgres":
        url = request.getfixturevalue("clean_pg_url")
        config = config.model_copy(update={"inventory_url": url})
    return config


@pytest.fixture
def store(store_config: Config) -> Iterator[Store]:
    from awb.inventory.open import open_store

    opened = open_store(store_config)
    try:
        yield opened
    finally:
        opened.close()
