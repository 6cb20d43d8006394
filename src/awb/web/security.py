"""The panel's guards on state-changing requests: same-origin only (against CSRF), and the API token
when one is configured.

A browser cannot add an `Authorization` header to a form post, so a person signs in once on `/login`
with the token and the panel keeps a pass derived from it (`awb.panel_access`) in an HttpOnly,
SameSite=Strict cookie; API clients may send the usual bearer header instead.
"""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

from awb import panel_access
from awb.sign_outs import SignOuts

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class Refused(Exception):
    """A request the guards turn away; `status` is the HTTP status, `code` the stable error code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def configured_token(config: Any) -> str | None:
    """`config.auth_token` (a SecretStr or a str) when the configuration has one."""
    token = getattr(config, "auth_token", None)
    if token is None:
        return None
    value = token.get_secret_value() if hasattr(token, "get_secret_value") else str(token)
    return value or None


def signed_in(request: Request, expected: str | None, sign_outs: SignOuts) -> bool:
    """No token configured, the bearer header, or the sign-in pass `/login` set (`awb.panel_access`) when
    it was not signed out since."""
    if expected is None:
        return True
    if (presented_token := bearer(request)) is not None:
        return token_ok(expected, presented_token)
    presented = good_pass(request, expected)
    return presented is not None and not sign_outs.signed_out(presented)


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else None


def good_pass(request: Request, expected: str | None) -> str | None:
    """The sign-in pass the request's cookie holds, when it is one (`panel_access.pass_ok`) for `expected`."""
    presented = request.cookies.get(panel_access.pass_cookie(request.scope))
    return presented if expected is not None and panel_access.pass_ok(expected, presented) else None


def token_ok(expected: str | None, presented: str | None) -> bool:
    if expected is None:
        return True
    return presented is not None and hmac.compare_digest(expected.encode(), presented.encode())


def sign_in_location(request: Request) -> str:
    """`/login`, with `next` when the page asked for is one to come back to (`awb.panel_access`)."""
    return panel_access.sign_in_location(request.method, request.url.path, request.url.query)


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def check_same_origin(request: Request) -> None:
    """Refuse a state-changing request that a page of another origin could have sent.

    The Origin header (or, without it, the Referer) must name this very server: the scheme and the
    Host the request came to. A request with neither is refused too: browsers send Origin on every
    cross-origin post, and our own pages always post same-origin, so nothing legitimate lacks both.
    """
    host = request.headers.get("host", "")
    if not host:
        raise Refused(400, "host_missing", "the request has no Host header")
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise Refused(403, "cross_origin", "cross-site requests may not change anything")
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        raise Refused(403, "cross_origin", "a change needs an Origin (or Referer) header naming this server")
    parts = urlsplit(source)
    if parts.scheme != request.url.scheme or parts.netloc.lower() != host.lower():
        raise Refused(403, "cross_origin", f"requests from {parts.scheme}://{parts.netloc} may not change anything")


def host_allowed(host: str, config: Any) -> bool:
    """Loopback names always; others only when listed in `config.allowed_hosts` (`name:port` or `name:*`)."""
    name = _host_name(host.lower())
    if name in LOOPBACK_HOSTS:
        return True
    bound = str(getattr(config, "host", ""))
    if name == bound.lower():
        return True
    for allowed in getattr(config, "allowed_hosts", None) or []:
        allowed = str(allowed).lower()
        if allowed == host.lower() or (allowed.endswith(":*") and allowed[:-2] == name):
            return True
    return False
