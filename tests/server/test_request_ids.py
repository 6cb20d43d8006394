"""A handshake-era (2025-11-25) request over HTTP whose id MCP does not take is answered -32600 with id null,
as stdio and the 2026-07-28 path answer it, instead of an empty 202 that leaves the client waiting."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from http_support import INITIALIZE, MCP_HEADERS, serving
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from awb.config import Config
from awb.log_limit import PER_WINDOW, PerRequestLimit
from awb.server.request_ids import RequestIdCheck, bad_id_method
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

BAD_IDS: list[Any] = [1.5, 1.0, True, None, {"a": 1}, [1]]


def _serving(config: Config, *, json_response: bool = True, stateless: bool = False) -> Config:
    config = config.model_copy(deep=True, update={"stateless_http": stateless})
    config.http.json_response = json_response
    return config


async def _session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    opened = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
    assert opened.status_code == 200
    headers = {**MCP_HEADERS, "Mcp-Protocol-Version": "2025-11-25"}
    if "mcp-session-id" in opened.headers:
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    return headers


@pytest.mark.parametrize(
    ("json_response", "stateless"), [(True, False), (False, False), (True, True)], ids=["json", "sse", "stateless"]
)
async def test_a_request_with_an_id_mcp_does_not_take_is_answered_invalid_request(
    workbench: Workbench, config: Config, json_response: bool, stateless: bool
) -> None:
    with anyio.fail_after(30):
        async with serving(workbench, _serving(config, json_response=json_response, stateless=stateless)) as running:
            url = f"{running.url}/mcp"
            async with httpx.AsyncClient(timeout=10) as http:
                headers = await _session(http, url)
                for bad in BAD_IDS:
                    answer = await http.post(url, json={"jsonrpc": "2.0", "id": bad, "method": "ping"}, headers=headers)
                    assert answer.status_code == 400, bad
                    error = answer.json()
                    assert error["id"] is None and error["error"]["code"] == -32600, bad
                    assert "'ping'" in error["error"]["message"]
                # The key spelt with an escape is the same key.
                escaped = b'{"jsonrpc": "2.0", "\\u0069d": 2.5, "method": "tools/list"}'
                answer = await http.post(url, content=escaped, headers=headers)
                assert answer.status_code == 400 and answer.json()["error"]["code"] == -32600
                # The session goes on: good ids are answered, notifications still get their 202.
                ping = await http.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"}, headers=headers)
                assert ping.status_code == 200
                body = ping.text if json_response else ping.text.split("data: ", 1)[1]
                assert json.loads(body) == {"jsonrpc": "2.0", "id": 7, "result": {}}
                note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}
                assert (await http.post(url, json=note, headers=headers)).status_code == 202


async def test_a_body_past_the_sdks_limit_is_still_refused_by_the_sdk_unread(
    workbench: Workbench, config: Config
) -> None:
    with anyio.fail_after(30):
        async with serving(workbench, _serving(config)) as running:
            url = f"{running.url}/mcp"
            async with httpx.AsyncClient(timeout=10) as http:
                headers = await _session(http, url)
                padding = "x" * (DEFAULT_MAX_REQUEST_BODY_SIZE + 1)
                big = {"jsonrpc": "2.0", "id": 1.5, "method": "ping", "params": {"padding": padding}}

                async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: read to the limit
                    body = json.dumps(big).encode()
                    for start in range(0, len(body), 1 << 20):
                        yield body[start : start + (1 << 20)]

                answer = await http.post(url, content=streamed(), headers=headers)
                assert answer.status_code == 413


@pytest.mark.parametrize(
    ("body", "method"),
    [
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', "ping"),
        (b'{"jsonrpc":"2.0","id" :\n true,"method":"ping"}', "ping"),
        (b'{"jsonrpc":"2.0","id":-2e3,"method":"ping"}', "ping"),
        (b'{"jsonrpc":"2.0","i\\u0064":null,"method":"ping"}', "ping"),
        (b'{"jsonrpc":"2.0","id":null,"method":{"not":"a name"}}', {"not": "a name"}),
        (b'{"jsonrpc":"2.0","id": "x","method":"ping"}', None),
        (b'{"jsonrpc":"2.0","id": -12,"method":"ping"}', None),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"id":true,"t":"\\u00e9"}}}', None),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"result":{}}', None),  # a response: the SDK refuses it itself
        (b'{"id": true', None),  # not JSON: the SDK's parse error
        (b'[{"jsonrpc":"2.0","id":1.5,"method":"ping"}]', None),  # a batch: the SDK refuses it
    ],
)
def test_only_a_request_whose_own_id_is_neither_a_string_nor_an_integer_is_refused(body: bytes, method: Any) -> None:
    assert bad_id_method(body) == method


async def test_a_body_past_the_limit_is_handed_on_as_it_comes_not_read_whole_first() -> None:
    """The SDK refuses a body past its limit (413) as it reads it: this layer must not read a body of any
    size (a client may send gigabytes) before the SDK's limit applies."""
    limit, chunk = 4096, 1024
    read = 0

    async def endless() -> dict[str, Any]:
        nonlocal read
        read += chunk
        if read > 16 * limit:
            raise AssertionError("the body was read on past the limit")
        return {"type": "http.request", "body": b" " * chunk, "more_body": True}

    seen: list[int] = []

    async def sdk(scope: Any, receive: Any, send: Any) -> None:
        seen.append(len((await receive())["body"]))

    scope = {"type": "http", "method": "POST", "headers": []}
    await RequestIdCheck(sdk, max_body=limit)(scope, endless, _unused)
    assert seen == [limit + chunk] and read == limit + chunk


async def _unused(message: Any) -> None:
    raise AssertionError(f"nothing is sent by this layer: {message}")


async def test_ten_thousand_bad_ids_over_http_write_a_bounded_log_and_one_line_saying_how_many_were_not() -> None:
    """Each such request logged a warning: a client filled the server's log at wire speed."""
    written: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.append(record.getMessage())

    limit = PerRequestLimit()
    recorder = Recorder()
    recorder.addFilter(limit)
    logger = logging.getLogger("awb.server")
    logger.addHandler(recorder)
    answers: list[int] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            answers.append(message["status"])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', "more_body": False}

    async def sdk(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a bad id never reaches the SDK")

    check = RequestIdCheck(sdk, max_body=DEFAULT_MAX_REQUEST_BODY_SIZE)
    scope = {"type": "http", "method": "POST", "headers": []}
    try:
        for _ in range(10_000):
            await check(scope, receive, send)
    finally:
        logger.removeHandler(recorder)
    written += [summary.getMessage() for summary in limit.summaries(closing=True)]
    assert answers == [400] * 10_000
    assert len(written) == PER_WINDOW + 1
    assert written[-1].startswith(f"{10_000 - PER_WINDOW} more lines like 'answered a request whose id")
