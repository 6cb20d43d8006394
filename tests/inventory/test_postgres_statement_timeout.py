"""`inventory_statement_timeout_seconds`: the configured `statement_timeout` is what every pooled connection
runs under, what bounds a request's wait for the database (with the pool wait), and a URL's own setting
still wins."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from awb.config import Config
from awb.errors import AwbError
from awb.inventory.open import open_store
from awb.inventory.postgres import PostgresStore


def _show(store: PostgresStore) -> str:
    with store.connection() as conn:
        return str(conn.execute("SHOW statement_timeout").fetchone()[0])


def test_the_configured_statement_timeout_bounds_every_pooled_statement(clean_pg_url: str, tmp_path: Path) -> None:
    config = Config(
        inventory_path=tmp_path / "unused.db",
        inventory_url=clean_pg_url,
        inventory_pool_wait_seconds=2,
        inventory_statement_timeout_seconds=0.4,
    )
    store = open_store(config)
    try:
        assert isinstance(store, PostgresStore)
        assert _show(store) == "400ms"
        assert store.answer_within == pytest.approx(2.4)
        started = time.monotonic()
        with pytest.raises(AwbError) as raised, store.connection() as conn:
            conn.execute("SELECT pg_sleep(60)")
        # Ended by the 0.4 s timeout: not by the 10 s default, nor the 60 s sleep (the server's own timers:
        # neither can end sooner), with 7 s to spare for a loaded machine.
        assert time.monotonic() - started < 8
        assert raised.value.code == "unavailable"
        assert "statement timeout" in raised.value.message
    finally:
        store.close()


def test_the_default_is_ten_seconds_and_a_urls_own_setting_wins(clean_pg_url: str, tmp_path: Path) -> None:
    store = open_store(Config(inventory_path=tmp_path / "unused.db", inventory_url=clean_pg_url))
    try:
        assert _show(store) == "10s"
        assert store.answer_within == pytest.approx(20)
    finally:
        store.close()
    joiner = "&" if "?" in clean_pg_url else "?"
    own = f"{clean_pg_url}{joiner}options=-c%20statement_timeout%3D1500"
    store = open_store(
        Config(inventory_path=tmp_path / "unused.db", inventory_url=own, inventory_statement_timeout_seconds=0.4)
    )
    try:
        assert _show(store) == "1500ms"
    finally:
        store.close()


def test_the_setting_is_bounded_and_read_from_the_environment() -> None:
    from pydantic import ValidationError

    from awb.config_env import env_overrides

    assert env_overrides(Config, {"AWB_INVENTORY_STATEMENT_TIMEOUT_SECONDS": "2.5"}) == {
        "inventory_statement_timeout_seconds": "2.5"
    }

    with pytest.raises(ValidationError):
        Config(inventory_statement_timeout_seconds=0)
    with pytest.raises(ValidationError):
        Config(inventory_statement_timeout_seconds=301)
