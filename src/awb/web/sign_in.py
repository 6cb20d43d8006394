"""Signing in to the panel and out of it: `/login` trades the API token for a pass cookie (only when a token
is configured), `/logout` ends that pass on the server and in the browser."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from awb import panel_access, sign_in_limit
from awb.config import Config
from awb.shares import client_address
from awb.sign_outs import SignOuts
from awb.web import security
from awb.web.forms import Guard, Render, back, read_form, safe_next


class SignIn:
    """The sign-in page and form, and Sign out; `sign_outs` finds the passes signed out for a request."""

    def __init__(self, config: Config, render: Render, sign_outs: Callable[[Request], SignOuts]) -> None:
        self.config = config
        self._render = render
        self._sign_outs = sign_outs
        # Used when the panel is served without the server's guard, which hands `/login` its own limiter.
        self.limit = sign_in_limit.limit_for(config)

    def routes(self, change: Guard) -> list[Route]:
        return [
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", change(self.sign_out), methods=["POST"]),
        ]

    async def login_page(self, request: Request) -> Response:
        return self._render(request, "login.html", next=safe_next(request.query_params.get("next", "/")))

    async def login(self, request: Request) -> Response:
        # Open to anyone (no guard around it): every refusal is answered here, never raised as a 500.
        try:
            security.check_same_origin(request)
            form = await read_form(request)
        except security.Refused as refused:
            return self._render(request, "error.html", refused.status, code=refused.code, message=refused.message)
        expected = security.configured_token(self.config)
        target = safe_next(form.get("next", "/"))
        if expected is None:
            return RedirectResponse(target, status_code=303)
        presented = form.get("token", "")
        if not presented:
            return self._render(request, "login.html", 401, next=target, failed=True)
        # The guard's limiter when behind it, so a guess here and a guess at /api count alike.
        limit: sign_in_limit.SignInLimit = request.scope.get(sign_in_limit.SCOPE_KEY, self.limit)
        address = client_address(request.scope)
        wait = limit.retry_after(address)
        if wait:
            message = sign_in_limit.too_many_failures_message(wait)
            page = self._render(request, "login.html", 429, next=target, locked=message)
            page.headers["Retry-After"] = str(wait)
            return page
        if not security.token_ok(expected, presented):
            limit.failed(address)
            return self._render(request, "login.html", 401, next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        # A pass, not the token: every server on this host name, whatever its port, is sent the cookie.
        # Its name is this server's own, so it leaves other servers' passes alone.
        response.set_cookie(
            panel_access.pass_cookie(request.scope),
            panel_access.issue_pass(expected),
            max_age=panel_access.PASS_SECONDS,
            httponly=True,
            samesite="strict",
            path="/",
            # Signed in over https (through a TLS proxy in `http.trusted_proxies`, the only way this
            # server hears of https): the browser must never send the pass over plain http.
            secure=request.url.scheme == "https",
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        """End this browser's sign-in (a change, so from the panel's own pages only): the server refuses its
        pass from now on, ends the event streams it opened, and the browser is told to drop it."""
        presented = security.good_pass(request, security.configured_token(self.config))
        if presented is not None:
            await self._sign_outs(request).sign_out(presented)
        response = back(panel_access.PANEL_LOGIN, "signed_out", "")
        response.delete_cookie(
            panel_access.pass_cookie(request.scope),
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response
