"""Where the web panel's sign-in lives, shared by the server's HTTP guard (which answers a signed-out
browser before the panel sees it) and the panel itself (behind a guard or alone): one rule for both.

The sign-in cookie never holds the API token. Browsers send a cookie to every port of its host name,
so any other server on 127.0.0.1 a person visits reads it: it holds a pass derived from the token
(HMAC), which opens the panel's pages only (never /mcp or /api) and expires. For the same reason its
name carries the server's port (`pass_cookie`): with one name for all, two servers on one machine
overwrote each other's pass, and signing in to one signed the person out of the other.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

#: The panel's sign-in page, its static files, and how the cookie that carries the sign-in pass is named.
PANEL_LOGIN = "/login"
PANEL_STATIC = "/static/"
PANEL_COOKIE_PREFIX = "awb_panel_"
#: How long a sign-in lasts (a leaked pass stops working after this long).
PASS_SECONDS = 12 * 3600
#: The faces that take the bearer token only: a panel pass is no API credential.
TOKEN_ONLY_PREFIXES = ("/mcp", "/api")


def cookie_name(port: int | None) -> str:
    """The sign-in cookie of the server listening on `port`: `awb_panel_7777`."""
    return f"{PANEL_COOKIE_PREFIX}{port if port is not None else 'pass'}"


def pass_cookie(scope: Mapping[str, Any]) -> str:
    """The sign-in cookie of the server that serves the request of ASGI `scope`, by the port of the socket
    it came in on (the server's own: no header a client sends changes it)."""
    server = scope.get("server")
    port = server[1] if isinstance(server, (tuple, list)) and len(server) == 2 else None
    return cookie_name(port if isinstance(port, int) else None)


def _mac(token: str, expires: int, nonce: str) -> str:
    # A pass without a nonce is one an older awb gave: it stays good until it expires.
    message = f"awb panel pass|{expires}|{nonce}" if nonce else f"awb panel pass|{expires}"
    return hmac.new(token.encode("utf-8"), message.encode(), hashlib.sha256).hexdigest()


def issue_pass(token: str, now: float | None = None) -> str:
    """The cookie's value for a person who signed in with `token`: `<expiry>.<nonce>.<HMAC of both under the
    token>`. The nonce gives each sign-in a pass of its own, so signing one browser out (`awb.sign_outs`)
    leaves another that signed in within the same second signed in."""
    expires = int(time.time() if now is None else now) + PASS_SECONDS
    nonce = secrets.token_hex(8)
    return f"{expires}.{nonce}.{_mac(token, expires, nonce)}"


def pass_expiry(presented: str | None) -> int | None:
    """When `presented` expires (Unix seconds), if it has the form of a pass; None otherwise."""
    expiry, dot, _ = (presented or "").partition(".")
    if not (dot and expiry.isascii() and expiry.isdigit() and len(expiry) <= 12):
        return None
    return int(expiry)


def pass_ok(token: str, presented: str | None, now: float | None = None) -> bool:
    """Whether `presented` is a pass `issue_pass(token)` gave that has not expired."""
    expires = pass_expiry(presented)
    if presented is None or expires is None or expires <= (time.time() if now is None else now):
        return False
    nonce, _, mac = presented.partition(".")[2].rpartition(".")
    if len(nonce) > 32 or not all(c in "0123456789abcdef" for c in nonce):
        return False
    return hmac.compare_digest(mac.encode("utf-8", "replace"), _mac(token, expires, nonce).encode())


def pass_id(presented: str) -> str:
    """What names the sign-in of a pass `pass_ok` took: its HMAC, which one sign-in's pass alone has (two
    spellings of one pass, an old one with an empty nonce `<expiry>..<HMAC>`, share it)."""
    return presented.rpartition(".")[2]


def pass_expired(presented: str | None, now: float | None = None) -> bool:
    """Whether `presented` has the form of a pass whose time is up: an old sign-in, not a guess (it
    could never sign in, so a guesser learns nothing from sending one)."""
    expires = pass_expiry(presented)
    return expires is not None and expires <= (time.time() if now is None else now)


def takes_pass(path: str) -> bool:
    """Whether a panel pass may sign in a request for `path`: the panel's pages, not /mcp or /api."""
    return not any(path == prefix or path.startswith(prefix + "/") for prefix in TOKEN_ONLY_PREFIXES)


def sign_in_location(method: str, path: str, query: str) -> str:
    """The sign-in page, with `next` naming the page a browser asked for when it is one to come back to:
    a GET of a path on this server (never `//host`; a change's URL is no page). `/login` checks `next`
    again before it redirects there."""
    if method not in ("GET", "HEAD") or path in ("", "/") or path.startswith("//") or "\\" in path:
        return PANEL_LOGIN
    return f"{PANEL_LOGIN}?next={quote(f'{path}?{query}' if query else path, safe='/')}"
