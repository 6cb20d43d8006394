"""What a Tavily endpoint may make the workbench hold, and for how long: its reply is read up to a cap and
within the handler's timeout as a whole (`blueprints.tavily_base_url` may name any server)."""

from __future__ import annotations

import gzip
from typing import Any

import anyio
import pytest
from starlette.types import Receive, Scope, Send

from api.fakes import uvicorn_serving
from awb.blueprints import tavily
from awb.blueprints.compile import RuntimeOptions, compile_blueprint
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import TavilySearchArm, validate_blueprint
from awb.blueprints.tavily import tavily_handler

pytestmark = pytest.mark.anyio

LIMIT = 256 * 1024
CHUNK = 64 * 1024
HEAD = {"provider": "openai", "model": "gpt-4o", "system_prompt": "Be helpful."}


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tavily, "MAX_REPLY_BYTES", LIMIT)


class Hostile:
    """Answers each POST with `size` bytes of a JSON reply (spaces, then a result list), a chunk at a time,
    gzip-compressed when asked, and `pause` seconds between chunks."""

    def __init__(self, size: int, *, compressed: bool = False, pause: float = 0.0, chunk: int = CHUNK) -> None:
        self.size, self.compressed, self.pause, self.chunk = size, compressed, pause, chunk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        tail = b'{"results": [{"title": "t", "url": "https://example.com/", "content": "c"}]}'
        body = b" " * (self.size - len(tail)) + tail
        extra = []
        if self.compressed:
            body, extra = gzip.compress(body), [(b"content-encoding", b"gzip")]
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), *extra]}
        )
        for at in range(0, len(body), self.chunk):
            await send({"type": "http.response.body", "body": body[at : at + self.chunk], "more_body": True})
            if self.pause:
                with anyio.move_on_after(self.pause):  # the wait, cut short when the client goes
                    if (await receive())["type"] == "http.disconnect":
                        return
        await send({"type": "http.response.body", "body": b""})


async def search(url: str, *, timeout: float = 10.0) -> Any:
    handler = tavily_handler(
        TavilySearchArm(type="tavily_search"),
        api_key="tvly-test",
        base_url=url,
        allowed_domains=[],
        journal=RunJournal("r", 10),
        timeout_seconds=timeout,
    )
    with anyio.fail_after(30):
        return await handler({"query": "q"})


async def test_a_reply_within_the_cap_gives_its_results() -> None:
    with uvicorn_serving(Hostile(LIMIT // 2)) as url:
        outcome = await search(url)
    assert outcome.ok
    assert outcome.payload["results"] == [{"title": "t", "url": "https://example.com/", "content": "c"}]


async def test_a_reply_over_the_cap_fails_the_search() -> None:
    with uvicorn_serving(Hostile(64 * LIMIT)) as url:
        outcome = await search(url)
    assert (outcome.ok, outcome.payload) == (False, f"Tavily's reply is over the {LIMIT}-byte limit")


async def test_a_compressed_reply_is_cut_at_the_cap_as_it_inflates() -> None:
    with uvicorn_serving(Hostile(64 * LIMIT, compressed=True)) as url:  # 16 MB of spaces: 16 KB on the wire
        outcome = await search(url)
    assert (outcome.ok, outcome.payload) == (False, f"Tavily's reply is over the {LIMIT}-byte limit")


async def test_a_reply_trickled_past_the_timeout_fails_the_search_in_time() -> None:
    """A byte every 50 ms never passes httpx's timeout for one read; the handler's timeout is for the whole."""
    trickle = Hostile(200, pause=0.05, chunk=1)  # 10 s to send it all
    with uvicorn_serving(trickle) as url:
        started = anyio.current_time()
        outcome = await search(url, timeout=0.5)
        waited = anyio.current_time() - started
    assert (outcome.ok, outcome.payload) == (False, "Tavily did not answer within 0.5 s")
    assert waited < 5  # not the 10 s the trickle takes, however loaded the machine


async def test_a_runs_searches_share_one_kept_connection_closed_with_its_toolbox() -> None:
    """The toolbox of a blueprint run holds its searches' connections: each search used to connect anew."""
    clients: list[tuple[str, int]] = []
    inner = Hostile(1024)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        clients.append(scope["client"])  # the client's (host, port): one port per connection
        await inner(scope, receive, send)

    data = {"head": HEAD, "arms": [{"type": "tavily_search"}], "legs": {"mode": "single_agent"}}
    with uvicorn_serving(app) as url:
        options = RuntimeOptions(environ={"TAVILY_API_KEY": "tvly-test"}, tavily_base_url=url)
        compiled = compile_blueprint(validate_blueprint(data), options)
        with anyio.fail_after(30):
            async with compiled.open_toolbox(RunJournal("r", 10)) as box:
                (spec,) = box.specs("tool")
                for _ in range(3):
                    outcome = await box.call(spec, {"query": "q"})
                    assert outcome.ok, outcome.payload
    assert len(clients) == 3
    assert len(set(clients)) == 1
