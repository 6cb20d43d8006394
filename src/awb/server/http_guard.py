"""The gate in front of everything the HTTP server serves: Host and Origin checks, and a bearer token.

`guard_http` wraps the whole ASGI app (MCP at /mcp, and whatever else is mounted beside it: the REST
API, the web panel), so no path is served around it. DNS-rebinding protection is on for every bind
address: a Host or Origin header not on the allowlist is refused. The allowlist is built once, by
`transport_security`, and given both to this gate and to the MCP SDK's own check on /mcp, so the two
always agree.
Wrong credentials count against the client's address (`awb.sign_in_limit`, shared with the panel's
`/login`): past the limit the address is refused with 429 until its window passes.
It also gives every response the headers that keep a browser from misusing what it serves
(`security_headers`): no framing by another site (clickjacking the panel's buttons), no content sniffing.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from contextlib import suppress
from http.cookies import CookieError, SimpleCookie

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from awb.config import Config
from awb.errors import ConfigError
from awb.panel_access import (
    PANEL_LOGIN,
    PANEL_STATIC,
    pass_cookie,
    pass_expired,
    pass_ok,
    sign_in_location,
    takes_pass,
)
from awb.server.address import authority, is_loopback
from awb.server.raw_reply import send_json
from awb.server.request_share import RequestShare
from awb.shares import client_address
from awb.sign_in_limit import SCOPE_KEY, SignInLimit, limit_for, too_many_failures_message
from awb.sign_outs import SCOPE_KEY as SIGN_OUTS_KEY
from awb.sign_outs import SignOuts

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD_BINDS = ("0.0.0.0", "::", "")

#: Every response: another site's page may not frame ours (a framed panel is same-origin, so its forms
#: pass the CSRF check: a click on a disguised "Apply" would write a file), nor make a browser guess a
#: type (a tool's text served as JSON read as HTML). A face may send a stricter Content-Security-Policy
#: of its own (the panel does); it is kept.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)
_FRAME_POLICY = (b"content-security-policy", b"frame-ancestors 'none'")


_ADDED = (*SECURITY_HEADERS, _FRAME_POLICY)
_ADDED_NAMES = frozenset(name for name, _ in _ADDED)


def security_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` (ASGI, lower-case names) with `SECURITY_HEADERS`, and a CSP when the response set none."""
    headers = list(headers)
    for name, _ in headers:
        if name.lower() in _ADDED_NAMES:  # rare (the panel's CSP): keep the response's own
            names = {name.lower() for name, _ in headers}
            return headers + [header for header in _ADDED if header[0] not in names]
    return headers + list(_ADDED)


def transport_security(config: Config) -> TransportSecuritySettings:
    """The Host/Origin allowlist: the loopback names, the bound address, and `allowed_hosts` /
    `allowed_origins` from the configuration. Entries are exact, or `name:*` for any port."""
    names = list(_LOOPBACK_NAMES)
    if config.host not in _WILDCARD_BINDS and authority(config.host) not in names:
        names.append(authority(config.host))
    hosts = [*names, *(f"{name}:*" for name in names), *_any_port(config.allowed_hosts)]
    origins = [
        *(f"http://{name}" for name in names),
        *(f"http://{name}:*" for name in names),
        *_any_port(config.allowed_origins),
    ]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _any_port(entries: list[str]) -> list[str]:
    """`entries` with each `name:*` also as the bare `name`: any port is the scheme's default too, which a
    Host or Origin leaves out (a balancer on port 80, a TLS proxy on 443 pass `awb.example` on as it came).
    The SDK's check on /mcp reads `name:*` as a port that must be there, so both checks get both forms."""
    return [form for entry in entries for form in ((entry, entry[:-2]) if entry.endswith(":*") else (entry,))]


def check_exposure(config: Config) -> None:
    """Refuse to serve HTTP on a non-loopback address, or behind a reverse proxy, without a bearer token.

    A proxy listed in `http.trusted_proxies` forwards other machines' requests (there is no other reason
    to believe its `X-Forwarded-For`): bound to loopback or not, the server is then as exposed as one
    bound to a public address."""
    if config.auth_token is not None:
        return
    if not is_loopback(config.host):
        raise ConfigError(
            f"refusing to serve HTTP on {config.host} (not a loopback address) without auth_token; "
            "set AWB_AUTH_TOKEN (16+ characters) or bind 127.0.0.1",
            field="auth_token",
        )
    if config.http.trusted_proxies:
        raise ConfigError(
            "refusing to serve HTTP behind the proxies in http.trusted_proxies without auth_token: they "
            "forward other machines' requests; set AWB_AUTH_TOKEN (16+ characters)",
            field="auth_token",
        )


def _allowed(value: str, allowlist: list[str]) -> bool:
    # The SDK's rule (TransportSecurityMiddleware): an exact entry, or `base:*` for base and any port: ASCII
    # digits (`str.isdigit` takes '²', a Latin-1 byte a header may hold).
    value = value.lower()
    for entry in allowlist:
        entry = entry.lower()
        port = value[len(entry) - 1 :]
        if value == entry or (
            entry.endswith(":*") and value.startswith(entry[:-1]) and port.isascii() and port.isdigit()
        ):
            return True
    return False


#: Host and Origin values remembered per allowlist: a server sees the same few on every request.
_VERDICTS_KEPT = 256


class _Allowlist:
    """`_allowed` against one allowlist, its verdicts on the values last seen kept (a value is raw header
    bytes: decoded, lower-cased and matched against every entry only the first time)."""

    def __init__(self, entries: list[str]) -> None:
        self.entries = entries
        self._verdicts: dict[bytes, bool] = {}

    def allows(self, value: bytes) -> bool:
        verdict = self._verdicts.get(value)
        if verdict is None:
            verdict = _allowed(value.decode("latin-1"), self.entries)
            if len(self._verdicts) >= _VERDICTS_KEPT:  # a client sending ever new values: start again
                self._verdicts.clear()
            self._verdicts[value] = verdict
        return verdict


Refusal = tuple[int, str, str, list[tuple[bytes, bytes]]]


class HttpGuard:
    """ASGI middleware: Host and Origin on the allowlist, and (if configured) `Authorization: Bearer`,
    with wrong credentials limited per client address by `limit`."""

    def __init__(
        self,
        app: ASGIApp,
        settings: TransportSecuritySettings,
        token: str | None,
        limit: SignInLimit | None = None,
        sign_outs: SignOuts | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self._hosts = _Allowlist(settings.allowed_hosts)
        self._origins = _Allowlist(settings.allowed_origins)
        self._token = None if token is None else token.encode("utf-8")
        self.limit = limit if limit is not None else SignInLimit()
        self.sign_outs = sign_outs if sign_outs is not None else SignOuts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        if kind == "http":
            send = _with_security_headers(send)
        refusal = self._refusal(scope)
        if refusal is None:
            # The panel's `/login` counts its wrong tokens in the same limiter (set on the scope, as
            # starlette sets its own keys, rather than a copy of every request's scope).
            scope[SCOPE_KEY] = self.limit
            # The panel's Sign out records the pass here, where every later request's pass is checked.
            scope[SIGN_OUTS_KEY] = self.sign_outs
            await self.app(scope, receive, send)
            return
        status, code, message, extra = refusal
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send_json(send, status, {"error": {"code": code, "message": message, "details": {}}}, extra)

    def _refusal(self, scope: Scope) -> Refusal | None:
        # One pass over the raw headers for the two every request needs (the first of each, as starlette's
        # `Headers.get` reads them; ASGI names are lower-case).
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                if host is None:
                    host = value
            elif name == b"origin" and origin is None:
                origin = value
        if not self._hosts.allows(host or b""):
            return 421, "invalid_host", "this Host is not allowed (see allowed_hosts)", []
        if origin is not None and not self._origins.allows(origin):
            return 403, "invalid_origin", "this Origin is not allowed (see allowed_origins)", []
        if self._token is None:
            return None
        path = str(scope.get("path", ""))
        headers = Headers(scope=scope)
        credential = self._credential(headers, scope)
        if credential == "open":
            return None
        address = client_address(scope)
        if credential != "missing":
            wait = self.limit.retry_after(address)
            if wait:
                # The right token too: a guesser must not learn which of its guesses would have passed.
                detail = [(b"retry-after", str(wait).encode())]
                return 429, "too_many_failures", too_many_failures_message(wait), detail
        if credential == "ok":
            return None
        if credential == "wrong":
            self.limit.failed(address)
        if not path.startswith(("/mcp", "/api")):
            # A person opening the panel without the cookie goes to its sign-in page.
            return 303, "unauthorized", "sign in first", [(b"location", _sign_in(scope).encode())]
        challenge = [(b"www-authenticate", b'Bearer realm="awb"')]
        return 401, "unauthorized", "a valid 'Authorization: Bearer <token>' header is required", challenge

    def _credential(self, headers: Headers, scope: Scope) -> str:
        """`ok`, `wrong`, `missing`, or `open` (the sign-in page and the panel's static files need none).
        The bearer header, or for the web panel's pages (a browser page cannot send headers) the pass its
        sign-in form sets in a cookie (`awb.panel_access`: never the token, and no key to /mcp or /api).
        An expired pass, or one signed out, is an old sign-in, not a guess: missing."""
        path = str(scope.get("path", ""))
        header = headers.get("authorization", "")
        if header.strip() and self._authorized(header):
            return "ok"
        if path == PANEL_LOGIN or path.startswith(PANEL_STATIC):
            return "open"
        presented = "wrong" if header.strip() else "missing"
        if not takes_pass(path):
            return presented
        cookie = SimpleCookie()
        with suppress(CookieError):
            cookie.load(headers.get("cookie", ""))
        morsel = cookie.get(pass_cookie(scope))
        if morsel is None or not morsel.value or pass_expired(morsel.value):
            return presented
        assert self._token is not None
        if not pass_ok(self._token.decode("utf-8"), morsel.value):
            return "wrong"
        return presented if self.sign_outs.signed_out(morsel.value) else "ok"

    def _authorized(self, header: str) -> bool:
        scheme, _, credentials = header.partition(" ")
        assert self._token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode("utf-8"), self._token)


def _with_security_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": security_headers(message.get("headers", ()))}
        await send(message)

    return sending


def _sign_in(scope: Scope) -> str:
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    return sign_in_location(str(scope.get("method", "")), str(scope.get("path", "")), query)


def guard_http(app: ASGIApp, config: Config, sign_outs: SignOuts | None = None) -> HttpGuard:
    """`app` behind the gate configured by `config` (wrap the outermost app: every path is covered). Past
    the gate, one remote client has at most its share of the requests in flight (`RequestShare`). The
    panel's passes signed out are `sign_outs` (the server's, kept in its inventory), or this gate's own."""
    token = None if config.auth_token is None else config.auth_token.get_secret_value()
    shared = RequestShare(app, config.http.max_connections)
    return HttpGuard(shared, transport_security(config), token, limit_for(config), sign_outs)


__all__ = [
    "SECURITY_HEADERS",
    "HttpGuard",
    "check_exposure",
    "guard_http",
    "security_headers",
    "transport_security",
]
