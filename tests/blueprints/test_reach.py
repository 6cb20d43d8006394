"""Which addresses a blueprint's MCP arms may dial when the runtime allows public ones only
(`RuntimeOptions.allow_private_mcp_urls` off), on both targets: the awb runtime and Agno, in every mode.

Each internal server here is a loopback listener that counts the connections made to it: refused means
never dialled, not dialled and then turned away.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

from api.fakes import FakeServer, serving
from awb.agents import public_reach
from awb.agents.errors import ServerUnavailable
from awb.blueprints.agno_target import compile_to_agno, run_agno
from awb.blueprints.compile import RuntimeOptions, compile_blueprint
from awb.blueprints.errors import BlueprintInvalid
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import Blueprint, validate_blueprint
from support import loopback_http

pytestmark = pytest.mark.anyio

#: A name that resolves (in these tests) to the loopback listener: DNS decides, not the URL's spelling.
INTERNAL_NAME = "mcp.internal.example"
#: A name that resolves to 127.0.0.1 too, where the redirect test counts 127.0.0.1 as public.
PUBLIC_NAME = "mcp.public.example"
MODES: dict[str, dict[str, Any]] = {
    "single_agent": {"mode": "single_agent"},
    "workflow": {"mode": "workflow", "steps": [{"name": "look", "instructions": "Look."}]},
    "team": {"mode": "team", "members": [{"name": "scout", "instructions": "Look."}]},
}


class Listener:
    """A TCP listener on a loopback address that accepts, counts and closes every connection made to it."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.sock = socket.create_server((host, 0))
        self.port: int = self.sock.getsockname()[1]
        self._count = 0
        self._last: tuple[str, int] | None = None
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            conn, peer = self.sock.accept()
            conn.close()
            if peer == self._last:
                return
            self._count += 1

    def connections(self) -> int:
        """Every connection made so far, once the listener has accepted all of them; the listener stops."""
        if self._last is None:
            # Connections are accepted in the order they were made: one of our own, made last and known by
            # its address, is the sign that every earlier one was counted.
            last = socket.socket(self.sock.family)
            last.bind((self.host, 0))
            self._last = last.getsockname()[:2]
            last.settimeout(5)
            last.connect((self.host, self.port))
            last.close()
            self._thread.join(timeout=5)
            assert not self._thread.is_alive(), "the listener did not see its own last connection"
            self.sock.close()
        return self._count


@pytest.fixture
def listener() -> Iterator[Listener]:
    internal = Listener()
    yield internal
    internal.connections()


@pytest.fixture
def model() -> Iterator[FakeServer]:
    with serving(FakeServer()) as fake:
        yield fake


@pytest.fixture
def internal_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """`INTERNAL_NAME` (and `PUBLIC_NAME`) resolve to 127.0.0.1, as a name whose DNS answer is an internal
    address would."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        # anyio asks with the name IDNA-encoded, as bytes.
        named = host in (INTERNAL_NAME, INTERNAL_NAME.encode(), PUBLIC_NAME, PUBLIC_NAME.encode())
        return real("127.0.0.1" if named else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _blueprint(url: str, mode: str = "single_agent") -> Blueprint:
    data = {
        "name": "reach",
        "head": {"provider": "openai", "model": "gpt-4o-mini"},
        "arms": [{"type": "mcp", "name": "inside", "url": url}],
        "legs": MODES[mode],
    }
    return validate_blueprint(data)


def _options(model: FakeServer, *, private: bool = False) -> RuntimeOptions:
    env = {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": "sk-test-reach"}
    return RuntimeOptions(environ=env, allow_private_mcp_urls=private)


async def _run_agno(blueprint: Blueprint, options: RuntimeOptions) -> str:
    journal = RunJournal("run", blueprint.spine.max_tool_calls)
    target = compile_to_agno(blueprint, options, journal=journal)
    with anyio.fail_after(60):
        return await run_agno(target, blueprint, "hi", journal=journal)


async def _connect(target: str, blueprint: Blueprint, options: RuntimeOptions) -> None:
    """Connect the arms as a run on `target` does: Agno's whole run, or the awb runtime's toolbox (every mode
    of the awb runtime connects through it)."""
    if target == "agno":
        await _run_agno(blueprint, options)
        return
    compiled = compile_blueprint(blueprint, options)
    with anyio.fail_after(60):
        async with compiled.open_toolbox(RunJournal("run", 10)):
            pass


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/mcp",
        "http://localhost:{port}/mcp",
        "http://[::1]:{port}/mcp",
        "http://[::ffff:127.0.0.1]:{port}/mcp",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/mcp",
    ],
)
def test_agno_target_refuses_a_plainly_internal_url_as_a_field_error(
    model: FakeServer, listener: Listener, url: str
) -> None:
    blueprint = _blueprint(url.format(port=listener.port))
    with pytest.raises(BlueprintInvalid) as caught:
        compile_to_agno(blueprint, _options(model), journal=RunJournal("run", 10))
    error = caught.value.details["errors"][0]
    assert (error["path"], error["type"]) == ("arms[0].url", "url_not_allowed")
    assert listener.connections() == 0 and model.requests == []


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.0.0.1", INTERNAL_NAME])
@pytest.mark.usefixtures("internal_name")
async def test_agno_target_refuses_other_spellings_and_names_of_an_internal_address_without_dialling(
    model: FakeServer, listener: Listener, host: str
) -> None:
    blueprint = _blueprint(f"http://{host}:{listener.port}/mcp")
    with pytest.raises(ServerUnavailable) as caught:
        await _run_agno(blueprint, _options(model))
    assert listener.connections() == 0 and model.requests == []
    assert caught.value.details["server"] == "inside"
    assert "is not a public address" in caught.value.message


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("target", ["awb", "agno"])
@pytest.mark.usefixtures("internal_name")
async def test_every_target_and_mode_dials_public_addresses_only(
    model: FakeServer, listener: Listener, target: str, mode: str
) -> None:
    blueprint = _blueprint(f"http://{INTERNAL_NAME}:{listener.port}/mcp", mode)
    with pytest.raises(ServerUnavailable) as caught:
        await _connect(target, blueprint, _options(model))
    assert listener.connections() == 0 and model.requests == []
    assert "is not a public address" in caught.value.message


@contextmanager
def redirecting(location: str) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that answers every request with a redirect to `location`; yields its URL,
    by `PUBLIC_NAME`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_DELETE = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    with loopback_http(Handler, daemon_threads=True) as server:
        yield f"http://{PUBLIC_NAME}:{server.server_address[1]}/mcp"


@pytest.mark.parametrize("target", ["awb", "agno"])
@pytest.mark.usefixtures("internal_name")
async def test_a_redirect_to_an_internal_address_is_not_followed(
    model: FakeServer, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """127.0.0.1 (`PUBLIC_NAME`) stands in for a public MCP server here, one that redirects every request to
    127.0.0.2, where a listener counts connections."""
    real = public_reach.is_public
    monkeypatch.setattr(public_reach, "is_public", lambda address: address == "127.0.0.1" or real(address))
    internal = Listener("127.0.0.2")
    try:
        with redirecting(f"http://127.0.0.2:{internal.port}/mcp") as url, pytest.raises(ServerUnavailable):
            await _connect(target, _blueprint(url), _options(model))
        assert internal.connections() == 0 and model.requests == []
    finally:
        internal.connections()


@pytest.mark.parametrize("target", ["awb", "agno"])
async def test_with_private_urls_allowed_a_loopback_server_is_dialled(
    model: FakeServer, listener: Listener, target: str
) -> None:
    blueprint = _blueprint(f"http://127.1:{listener.port}/mcp")
    with pytest.raises(ServerUnavailable):
        await _connect(target, blueprint, _options(model, private=True))
    assert listener.connections() >= 1
