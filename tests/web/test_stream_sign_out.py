"""An event stream lasts no longer than the sign-in it was opened with: Sign out (or the pass's expiry) ends
it at once, over the real HTTP server, and nothing that happens afterwards reaches it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from http_support import Running, serving_app

from awb.clock import ManualClock
from awb.config import Config
from awb.panel_access import PASS_SECONDS, cookie_name, issue_pass
from awb.server.http_guard import guard_http
from awb.web import create_panel
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-panel-token-0123"


@pytest.fixture
async def guarded_workbench(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Workbench]:
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=TOKEN)
    async with Workbench(config, clock=clock) as workbench:
        yield workbench


@asynccontextmanager
async def panel_server(workbench: Workbench) -> AsyncIterator[Running]:
    """The panel behind the server's guard, as `awb start --transport http` serves it, on loopback."""
    panel = create_panel(workbench)
    try:
        async with serving_app(lambda config: guard_http(panel, config), workbench.config) as running:
            yield running
    finally:
        panel.close()


async def sign_in(http: httpx.AsyncClient, running: Running) -> str:
    signed = await http.post("/login", data={"token": TOKEN}, headers={"Origin": running.url})
    assert signed.status_code == 303
    value = http.cookies.get(cookie_name(running.port))
    assert value
    return value


async def open_stream(http: httpx.AsyncClient) -> httpx.Response:
    response = await http.send(http.build_request("GET", "/events"), stream=True)
    assert response.status_code == 200
    return response


async def rest_of(response: httpx.Response) -> str:
    """What the stream still sends, until it ends."""
    return "".join([chunk async for chunk in response.aiter_text()])


async def test_signing_out_ends_the_stream_opened_with_that_sign_in_and_sends_it_nothing_more(
    guarded_workbench: Workbench,
) -> None:
    """A stream opened before Sign out kept sending every craft (names, descriptions) for up to
    STREAM_SECONDS (five minutes) after the person signed out."""
    with anyio.fail_after(60):
        async with (
            panel_server(guarded_workbench) as running,
            httpx.AsyncClient(base_url=running.url, timeout=10) as http,
        ):
            await sign_in(http, running)
            events = await open_stream(http)
            try:
                chunks = events.aiter_text()
                assert (await anext(chunks)).startswith("retry: ")
                out = await http.post("/logout", headers={"Origin": running.url})
                assert out.status_code == 303
                await guarded_workbench.craft(add_tool("secret_plans", description="What nobody should see"))
                with anyio.fail_after(15):
                    rest = "".join([chunk async for chunk in chunks])
            finally:
                await events.aclose()
    assert "secret_plans" not in rest and "nobody" not in rest
    # The page is told why, so it goes to the sign-in page rather than reconnecting.
    assert "event: signed_out" in rest


async def test_a_signed_out_pass_opens_nothing_even_where_the_browser_kept_a_copy(
    guarded_workbench: Workbench,
) -> None:
    """Sign out only asked the browser to forget its pass: a copy of it (another tab's EventSource coming
    back, a cookie someone took from a shared machine) opened every page and stream for 12 more hours."""
    with anyio.fail_after(60):
        async with (
            panel_server(guarded_workbench) as running,
            httpx.AsyncClient(base_url=running.url, timeout=10) as http,
        ):
            kept = await sign_in(http, running)
            assert (await http.post("/logout", headers={"Origin": running.url})).status_code == 303
            http.cookies.set(cookie_name(running.port), kept)
            for path in ("/", "/events"):
                page = await http.get(path)
                assert page.status_code == 303 and page.headers["location"].startswith("/login"), path


async def test_signing_out_one_browser_leaves_another_signed_in_and_its_stream_open(
    guarded_workbench: Workbench,
) -> None:
    with anyio.fail_after(60):
        async with (
            panel_server(guarded_workbench) as running,
            httpx.AsyncClient(base_url=running.url, timeout=10) as laptop,
            httpx.AsyncClient(base_url=running.url, timeout=10) as phone,
        ):
            # Signed in within the same second: each still holds a pass of its own.
            assert await sign_in(laptop, running) != await sign_in(phone, running)
            events = await open_stream(phone)
            try:
                chunks = events.aiter_text()
                assert (await anext(chunks)).startswith("retry: ")
                assert (await laptop.post("/logout", headers={"Origin": running.url})).status_code == 303
                await guarded_workbench.craft(add_tool("still_shown"))
                with anyio.fail_after(5):
                    seen = ""
                    while "still_shown" not in seen:
                        seen += await anext(chunks)
            finally:
                await events.aclose()
            assert (await phone.get("/")).status_code == 200


async def test_a_stream_ends_when_its_pass_expires(guarded_workbench: Workbench) -> None:
    """A pass that expires while its stream is open: the stream ends then, not up to five minutes later."""
    with anyio.fail_after(60):
        async with (
            panel_server(guarded_workbench) as running,
            httpx.AsyncClient(base_url=running.url, timeout=10) as http,
        ):
            # Good for 2 to 3 s more (a pass's expiry is whole seconds): time enough to open the stream.
            http.cookies.set(cookie_name(running.port), issue_pass(TOKEN, now=time.time() - PASS_SECONDS + 3))
            events = await open_stream(http)
            try:
                with anyio.fail_after(8):
                    rest = await rest_of(events)
            finally:
                await events.aclose()
    assert "event: signed_out" in rest
