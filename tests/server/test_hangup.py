"""What the workbench's ASGI layer does when a client hangs up on a 2026-07-28 request answered with JSON
(the dropped call itself is in test_http_responses.py): which requests it listens on, and that a client
leaving halfway through its request costs the server nothing."""

from __future__ import annotations

import json
import logging

import anyio
import pytest
from http_support import serving
from mcp import Client
from starlette.types import Receive, Send

from awb.config import Config
from awb.server import hangup
from awb.server.hangup import HangUpCancels, single_exchange
from awb.workbench import Workbench
from journey import call
from support import add_tool

pytestmark = pytest.mark.anyio


def _scope(method: str, version: bytes | None) -> dict[str, object]:
    headers = [(b"content-type", b"application/json")]
    if version is not None:
        headers.append((b"mcp-protocol-version", version))
    return {"type": "http", "method": method, "headers": headers}


def test_only_posts_the_sdk_serves_in_their_own_task_are_listened_on() -> None:
    assert single_exchange(_scope("POST", b"2026-07-28"))
    assert single_exchange(_scope("POST", b"2099-01-01"))  # the SDK routes unknown versions there too
    assert not single_exchange(_scope("POST", b"2025-11-25"))  # a session's request, cancelled by notification
    assert not single_exchange(_scope("POST", None))  # an initialize
    assert not single_exchange(_scope("GET", b"2026-07-28"))


async def test_a_client_that_leaves_while_sending_its_request_is_let_go_quietly(
    workbench: Workbench, config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    await workbench.craft(add_tool())
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "awb_list"}}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with anyio.fail_after(30):
        async with serving(workbench, config) as running:
            # Where uvicorn logs an app's exception (handlers set once the server is configured).
            server_log = logging.getLogger("uvicorn.error")
            server_log.addHandler(caplog.handler)
            try:
                stream = await anyio.connect_tcp("127.0.0.1", running.port)
                await stream.send(head + body[:10])
                tasks = running.server.server_state.tasks  # the server's request tasks
                while not tasks:  # until the request is served, waiting for the rest of its body
                    await anyio.sleep(0.005)
                await stream.aclose()
                while tasks:  # until the request has been let go
                    await anyio.sleep(0.005)
            finally:
                server_log.removeHandler(caplog.handler)
            async with Client(f"{running.url}/mcp") as session:
                result = await call(session, "awb_call", {"name": "add_numbers", "params": {"a": 2, "b": 3}})
    assert result["result"] == 5
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


class FakeClient:
    """An ASGI `receive` for one request: its body (in `parts`), then nothing until `hang_up`. It counts
    its readers, since a server's channel has one reader at a time."""

    def __init__(self, *parts: bytes) -> None:
        self.parts = list(parts)
        self.more = anyio.Event()  # the rest of the body may come
        self.gone = anyio.Event()
        self.reads = self.readers = self.most_readers = 0

    def hang_up(self) -> None:
        self.gone.set()

    async def receive(self) -> dict[str, object]:
        self.reads += 1
        self.readers += 1
        self.most_readers = max(self.most_readers, self.readers)
        try:
            if self.parts:
                if len(self.parts) == 1 and self.reads > 1:
                    await self.more.wait()
                body = self.parts.pop(0)
                return {"type": "http.request", "body": body, "more_body": bool(self.parts)}
            await self.gone.wait()
            return {"type": "http.disconnect"}
        finally:
            self.readers -= 1


SCOPE = {"type": "http", "method": "POST", "headers": [(b"mcp-protocol-version", b"2026-07-28")]}


async def _nothing_sent(message: object) -> None:
    raise AssertionError(f"nothing is sent: {message}")


class SlowApp:
    """A handler that reads the whole body, then runs until it is cancelled."""

    def __init__(self) -> None:
        self.running = anyio.Event()
        self.cancelled = False

    async def __call__(self, scope: object, receive: Receive, send: Send) -> None:
        while (await receive()).get("more_body"):
            pass
        self.running.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise


async def test_a_request_that_runs_a_while_is_cancelled_when_its_client_hangs_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hangup, "LISTEN_AFTER", 0)
    client, app = FakeClient(b"{}"), SlowApp()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(HangUpCancels(app, listen=True), SCOPE, client.receive, _nothing_sent)
            await app.running.wait()
            client.hang_up()
    assert app.cancelled and client.most_readers == 1


async def test_listening_due_while_the_body_comes_starts_once_it_is_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hangup, "LISTEN_AFTER", 0)
    client, app = FakeClient(b"{", b"}"), SlowApp()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(HangUpCancels(app, listen=True), SCOPE, client.receive, _nothing_sent)
            await anyio.wait_all_tasks_blocked()  # the timer is past; the app waits for the body's end
            client.more.set()
            await app.running.wait()
            client.hang_up()
    assert app.cancelled and client.most_readers == 1


async def test_an_app_that_reads_again_after_the_body_hears_the_hang_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hangup, "LISTEN_AFTER", 3600)
    client = FakeClient(b"{}")
    heard: list[object] = []

    async def app(scope: object, receive: Receive, send: Send) -> None:
        await receive()
        heard.append((await receive())["type"])

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(HangUpCancels(app, listen=True), SCOPE, client.receive, _nothing_sent)
            await anyio.wait_all_tasks_blocked()
            client.hang_up()
    assert heard == ["http.disconnect"] and client.most_readers == 1


async def test_a_request_answered_before_listening_is_due_never_listens() -> None:
    client = FakeClient(b"{}")
    sent: list[object] = []

    async def app(scope: object, receive: Receive, send: Send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def send(message: object) -> None:
        sent.append(message)

    with anyio.fail_after(5):
        await HangUpCancels(app, listen=True)(SCOPE, client.receive, send)
    assert len(sent) == 2 and client.reads == 1


async def test_a_request_begun_while_another_waited_to_be_listened_on_is_listened_on_in_its_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One timer serves every request in flight: set for the first, which is answered before it is due, it
    # must still start listening on the second when that one is due.
    monkeypatch.setattr(hangup, "LISTEN_AFTER", 0.1)
    first, second = FakeClient(b"{}"), FakeClient(b"{}")
    answer, slow = anyio.Event(), SlowApp()

    async def app(scope: dict[str, object], receive: Receive, send: Send) -> None:
        if scope["path"] == "/slow":
            await slow(scope, receive, send)
            return
        await receive()
        await answer.wait()

    layer = HangUpCancels(app, listen=True)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(layer, {**SCOPE, "path": "/fast"}, first.receive, _nothing_sent)
            # Half its wait later: the timer set for the first finds the second not yet due.
            await anyio.sleep(0.05)
            tasks.start_soon(layer, {**SCOPE, "path": "/slow"}, second.receive, _nothing_sent)
            await slow.running.wait()
            answer.set()  # the first is done before its listening is due
            second.hang_up()
    assert slow.cancelled and first.reads == 1 and second.most_readers == 1
