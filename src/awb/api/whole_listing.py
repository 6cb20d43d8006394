"""A listing the product spec returns whole, sent as it is read.

The spec's REST face returns "all log entries" of a session, which grow with use without bound (a run logs
up to 256,000 characters, and a session's runs are not counted). Asked without `limit`, the route keeps
that contract, but builds no reply in memory: `whole_listing` writes the JSON
object the paged reply would be (`next_after` null) while it reads the store a page at a time, so the
server holds one page, however long the listing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from fastapi.responses import StreamingResponse
from pydantic import BaseModel

Cursor = TypeVar("Cursor")
#: Items read from the store at a time while a whole listing is sent.
PAGE = 200


async def whole_listing(
    fields: dict[str, Any],
    key: str,
    read_page: Callable[[Cursor | None, int], Awaitable[tuple[list[BaseModel], Cursor | None]]],
) -> StreamingResponse:
    """`{**fields, key: [every item], "next_after": null}`, its items read `PAGE` at a time by
    `read_page(after, limit)`, which answers a page and the cursor of the next (None: the last).

    The first page is read before the reply starts, so a store that fails (or a cursor that names
    nothing) is answered with its error and status; a failure past it can only cut the reply short."""
    items, after = await read_page(None, PAGE)

    async def body() -> AsyncIterator[bytes]:
        nonlocal items, after
        head = json.dumps({**fields, key: []})
        yield head[:-2].encode()  # the object up to the list's opening bracket
        first = True
        while True:
            for item in items:
                yield (b"" if first else b",") + item.model_dump_json().encode()
                first = False
            if after is None:
                break
            items, after = await read_page(after, PAGE)
        yield b'],"next_after":null}'

    return StreamingResponse(body(), media_type="application/json")


__all__ = ["PAGE", "whole_listing"]
