"""What the panel's changes share: reading a posted form (bounded), where a change may send the browser next,
and the notice it leaves on the page it returns to."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from awb.safe_text import visible
from awb.text import cap_text
from awb.web import security

#: Largest form body the panel reads; its forms carry a version number or a token.
MAX_FORM_BYTES = 16 * 1024

#: Notices a change leaves for the page it returns to: `?done=<key>&what=<name>`.
NOTICES = {
    "signed_out": "Signed out.",
    "deleted": "Deleted {}.",
    "equipped": "Equipped {}.",
    "unequipped": "Unequipped {}.",
    "rolled_back": "Rolled back: {} is current.",
    "applied": "Applied: wrote {}.",
    "discarded": "Discarded the staged write to {}.",
}


Handler = Callable[[Request], Awaitable[Response]]
#: One of the panel's guards (`Panel._page`, `Panel._change`): a handler in, the guarded handler out.
Guard = Callable[[Handler], Handler]


class Render(Protocol):
    """The panel's page renderer (`Panel._render`), handed to the route groups that live apart from it."""

    def __call__(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse: ...


def notice(request: Request) -> str | None:
    template = NOTICES.get(request.query_params.get("done", ""))
    # `what` is a path or a name a tool chose, and anyone can link here with one: shown escaped.
    return template.format(visible(request.query_params.get("what", "")[:300])) if template else None


def back(path: str, done: str, what: str) -> RedirectResponse:
    separator = "&" if "?" in path else "?"
    return RedirectResponse(f"{path}{separator}done={done}&what={quote(what)}", status_code=303)


def safe_next(target: str) -> str:
    """Only a path on this server: never `//host` or a full URL (no open redirect)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def quoted(raw: str) -> str:
    # What a person typed, short enough for an error page (it may be thousands of digits).
    return repr(cap_text(raw, 40))


async def read_form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise security.Refused(413, "limit_exceeded", f"the form is over {MAX_FORM_BYTES} bytes")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[0] for key, values in fields.items()}


async def return_to(request: Request) -> str:
    form = await read_form(request)
    return safe_next(form.get("return_to", "/"))
