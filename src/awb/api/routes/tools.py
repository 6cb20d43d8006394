"""The inventory over REST: search, ranked exactly as `awb_search` ranks (the CLI asks a running server
here, whose embedding model is already loaded, rather than load it in a fresh process)."""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Query, Request

from awb.api.errors import ERRORS, GuardedRoute
from awb.browse import MAX_LIMIT, MAX_QUERY_CHARS
from awb.workbench import Workbench

router = APIRouter(prefix="/api", tags=["tools"], route_class=GuardedRoute)


def _workbench(request: Request) -> Workbench:
    return cast(Workbench, request.app.state.workbench)


@router.get("/tools/search", responses=ERRORS)
async def search_tools(
    workbench: Annotated[Workbench, Depends(_workbench)],
    q: Annotated[str, Query(description="Words describing the tool.", max_length=MAX_QUERY_CHARS)],
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 10,
) -> dict[str, Any]:
    """The best `limit` tools for `q`: what the MCP `search` meta-tool returns (`query`, `mode`, `results`).

    On a worker thread, so embedding the query never holds up the loop; on a shared inventory within its
    deadline (`unavailable` past it)."""
    found = await workbench.lane.work(workbench.search, q, limit=limit)
    return found.model_dump(mode="json")
