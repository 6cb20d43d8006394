"""A PostgreSQL inventory that stops answering (hung, not down: the TCP peer goes silent) while the HTTP
server runs: requests that need no database go on being answered at once, every request that needs it
fails with `unavailable` within the documented bound, and once the database answers again so do requests.
A pool whose every connection is in use (the database answering) is said to be `busy`, not down.

The database is hung by a loopback proxy (`pg_proxy`) the test freezes (awb's connections to it stay open
and their bytes wait, as with a host that answers nothing)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import anyio.to_thread
import httpx2
import pytest
from http_support import serving
from mcp import Client, MCPError

from awb.config import Config
from awb.inventory import postgres_pool
from awb.inventory.postgres import PostgresStore
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from pg_proxy import pg_proxy
from support import add_tool

pytestmark = pytest.mark.anyio

#: The pool wait and statement timeout these tests use: a store-bound request fails within their sum.
POOL_WAIT = 1.0
STATEMENT = 1.0
BOUND = POOL_WAIT + STATEMENT
#: Room for a loaded machine on top of a bound these tests check; each regression they tell apart from
#: the fixed code takes `HUNG` seconds (a loop or request waiting for the database) or 10 (a pool's
#: default wait), never sooner.
SLACK = 5.0
#: How long the database stays hung unless a test thaws it first: a server whose event loop waits on it
#: is held that long.
HUNG = 60.0
#: How long a request that needs no database may take while the database is hung (under 0.2 s here).
ANSWER = 10.0


def probe_until(url: str, done: threading.Event) -> float:
    """GET `url` again and again until `done` (HUNG s at most), each within `ANSWER` seconds (a timeout error
    past them); the seconds the slowest took."""
    slowest = 0.0
    deadline = time.monotonic() + HUNG
    with httpx2.Client(timeout=ANSWER) as http:
        while not done.wait(0.05) and time.monotonic() < deadline:
            started = time.monotonic()
            assert http.get(url).status_code == 404
            slowest = max(slowest, time.monotonic() - started)
    return slowest


@pytest.fixture
def short_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_pool, "STATEMENT_SECONDS", STATEMENT, raising=False)


@pytest.mark.usefixtures("short_statements")
async def test_a_hung_inventory_holds_up_no_other_request_and_its_own_fail_unavailable_in_bound(
    tmp_path: Path, clean_pg_url: str
) -> None:
    with pg_proxy(clean_pg_url) as (proxied, proxy):
        config = Config(
            inventory_path=tmp_path / "unused.db",
            inventory_url=proxied,
            inventory_pool_wait_seconds=POOL_WAIT,
            inventory_statement_timeout_seconds=STATEMENT,
            host="127.0.0.1",
        )
        async with Workbench(config) as workbench, serving(workbench, config) as running:
            mcp_url = f"{running.url}/mcp"
            async with Client(mcp_url, cache=None) as caller, Client(mcp_url, cache=None) as lister:
                with anyio.fail_after(30):
                    assert (await call(caller, "awb_craft", add_tool("adder")))["name"] == "adder"
                    assert (await call(caller, "awb_call", {"name": "adder", "params": {"a": 1, "b": 2}}))[
                        "result"
                    ] == 3
                proxy.freeze(at_most=HUNG)
                outcome: dict[str, object] = {}
                answered = threading.Event()

                async def store_bound() -> None:
                    started = time.monotonic()
                    try:
                        # Its record is written to the database: the call waits for it.
                        params = {"name": "adder", "params": {"a": 2, "b": 2}}
                        outcome["reply"] = await call(caller, "awb_call", params)
                        outcome["seconds"] = time.monotonic() - started
                    finally:
                        answered.set()

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(store_bound)
                    # A request the server answers by itself, on its event loop (this server serves MCP only),
                    # asked again and again from a thread while the call waits: this test shares the server's
                    # loop, where no deadline fires while the loop itself waits.
                    slowest = await anyio.to_thread.run_sync(probe_until, f"{running.url}/health", answered)
                assert slowest < ANSWER
                assert proxy.holding.is_set()  # the database was asked, and did not answer
                reply = outcome["reply"]
                assert isinstance(reply, dict) and reply.get("is_error"), reply
                assert reply["error"]["code"] == "unavailable"
                assert "did not answer within" in reply["error"]["message"]
                assert isinstance(outcome["seconds"], float) and outcome["seconds"] < BOUND + SLACK
                # tools/list reads the equipped set from the store: it waits, bounded, and says why.
                with anyio.fail_after(BOUND + SLACK), pytest.raises(MCPError) as raised:
                    await lister.list_tools()
                assert raised.value.data["error"]["code"] == "unavailable"

                proxy.thaw()
                # Taken for down meanwhile, the database is asked again at most twice a second: the
                # requests in between still fail at once; then they succeed.
                with anyio.fail_after(15):
                    again = await call(caller, "awb_call", {"name": "adder", "params": {"a": 3, "b": 4}})
                    while again.get("is_error"):
                        assert again["error"]["code"] == "unavailable", again
                        await anyio.sleep(0.1)
                        again = await call(caller, "awb_call", {"name": "adder", "params": {"a": 3, "b": 4}})
                assert again.get("result") == 7, again


async def test_a_request_finding_every_pooled_connection_in_use_fails_busy_within_the_pool_wait(
    tmp_path: Path, clean_pg_url: str
) -> None:
    store = PostgresStore(clean_pg_url, pool_size=1, pool_wait=POOL_WAIT)
    workbench = Workbench(Config(inventory_path=tmp_path / "unused.db"), store=store)
    async with workbench, Client(McpFace(workbench).server) as client:
        with store.connection():  # the only connection, lent to a slow request; the database answers
            started = time.monotonic()
            with anyio.fail_after(30):
                listed = await call(client, "awb_list", {})
            waited = time.monotonic() - started
        assert listed["error"]["code"] == "busy"
        assert "pool is exhausted" in listed["error"]["message"]
        assert waited < POOL_WAIT + SLACK  # its own wait, not the pool's default 10 s
        with anyio.fail_after(5):  # given back: served at once, the database never taken for down
            assert (await call(client, "awb_list", {}))["tools"] == []
