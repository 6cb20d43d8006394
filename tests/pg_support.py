"""A throw-away PostgreSQL database for the test session (a plain module, imported by conftests).
Each pytest-xdist worker is a session of its own, so each gets its own database.

The server is the machine's PostgreSQL (POSTGRES_TEST_URL, default the local trust-auth one).
Unreachable, the PostgreSQL tests skip on a developer's machine and fail in CI (CI=true), where the
server is part of the machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

ADMIN_URL = os.environ.get("POSTGRES_TEST_URL", "postgresql://postgres@127.0.0.1:5432/test")
#: Tables a test may have written; emptied before each test that asks for a clean database.
TABLES = (
    "tool_vectors",
    "calls",
    "staged_writes",
    "tool_versions",
    "tools",
    "workbench_events",
    "blueprint_messages",
    "blueprint_run_logs",
    "panel_sign_outs",
)


def database_url(name: str) -> str:
    return urlunsplit(urlsplit(ADMIN_URL)._replace(path="/" + name))


def create_database() -> Iterator[str]:
    """CREATE DATABASE awb_test_<random>; yield its URL; DROP it afterwards."""
    import psycopg

    name = "awb_test_" + uuid.uuid4().hex[:12]
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"PostgreSQL is required in CI and unreachable at {ADMIN_URL}: {exc}")
        pytest.skip(f"no PostgreSQL at {ADMIN_URL}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def empty(url: str) -> None:
    """Remove every row a test left (the schema stays), so each test starts from an empty inventory."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('tools')").fetchone()
        if exists is not None and exists[0] is not None:
            conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY")
            conn.execute("UPDATE awb_live_tools SET count = 0")  # TRUNCATE fires no row trigger


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh database for this test session, dropped at its end."""
    yield from create_database()


@pytest.fixture
def clean_pg_url(pg_url: str) -> str:
    """The session's database, emptied of every row (schema kept)."""
    empty(pg_url)
    return pg_url
