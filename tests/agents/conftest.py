"""Fixtures for the agent runtime tests: the anyio backend and a fake provider on loopback.

The provider serves both wire formats (chat completions and Anthropic messages): each test
scripts the replies, statuses, headers and stalls it wants.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from support import loopback_http

from .agent_fixtures import FakeProvider, Reply


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    provider = FakeProvider(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            provider.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            reply = provider.replies.pop(0) if provider.replies else Reply(500, {"error": "no reply"})
            if reply.hold:
                provider.release.wait(timeout=30)
            if isinstance(reply.body, bytes):
                data = reply.body
            else:
                data = reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if reply.stall_body:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    provider.release.wait(timeout=30)
                self.wfile.write(data)
            except OSError:
                """The client gave up waiting (a timeout test); nothing to answer."""

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    with loopback_http(Handler, daemon_threads=True, poll_interval=0.05) as server:
        provider.url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            yield provider
        finally:
            provider.release.set()
