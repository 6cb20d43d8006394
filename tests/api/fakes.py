"""Loopback fakes for the REST tests: an OpenAI-compatible model, a Tavily search service, and a uvicorn
thread serving an ASGI app on 127.0.0.1 (port 0)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import uvicorn

from support import loopback_http

Reply = tuple[int, Any]
Responder = Callable[[dict[str, Any]], Reply]


def tool_call(name: str, arguments: dict[str, Any]) -> Reply:
    """A chat-completions reply whose one tool call is `name(arguments)`."""
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return 200, {"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def answer(text: str) -> Reply:
    """A reply that finishes the run with `text` as the response."""
    return tool_call("done", {"response": text})


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


@dataclass
class FakeServer:
    """Answers each POST from a queue of replies, or with `responder` when the queue is empty. A reply is
    JSON-encoded, unless it is bytes (a body JSON cannot be made of, such as one nested past its encoder)."""

    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    responder: Responder | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Requests whose path is listed here wait until the test ends: a provider that never answers.
    hang_paths: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)
    #: Set once a request waits on `hang_paths`: its caller is now waiting on the provider.
    hanging: threading.Event = field(default_factory=threading.Event)

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if path in self.hang_paths:
            self.hanging.set()
            self.release.wait(timeout=60)
            return 500, {"error": {"message": "released"}}
        if self.replies:
            return self.replies.pop(0)
        if self.responder is not None:
            return self.responder(body)
        return 500, {"error": {"message": "the fake has no reply queued"}}


@contextmanager
def serving(fake: FakeServer) -> Iterator[FakeServer]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            status, reply = fake.answer(self.path, body)
            data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()  # bytes: sent as they are
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    with loopback_http(Handler, daemon_threads=True) as server:
        fake.url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            yield fake
        finally:
            fake.release.set()


class _Server(uvicorn.Server):
    """Tells the test when its socket is bound instead of being polled."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@contextmanager
def uvicorn_serving(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        if not server.ready.wait(timeout=30):
            raise RuntimeError("uvicorn did not start within 30 s")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
