"""Where the web panel's sign-in lives, shared by the server's HTTP guard (which answers a signed-out
browser before the panel sees it) and the panel itself (behind a guard or alone): one rule for both."""

from __future__ import annotations

from urllib.parse import quote

#: The panel's sign-in page, its static files and the cookie that carries the token.
PANEL_LOGIN = "/login"
PANEL_STATIC = "/static/"
PANEL_COOKIE = "awb_panel_token"


def sign_in_location(method: str, path: str, query: str) -> str:
    """The sign-in page, with `next` naming the page a browser asked for when it is one to come back to:
    a GET of a path on this server (never `//host`; a change's URL is no page). `/login` checks `next`
    again before it redirects there."""
    if method not in ("GET", "HEAD") or path in ("", "/") or path.startswith("//") or "\\" in path:
        return PANEL_LOGIN
    return f"{PANEL_LOGIN}?next={quote(f'{path}?{query}' if query else path, safe='/')}"
