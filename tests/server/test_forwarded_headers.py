"""Whose `X-Forwarded-For` / `X-Forwarded-Proto` a real `awb start --transport http` believes: no one's by
default (uvicorn's own default believes any process on this machine), only `http.trusted_proxies`' when set.

The client address is what the credential limiter counts by, and the scheme is what the panel's
same-origin check compares a change's Origin with: both are observed here through the real server."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from awb.config import Config
from awb.server.http_limits import forwarded_allow_ips, uvicorn_config
from support import awb_env, awb_http

TOKEN = "a-long-enough-proxy-token-0123"
#: Failures an address may present before it is locked out (kept small: every guess is a request).
FAILURES = "3"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return awb_env(
        tmp_path,
        AWB_AUTH_TOKEN=TOKEN,
        AWB_HTTP__MAX_AUTH_FAILURES=FAILURES,
        # What a site served over https through a proxy lists, or the gate refuses its pages' Origin.
        AWB_ALLOWED_ORIGINS=json.dumps(["https://127.0.0.1:*"]),
        **extra,
    )


def _guess(client: httpx.Client, n: int, forwarded_for: str) -> int:
    headers = {"Authorization": f"Bearer guess-{n}", "X-Forwarded-For": forwarded_for}
    return client.get("/api/blueprints", headers=headers).status_code


def _sign_in(client: httpx.Client, base: str, scheme: str) -> str:
    """Post the right token to `/login` from a page at `scheme`://this-server, saying the request came
    over https (as a TLS-terminating proxy would): `cross_origin`, `signed in`, `signed in, secure` (the
    cookie is for https only), or the status."""
    origin = base.replace("http://", f"{scheme}://")
    headers = {"Origin": origin, "X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.200"}
    answer = client.post("/login", data={"token": TOKEN}, headers=headers)
    if answer.status_code == 403 and "cross_origin" in answer.text:
        return "cross_origin"
    if answer.status_code == 303 and "set-cookie" in answer.headers:
        secure = "; secure" in answer.headers["set-cookie"].lower()
        return "signed in, secure" if secure else "signed in"
    return str(answer.status_code)


def test_forwarding_headers_from_this_machine_are_not_believed_by_default(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with awb_http(tmp_path, env) as base, httpx.Client(base_url=base, timeout=30) as client:
        # The scheme is not believed: a page at https:// is another origin than this http:// server.
        assert _sign_in(client, base, "https") == "cross_origin"
        assert _sign_in(client, base, "http") == "signed in"
        # Each guess names another client address: the server still counts them all against 127.0.0.1.
        statuses = [_guess(client, n, f"198.51.100.{n}") for n in range(5)]
        assert statuses == [401, 401, 401, 429, 429]
        right = client.get("/api/blueprints", headers={"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "::2"})
        assert right.status_code == 429


def test_a_trusted_proxy_gives_the_client_address_and_scheme(tmp_path: Path) -> None:
    env = _env(tmp_path, AWB_HTTP__TRUSTED_PROXIES=json.dumps(["127.0.0.0/8"]))
    with awb_http(tmp_path, env) as base, httpx.Client(base_url=base, timeout=30) as client:
        assert [_guess(client, n, "198.51.100.1") for n in range(4)] == [401, 401, 401, 429]
        # Another client behind the same proxy is not held to the first one's guesses.
        assert _guess(client, 9, "198.51.100.2") == 401
        # The proxy's own address is the last in the list, and trusted: the client is the one before it.
        assert _guess(client, 10, "198.51.100.1, 127.0.0.1") == 429
        assert _sign_in(client, base, "https") == "signed in, secure"
        assert _sign_in(client, base, "http") == "cross_origin"


def test_no_forwarding_headers_are_read_unless_proxies_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")  # uvicorn's own setting: not read
    plain = uvicorn_config(None, Config())
    assert plain.proxy_headers is False and plain.forwarded_allow_ips == []
    proxied = uvicorn_config(None, Config(http={"trusted_proxies": ["10.0.0.5", "fd00::/8"]}))
    assert proxied.proxy_headers is True
    assert proxied.forwarded_allow_ips == ["10.0.0.5/32", "fd00::/8", "::ffff:10.0.0.5/128"]


def test_an_ipv4_proxy_is_trusted_as_an_ipv6_socket_sees_it() -> None:
    assert forwarded_allow_ips(["10.0.0.0/8"]) == ["10.0.0.0/8", "::ffff:10.0.0.0/104"]
    assert forwarded_allow_ips([]) == []


@pytest.mark.parametrize("entry", ["*", "proxy.internal", "10.0.0.300", ""])
def test_a_trusted_proxy_that_is_not_an_address_is_a_config_error(entry: str) -> None:
    with pytest.raises(ValueError, match="not an IP address or network"):
        Config(http={"trusted_proxies": [entry]})
