"""The REST face's one error mapping: `AwbError` -> its `http_status` and `{"error": {code, message, details}}`;
malformed requests -> 400; anything unexpected -> 500 with a generic message (full details in the log).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from awb.blueprints.schema import describe_errors
from awb.errors import AwbError
from awb.log_limit import PER_REQUEST, TRACEBACK_LIMITED
from awb.text import cap_text

log = logging.getLogger("awb.api")

#: Largest request body the API reads; blueprints are small.
MAX_BODY_BYTES = 1024 * 1024


class ErrorInfo(BaseModel):
    code: str
    message: str
    details: dict[str, Any]


class ErrorBody(BaseModel):
    error: ErrorInfo


def error_response(status: int, code: str, message: str, **details: Any) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status)


def from_awb_error(err: AwbError) -> JSONResponse:
    response = JSONResponse({"error": err.to_dict()}, status_code=err.http_status)
    # A refusal for want of room says when to ask again (`awb.api.run_share`).
    retry_after = getattr(err, "retry_after", None)
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def _unwrapped(error: Mapping[str, Any]) -> dict[str, Any]:
    loc = tuple(error.get("loc", ()))
    if loc and loc[0] in ("body", "query", "path"):
        loc = loc[1:]
    return {**error, "loc": loc, "msg": error.get("msg", ""), "type": error.get("type", "")}


async def request_invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    undecodable = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
    if undecodable is not None:
        # FastAPI locates it at ("body", <character>) and calls it "JSON decode error": said as the blueprint
        # routes say it, with the decoder's reason and where it stopped.
        reason = f"{(undecodable.get('ctx') or {}).get('error', 'JSON decode error')} (char {undecodable['loc'][-1]})"
        return error_response(
            400, "bad_request", f"the body is not JSON: {reason}", errors=[{"path": "(body)", "message": reason}]
        )
    unwrapped = [_unwrapped(e) for e in exc.errors()]
    errors = describe_errors(unwrapped, within="blueprint")
    summary = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
    if unwrapped and all(e["loc"][:1] == ("blueprint",) for e in unwrapped):
        # Only the inline blueprint of a run is wrong: the same error as posting it to /api/blueprints.
        return error_response(400, "blueprint_invalid", f"invalid blueprint: {summary}", errors=errors)
    return error_response(400, "bad_request", f"malformed request: {summary}", errors=errors)


#: Codes for the statuses the framework raises itself (routing, body parsing): each says what to fix.
HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "limit_exceeded",
    415: "unsupported_media_type",
}


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTP_CODES.get(exc.status_code, "http_error")
    message = str(exc.detail)
    if exc.status_code == 400 and message == "There was an error parsing the body":
        # FastAPI's words for any body its JSON parser gave up on (nesting too deep included).
        message = "the body is not JSON this server can read (malformed, or nested too deeply)"
    response = error_response(exc.status_code, code, message)
    # Keep the exception's own headers (a 405's Allow says which methods would do).
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        response.headers["Allow"] = _allowed_methods(request) or response.headers.get("Allow", "")
    return response


def _allowed_methods(request: Request) -> str:
    """Every method the API takes at this path: the router's 405 names only the first route that matched the
    path (`GET /api/blueprints` and `POST /api/blueprints` are two routes), so Allow left out the others.
    Read from the OpenAPI document (built once), which lists each path's methods; "" for a path it lacks."""
    methods: set[str] = set()
    path = request.url.path
    for template, operations in request.app.openapi().get("paths", {}).items():
        pattern, _, _ = compile_path(template)
        if pattern.match(path):
            methods |= {method.upper() for method in operations if method.upper() in _METHODS}
    if "GET" in methods:
        methods.add("HEAD")  # answered as GET is (`awb.api.head`)
    return ", ".join(sorted(methods))


_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"}


class BodyLimit:
    """Caps every request body, chunked ones included (Content-Length alone would not)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"request body over {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


class GuardedRoute(APIRoute):
    """Every endpoint: bounded body, `AwbError` mapped once, the unexpected logged and answered with 500."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            length = request.headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
                return error_response(413, "limit_exceeded", f"request body over {MAX_BODY_BYTES} bytes")
            if self.body_field is not None and not _json_media(request.headers.get("content-type", "")):
                # Read as bytes, such a body was refused as "Input should be a valid dictionary", which
                # names no header; the blueprint endpoints, which read theirs by hand, name it too.
                media = request.headers.get("content-type", "").split(";")[0].strip() or "no content type"
                return error_response(
                    400,
                    "bad_request",
                    f"send the body as application/json, not {cap_text(media, 100)}",
                    errors=[{"path": "(content-type)", "message": "must be application/json"}],
                )
            try:
                return await handler(request)
            except (HTTPException, RequestValidationError):
                raise
            except AwbError as err:
                if err.http_status >= 500:
                    log.warning("%s %s failed: %r", request.method, request.url.path, err, extra=PER_REQUEST)
                return from_awb_error(err)
            except Exception:  # boundary: never leak internals; keep them in the log under an incident id
                incident = uuid.uuid4().hex[:12]
                # A client that can cause one at will could fill the log with tracebacks: past 20 a minute
                # the line (its incident id) is written without one (`awb.log_limit`).
                path = cap_text(request.url.path, 200)
                log.exception(
                    "unexpected error in %s %s (incident %s)", request.method, path, incident, extra=TRACEBACK_LIMITED
                )
                return error_response(500, "internal_error", "unexpected error; see the server log", incident=incident)

        return guarded


def _json_media(content_type: str) -> bool:
    """`application/json` or a `+json` type, as FastAPI reads a body as JSON."""
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


#: The error statuses every endpoint may answer, for the OpenAPI document.
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Malformed request or invalid blueprint (field-level errors)."},
    413: {"model": ErrorBody, "description": "Request body too large."},
    500: {"model": ErrorBody, "description": "Unexpected error; details are in the server log."},
}
