"""The HTTP gate: DNS-rebinding protection on every bind address (with an explicit allowlist), and a
bearer token that covers every path; binding a non-loopback address without one is refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from http_support import INITIALIZE, MCP_HEADERS, serving
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from pydantic import SecretStr

from awb.config import Config, load_config
from awb.errors import ConfigError
from awb.server.http_guard import check_exposure
from awb.workbench import Workbench
from journey import call
from support import PANEL_COOKIE, add_tool, awb_env

pytestmark = pytest.mark.anyio

TOKEN = "correct-horse-battery-staple-42"
#: Paths of every face the HTTP server carries (MCP today; REST and the panel mount beside it).
PATHS = ["/mcp", "/api/tools", "/", "/static/app.js"]


async def request(base: str, path: str, headers: dict[str, str], method: str = "POST") -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        if method == "POST":
            return await client.post(base + path, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        return await client.get(base + path, headers=headers)


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.2"])
async def test_foreign_hosts_and_origins_are_refused_on_every_loopback_bind(
    workbench: Workbench, config: Config, bind: str
) -> None:
    with anyio.fail_after(30):
        async with serving(workbench, config.model_copy(update={"host": bind})) as running:
            for path in PATHS:
                host = await request(running.url, path, {"Host": f"attacker.example:{running.port}"})
                assert host.status_code == 421, path
                assert host.json()["error"]["code"] == "invalid_host"
                origin = await request(running.url, path, {"Origin": "http://attacker.example"})
                assert origin.status_code == 403, path
                assert origin.json()["error"]["code"] == "invalid_origin"
            ok = await request(running.url, "/mcp", {"Origin": f"http://{bind}:{running.port}"})
            assert ok.status_code == 200, ok.text
    assert workbench.store.count_active() == 0


async def test_the_allowlist_admits_configured_hosts_and_origins_on_mcp_too(
    workbench: Workbench, config: Config
) -> None:
    config = config.model_copy(
        update={"allowed_hosts": ["tools.internal:*"], "allowed_origins": ["https://panel.internal"]}
    )
    with anyio.fail_after(30):
        async with serving(workbench, config) as running:
            allowed = {"Host": f"tools.internal:{running.port}", "Origin": "https://panel.internal"}
            assert (await request(running.url, "/mcp", allowed)).status_code == 200
            other = {"Host": f"tools.internal:{running.port}", "Origin": "https://other.internal"}
            assert (await request(running.url, "/mcp", other)).status_code == 403
            # `name:*` is any port, the scheme's default too: a balancer on port 80 or a TLS proxy passes on
            # the Host its clients used, without a port. On /mcp the SDK's own check has to agree.
            for path in PATHS:
                bare = await request(running.url, path, {"Host": "tools.internal", "Origin": "https://panel.internal"})
                assert bare.status_code not in (421, 403), (path, bare.text)
            assert (await request(running.url, "/mcp", {"Host": "tools.internal.evil"})).status_code == 421


async def test_with_a_token_every_path_needs_it(workbench: Workbench, config: Config) -> None:
    config = config.model_copy(update={"auth_token": SecretStr(TOKEN)})
    with anyio.fail_after(30):
        async with serving(workbench, config) as running:
            for path in [p for p in PATHS if not p.startswith("/static/")]:  # the panel's assets are public
                for headers in ({}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN}):
                    refused = await request(running.url, path, headers)
                    assert refused.json()["error"]["code"] == "unauthorized"
                    assert TOKEN not in refused.text
                    if path.startswith(("/mcp", "/api")):
                        assert refused.status_code == 401, (path, headers)
                        assert refused.headers["www-authenticate"].startswith("Bearer")
                    else:  # the web panel's pages send a browser to its sign-in page
                        assert refused.status_code == 303, (path, headers)
                        assert refused.headers["location"] == "/login"
            granted = await request(running.url, "/mcp", {"Authorization": f"Bearer {TOKEN}"})
            assert granted.status_code == 200


async def test_the_sdk_client_works_with_the_token(workbench: Workbench, config: Config) -> None:
    config = config.model_copy(update={"auth_token": SecretStr(TOKEN)})
    with anyio.fail_after(60):
        async with serving(workbench, config) as running:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            async with http, Client(streamable_http_client(running.url + "/mcp", http_client=http)) as client:
                crafted: dict[str, Any] = await call(client, "awb_craft", add_tool("over_http"))
                assert "error" not in crafted, crafted
                called = await call(client, "awb_call", {"name": "over_http", "params": {"a": 2, "b": 3}})
                assert called["result"] == 5


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
def test_a_non_loopback_bind_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(ConfigError, match="AWB_AUTH_TOKEN") as refused:
        check_exposure(Config(host=host))
    assert refused.value.code == "config_invalid"
    check_exposure(Config(host=host, auth_token=TOKEN))
    for loopback in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        check_exposure(Config(host=loopback))


def test_serving_behind_a_trusted_proxy_without_a_token_is_refused_even_on_loopback() -> None:
    proxied = Config(http={"trusted_proxies": ["127.0.0.1"]})
    with pytest.raises(ConfigError, match="trusted_proxies without auth_token") as refused:
        check_exposure(proxied)
    assert refused.value.code == "config_invalid"
    check_exposure(proxied.model_copy(update={"auth_token": SecretStr(TOKEN)}))


def test_awb_start_refuses_a_public_bind_without_a_token_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--host", "0.0.0.0", "--port", "0"],
        env=awb_env(tmp_path, COLUMNS="500"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    # Only the refusal: no "MCP on http://0.0.0.0:..." announcing an address it then does not serve.
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error (config_invalid): refusing to serve HTTP on 0.0.0.0") and "auth_token" in line
    assert not (tmp_path / ".awb" / "awb.pid").exists()


def test_a_short_token_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="16 characters"):
        Config(auth_token="short")


@pytest.mark.parametrize(
    "token",
    [
        "pässwörd-0123456789",  # UTF-8 on the wire, read back as Latin-1: never equal
        " leading-space-token-0123",  # the header's value is stripped
        "trailing-space-token-0123 ",
        "tab\tinside-the-token-0123",
        "zero\u200bwidth-token-0123",
    ],
)
def test_a_token_no_bearer_header_can_carry_is_a_config_error_that_never_prints_it(token: str) -> None:
    """A header carries ASCII (its value is read as Latin-1, stripped): such a token was taken, and then no
    bearer header ever matched it (401 on every request, each counted as a guess), while /login took it."""
    with pytest.raises(ValueError, match="printable ASCII"):
        Config(auth_token=token)
    with pytest.raises(ConfigError, match="printable ASCII") as loaded:
        load_config(environ={"AWB_AUTH_TOKEN": token})
    assert token.strip() not in str(loaded.value)


async def test_a_token_of_any_printable_ascii_opens_the_api_by_bearer_header(tmp_path: Path) -> None:
    from awb.server.http_guard import guard_http

    token = "two words !#$%&'*+-.^_`|~/=:0123"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=token)
    transport = httpx.ASGITransport(app=guard_http(app, config))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7777") as client:
        answer = await client.get("/api/blueprints", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200


def test_the_token_comes_from_the_environment_as_text_and_never_prints() -> None:
    config = load_config(environ={"AWB_AUTH_TOKEN": "1234567890123456"})
    assert config.auth_token is not None
    assert config.auth_token.get_secret_value() == "1234567890123456"
    assert "1234567890123456" not in repr(config) + config.model_dump_json()


async def test_with_a_token_the_panel_signs_in_through_its_cookie_behind_the_guard(tmp_path: Path) -> None:
    """The guard wraps the panel too: a browser is sent to the sign-in page, which is open; the pass its
    cookie holds opens the panel; /mcp and /api still need the bearer header."""
    from awb.panel_access import issue_pass
    from awb.server.http_guard import guard_http

    token = "a-long-enough-guard-token-0123"
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=token)
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    transport = httpx.ASGITransport(app=guard_http(app, config))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7777") as client:
        first = await client.get("/")
        assert first.status_code == 303 and first.headers["location"] == "/login"
        assert (await client.get("/login")).status_code == 200
        assert (await client.get("/static/panel.css")).status_code == 200
        assert (await client.get("/api/blueprints")).status_code == 401
        client.cookies.set(PANEL_COOKIE, "wrong-token-wrong-token")
        assert (await client.get("/")).status_code == 303
        client.cookies.set(PANEL_COOKIE, issue_pass(token))
        assert (await client.get("/")).status_code == 200
        assert (await client.get("/api/blueprints")).status_code == 401
        assert (await client.get("/api/blueprints", headers={"Authorization": f"Bearer {token}"})).status_code == 200
    assert seen == ["/login", "/static/panel.css", "/", "/api/blueprints"]


async def test_the_panel_cookie_is_no_key_to_mcp_or_the_api_and_the_token_itself_is_no_pass(tmp_path: Path) -> None:
    """Browsers send a cookie to every port of its host name: another server on 127.0.0.1 a person
    visits reads the panel's. It must hold neither the token nor anything that opens /mcp or /api, and
    must expire."""
    from awb.panel_access import PASS_SECONDS, issue_pass
    from awb.server.http_guard import guard_http

    token = "a-long-enough-guard-token-0123"
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=token)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    transport = httpx.ASGITransport(app=guard_http(app, config))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7777") as client:
        panel_pass = issue_pass(token)
        assert token not in panel_pass
        client.cookies.set(PANEL_COOKIE, panel_pass)
        for path in ("/api/blueprints", "/api", "/mcp"):
            answer = await client.post(path, headers={"Content-Type": "application/json"})
            assert answer.status_code == 401, path
        assert (await client.get("/")).status_code == 200
        expired = issue_pass(token, now=time.time() - PASS_SECONDS - 1)
        forged = panel_pass.split(".")[0] + "9." + panel_pass.split(".")[1]
        for refused in (token, expired, forged, "", "x.y", "1" * 40 + "." + "0" * 64):
            client.cookies.set(PANEL_COOKIE, refused)
            assert (await client.get("/")).status_code == 303, refused


async def test_every_response_forbids_framing_and_sniffing_refusals_included(tmp_path: Path) -> None:
    """Another site's page may not frame anything this server serves (a framed panel's forms are
    same-origin, so a disguised click would pass the CSRF check), nor have a browser guess a type."""
    from awb.server.http_guard import guard_http

    async def app(scope: Any, receive: Any, send: Any) -> None:
        own = [(b"content-security-policy", b"default-src 'none'")] if scope["path"] == "/strict" else []
        await send({"type": "http.response.start", "status": 200, "headers": own})
        await send({"type": "http.response.body", "body": b"<b>ok</b>"})

    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid")
    transport = httpx.ASGITransport(app=guard_http(app, config))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7777") as client:
        answers = [
            await client.get("/"),
            await client.get("/api/docs"),
            await client.post("/mcp", json={}),
            await client.get("/", headers={"Host": "attacker.example"}),
            await client.get("/", headers={"Origin": "http://attacker.example"}),
        ]
        for answer in answers:
            assert answer.headers["x-frame-options"] == "DENY", answer.request.url
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["content-security-policy"] == "frame-ancestors 'none'"
        strict = await client.get("/strict")
        assert strict.headers.get_list("content-security-policy") == ["default-src 'none'"]


async def test_a_port_of_other_digits_than_ascii_ones_is_no_port_of_a_loopback_name(tmp_path: Path) -> None:
    """`name:*` admits a port: ASCII digits. `str.isdigit` also took '²³' (a Latin-1 byte in a header), so
    'localhost:²³' passed as a loopback Host and Origin, a port no socket has."""
    from awb.server.http_guard import guard_http

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid")
    transport = httpx.ASGITransport(app=guard_http(app, config))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7777") as client:
        assert (await client.get("/", headers={"Host": b"localhost:7777"})).status_code == 200
        assert (await client.get("/", headers={"Host": b"localhost:\xb2\xb3"})).status_code == 421
        assert (await client.get("/", headers={"Origin": b"http://localhost:\xb9"})).status_code == 403
