"""A sign-out of the web panel holds across real `awb start --transport http` processes: after a restart on
the same workspace (SQLite), and on another server of one PostgreSQL inventory, whose event stream opened
with that pass ends too. Each server's sign-outs were kept in its memory alone: a copy of a signed-out pass
opened every page again there until it expired (12 hours)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from awb.panel_access import cookie_name
from support import awb_env, awb_http

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-panel-token-0123"


def sign_in(client: httpx.Client, base: str) -> str:
    """Sign in to the panel at `base`; the pass its cookie holds."""
    signed = client.post(f"{base}/login", data={"token": TOKEN}, headers={"Origin": base})
    assert signed.status_code == 303, signed.text
    value = signed.cookies.get(cookie_name(port(base)))
    assert value
    client.cookies.clear()  # each request below names the pass it sends
    return value


def sign_out(client: httpx.Client, base: str, presented: str) -> None:
    out = client.post(f"{base}/logout", headers={"Origin": base, **holding(base, presented)})
    assert out.status_code == 303 and out.headers["location"].startswith("/login"), out.text


def port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def holding(base: str, presented: str) -> dict[str, str]:
    """The header of a browser holding `presented` as the pass of the server at `base`."""
    return {"Cookie": f"{cookie_name(port(base))}={presented}"}


def page_with(client: httpx.Client, base: str, presented: str) -> httpx.Response:
    """The panel's list page, asked for with `presented` as this server's pass (a copy a browser kept)."""
    return client.get(f"{base}/", headers=holding(base, presented))


def refused(answer: httpx.Response) -> bool:
    return answer.status_code == 303 and answer.headers["location"].startswith("/login")


def test_a_pass_signed_out_before_a_restart_is_refused_by_the_server_started_again(tmp_path: Path) -> None:
    env = awb_env(tmp_path, AWB_AUTH_TOKEN=TOKEN)
    with httpx.Client(timeout=30) as client:
        with awb_http(tmp_path, env) as base:
            gone, kept = sign_in(client, base), sign_in(client, base)
            sign_out(client, base, gone)
            assert refused(page_with(client, base, gone))
        with awb_http(tmp_path, env) as again:
            assert refused(page_with(client, again, gone))
            # The other sign-in, never signed out, is still good on the server started again.
            assert page_with(client, again, kept).status_code == 200


@contextmanager
def shared_server(tmp_path: Path, url: str) -> Iterator[str]:
    """One `awb start --transport http` on the PostgreSQL inventory `url`, with a token; its base URL."""
    folder = Path(tempfile.mkdtemp(prefix="server-", dir=tmp_path))
    with awb_http(folder, awb_env(folder, AWB_INVENTORY_URL=url, AWB_AUTH_TOKEN=TOKEN)) as base:
        yield base


@pytest.fixture
def two_servers(tmp_path: Path, clean_pg_url: str) -> Iterator[tuple[str, str]]:
    with ExitStack() as stack:
        yield (
            stack.enter_context(shared_server(tmp_path, clean_pg_url)),
            stack.enter_context(shared_server(tmp_path, clean_pg_url)),
        )


async def test_a_pass_signed_out_on_one_server_is_refused_by_the_other_and_ends_its_stream_there(
    two_servers: tuple[str, str],
) -> None:
    first, second = two_servers
    with httpx.Client(timeout=30) as client:
        presented, other = sign_in(client, first), sign_in(client, first)
        # A pass from one server opens the other's pages: both check it with the same token.
        assert page_with(client, second, presented).status_code == 200
    with anyio.fail_after(60):
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(30, read=60)) as streaming,
            streaming.stream("GET", f"{second}/events", headers=holding(second, presented)) as events,
        ):
            assert events.status_code == 200
            chunks = events.aiter_text()
            assert (await anext(chunks)).startswith("retry: ")
            out = await streaming.post(f"{first}/logout", headers={"Origin": first, **holding(first, presented)})
            assert refused(out)
            # Woken by NOTIFY: the stream ends within its next look (a second at most), not in 5 minutes.
            with anyio.fail_after(5):
                rest = "".join([chunk async for chunk in chunks])
    assert "event: signed_out" in rest
    with httpx.Client(timeout=30) as client:
        assert refused(page_with(client, second, presented))
        assert page_with(client, second, other).status_code == 200
