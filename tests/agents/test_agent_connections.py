"""Kept-alive connections to the provider: a run's model steps share one, each event loop gets its own pool,
the run's end closes them, and a connection the server dropped while idle is replaced, not failed on.

The fake here speaks HTTP/1.1 and keeps connections open (the shared `fake_provider` speaks HTTP/1.0, which
closes each one), and counts the connections it accepts and the ones that have ended."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import anyio.to_thread
import pytest

from awb.agents import run_agent
from awb.agents.errors import ModelError
from awb.agents.models.base import Prompt
from awb.agents.models.openai import OpenAIModel
from support import loopback_http

from .agent_fixtures import Reader, files_server, openai_calls

pytestmark = pytest.mark.anyio

KEY = "sk-test-very-secret-key-123"


@dataclass
class KeepAliveProvider:
    url: str = ""
    accepted: int = 0
    ended: int = 0
    #: Replies whose connection the server closes after answering, without saying so (an idle limit).
    drop_after: set[int] = field(default_factory=set)
    #: Requests the server reads, then closes the connection on without an answer (its idle limit, hit at the
    #: very moment the client reused the connection).
    unanswered: set[int] = field(default_factory=set)
    #: Requests answered with a 500 (retried by the adapter).
    failing: set[int] = field(default_factory=set)
    requests: int = 0
    #: Scripted replies, in order; once they run out, `done` with the request's number as the answer.
    replies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Set each time a connection has ended on the server's side.
    connection_ended: threading.Event = field(default_factory=threading.Event)

    def open_connections(self) -> int:
        with self.lock:
            return self.accepted - self.ended


@pytest.fixture
def keepalive_provider() -> Iterator[KeepAliveProvider]:
    provider = KeepAliveProvider()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            with provider.lock:
                provider.accepted += 1
            # As providers' servers do: else a kept connection's reply waits 40 ms on the client's delayed ACK.
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().setup()

        def finish(self) -> None:
            super().finish()
            with provider.lock:
                provider.ended += 1
            provider.connection_ended.set()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            with provider.lock:
                number = provider.requests
                provider.requests += 1
                scripted = provider.replies.pop(0) if provider.replies else None
            if number in provider.unanswered:
                self.close_connection = True
                return
            reply = scripted or openai_calls(("done", json.dumps({"answer": str(number)})))
            data = json.dumps(reply).encode()
            self.send_response(500 if number in provider.failing else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            if number in provider.drop_after:
                self.close_connection = True  # no `Connection: close` header: the client learns only by the FIN

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    with loopback_http(Handler, daemon_threads=True, poll_interval=0.05) as server:
        provider.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield provider


def model(provider: KeepAliveProvider) -> OpenAIModel:
    return OpenAIModel("fake-model", base_url=provider.url, api_key=KEY, backoff_seconds=0)


PROMPT = Prompt(system="s", body="b", output_schema={"type": "object"})


async def all_ended(provider: KeepAliveProvider) -> None:
    """Until the server has seen every connection end (bounded by the caller)."""
    while provider.open_connections():
        provider.connection_ended.clear()
        if provider.open_connections():
            await anyio.to_thread.run_sync(provider.connection_ended.wait, 0.5)


async def test_a_runs_model_steps_share_one_connection(keepalive_provider: KeepAliveProvider) -> None:
    # Five steps: four reads of the files server, then `done`. Each step used to connect anew (5 connections).
    keepalive_provider.replies = [openai_calls(("files__read", json.dumps({"path": "notes.txt"})))] * 4
    chosen = model(keepalive_provider)
    with anyio.fail_after(20):
        result = await run_agent(Reader, "q", model=chosen, servers={"files": files_server()})
        assert (result.termination_reason, result.usage.requests) == ("done", 5)
        assert keepalive_provider.requests == 5
        assert keepalive_provider.accepted == 1
        # The run's end closed its connections: the server sees the connection end, no pool is left open.
        await all_ended(keepalive_provider)
    assert chosen.http.connections.pools == 0


async def test_calls_within_a_hold_share_one_connection_and_a_call_outside_one_keeps_none(
    keepalive_provider: KeepAliveProvider,
) -> None:
    chosen = model(keepalive_provider)
    with anyio.fail_after(20):
        async with chosen.connections():
            for _ in range(5):
                await chosen.call(PROMPT, [])
        assert keepalive_provider.accepted == 1
        await all_ended(keepalive_provider)
        # Outside any hold a call has a client of its own, closed when it is answered.
        await chosen.call(PROMPT, [])
        assert keepalive_provider.accepted == 2
        await all_ended(keepalive_provider)
    assert chosen.http.connections.pools == 0


def test_a_model_used_from_two_event_loops_works_from_each(keepalive_provider: KeepAliveProvider) -> None:
    chosen = model(keepalive_provider)
    answers: list[str] = []

    async def twice() -> None:
        with anyio.fail_after(20):
            async with chosen.connections():
                for _ in range(2):
                    action = await chosen.call(PROMPT, [])
                    answers.append(str(action))

    # One loop after another (two `anyio.run`s), then two at once from threads with loops of their own.
    anyio.run(twice)
    anyio.run(twice)
    threads = [threading.Thread(target=anyio.run, args=(twice,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert len(answers) == 8
    assert chosen.usage.failed_requests == 0
    # A pool per loop: each of the four loops connected once.
    assert keepalive_provider.accepted == 4
    assert chosen.http.connections.pools == 0


async def test_a_connection_the_server_dropped_while_idle_is_replaced(keepalive_provider: KeepAliveProvider) -> None:
    keepalive_provider.drop_after = {0}
    chosen = model(keepalive_provider)
    with anyio.fail_after(20):
        async with chosen.connections():
            await chosen.call(PROMPT, [])
            # The server closed the connection after its answer; the pool still holds it, idle.
            await all_ended(keepalive_provider)
            await chosen.call(PROMPT, [])
            await chosen.call(PROMPT, [])
    # Answered at the first attempt on a fresh connection, not by a retry after a failed one.
    assert (chosen.usage.requests, chosen.usage.failed_requests) == (3, 0)
    assert keepalive_provider.accepted == 2


async def test_a_kept_connection_closed_as_it_is_reused_is_sent_again_at_once(
    keepalive_provider: KeepAliveProvider,
) -> None:
    keepalive_provider.unanswered = {1, 3}
    chosen = OpenAIModel("fake-model", base_url=keepalive_provider.url, api_key=KEY, max_retries=0)
    with anyio.fail_after(20):
        async with chosen.connections():
            await chosen.call(PROMPT, [])
            # The server reads the second request on the kept connection and closes it unanswered: httpx does
            # not send again; the adapter does, at once, on a new connection, with no retry left to spend.
            await chosen.call(PROMPT, [])
        assert (chosen.usage.requests, chosen.usage.failed_requests) == (3, 1)
        assert keepalive_provider.accepted == 2
        await all_ended(keepalive_provider)
        # Not for a connection of the request's own: a server that closes it unanswered has failed.
        with pytest.raises(ModelError, match="cannot reach the provider"):
            await chosen.call(PROMPT, [])


async def test_a_request_in_flight_keeps_the_pool_open_when_its_holder_leaves(
    keepalive_provider: KeepAliveProvider,
) -> None:
    """A call made outside the run that holds the pool (the same model object, on the same loop) borrows the
    pool for as long as it lasts: the run's end does not close the client under it."""
    keepalive_provider.failing = {0}
    chosen = model(keepalive_provider)
    waiting, go_on = anyio.Event(), anyio.Event()

    async def retry_wait(seconds: float) -> None:
        waiting.set()
        await go_on.wait()

    chosen.http.sleep = retry_wait
    answers: list[object] = []

    async def call() -> None:
        answers.append(await chosen.call(PROMPT, []))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            async with chosen.connections():
                group.start_soon(call)
                await waiting.wait()  # the first attempt failed; the call waits to retry on the pooled client
            go_on.set()  # its holder has left; the retry still has a client
        assert len(answers) == 1
        assert (chosen.usage.requests, chosen.usage.failed_requests) == (2, 1)
        assert keepalive_provider.accepted == 1
        await all_ended(keepalive_provider)
    assert chosen.http.connections.pools == 0
