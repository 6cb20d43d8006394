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


def _mac(token: str, expires: int) -> str:
    return hmac.new(token.encode("utf-8"), f"awb panel pass|{expires}".encode(), hashlib.sha256).hexdigest()


def issue_pass(token: str, now: float | None = None) -> str:
    """The cookie's value for a person who signed in with `token`: `<expiry>.<HMAC of it under the token>`."""
    expires = int(time.time() if now is None else now) + PASS_SECONDS
    return f"{expires}.{_mac(token, expires)}"


def pass_ok(token: str, presented: str | None, now: float | None = None) -> bool:
    """Whether `presented` is a pass `issue_pass(token)` gave that has not expired."""
    if not presented:
        return False
    expiry, _, mac = presented.partition(".")
    if not (expiry.isascii() and expiry.isdigit() and len(expiry) <= 12):
        return False
    expires = int(expiry)
    if expires <= (time.time() if now is None else now):
        return False
    return hmac.compare_digest(mac.encode("utf-8", "replace"), _mac(token, expires).encode())


def pass_expired(presented: str | None, now: float | None = None) -> bool:
    """Whether `presented` has the form of a pass whose time is up: an old sign-in, not a guess (it
    could never sign in, so a guesser learns nothing from sending one)."""
    expiry, dot, _ = (presented or "").partition(".")
    if not (dot and expiry.isascii() and expiry.isdigit() and len(expiry) <= 12):
        return False
    return int(expiry) <= (time.time() if now is None else now)


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
