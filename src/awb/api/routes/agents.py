"""`/api/agents`: run a blueprint on a message (within a session), and read a session's run logs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from awb.api.errors import ERRORS, ErrorBody, GuardedRoute
from awb.api.run_share import RUN_BUSY, RunShare, run_share
from awb.api.service import blueprint_service
from awb.api.whole_listing import whole_listing
from awb.blueprints.journal import LogEntry
from awb.blueprints.runner import RunReply
from awb.blueprints.schema import Blueprint
from awb.blueprints.service import BlueprintService
from awb.blueprints.sessions import LOG_PAGE_MAX, MAX_MESSAGE_CHARS, SESSION_ID_PATTERN, SESSION_LOOKUP_PATTERN
from awb.inventory.stored_int import MAX_STORED_INT

router = APIRouter(prefix="/api/agents", tags=["agents"], route_class=GuardedRoute)
Service = Annotated[BlueprintService, Depends(blueprint_service)]
Runs = Annotated[RunShare, Depends(run_share)]


class RunRequest(BaseModel):
    # A field it does not take is a 400 naming it: a misspelt `sessionId`, dropped, started a new session.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["blueprint"], "not": {"required": ["blueprint_id"]}},
                {"required": ["blueprint_id"], "not": {"required": ["blueprint"]}},
            ]
        },
    )

    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    #: An ephemeral blueprint, compiled for this request only.
    blueprint: Blueprint | None = None
    #: A blueprint compiled (cached) or saved earlier.
    blueprint_id: str | None = Field(None, max_length=64)
    #: Continue a session (its history is restored when the blueprint's memory is on); new when absent.
    session_id: str | None = Field(None, pattern=SESSION_ID_PATTERN)


class RunResponse(RunReply):
    cache_hit: bool


class SessionLogs(BaseModel):
    session_id: str
    entries: list[LogEntry]
    #: Give it as `after` for the entries that follow; null when `entries` ends the log.
    next_after: int | None = None


_RUN_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    404: {"model": ErrorBody, "description": "Unknown blueprint_id."},
    422: {"model": ErrorBody, "description": "A guardrail ended the run; `details.guardrail` names it."},
    429: RUN_BUSY,
    502: {"model": ErrorBody, "description": "The model provider (or an MCP server) failed; its message is included."},
}


@router.post("/run", responses=_RUN_ERRORS)
async def run_agent(service: Service, runs: Runs, request: RunRequest, http: Request) -> RunResponse:
    """Run a blueprint (given inline, or by `blueprint_id`) on one message."""
    async with runs.hold(http):
        reply, hit = await service.run(
            message=request.message,
            blueprint=request.blueprint,
            blueprint_id=request.blueprint_id,
            session_id=request.session_id,
        )
    return RunResponse(**reply.model_dump(), cache_hit=hit)


@router.get("/logs", responses=ERRORS, response_model=SessionLogs)
async def run_logs(
    service: Service,
    session_id: Annotated[str, Query(pattern=SESSION_LOOKUP_PATTERN)],
    limit: Annotated[
        int | None, Query(ge=1, le=LOG_PAGE_MAX, description="Most entries in this reply; absent: all of them.")
    ] = None,
    # Bounded by what the store keeps: past 2**63-1 SQLite overflows (a 500), and no entry is numbered so.
    after: Annotated[
        int,
        Query(ge=0, le=MAX_STORED_INT, description="The `next_after` of the previous page; 0: from the start."),
    ] = 0,
) -> SessionLogs | StreamingResponse:
    """A session's log entries in chronological order (run_start, tool_call, guardrail_violation, run_end):
    all of them, or with `limit` a page at a time (`next_after` is where the next page starts, null on the
    last one). A page also ends once its entries reach 8 MiB of JSON (`next_after` set all the same): read
    on until `next_after` is null."""
    if limit is None:

        async def read(cursor: int | None, size: int) -> tuple[list[BaseModel], int | None]:
            entries, following = await service.log_page(
                session_id, after=after if cursor is None else cursor, limit=size
            )
            return list(entries), following

        return await whole_listing({"session_id": session_id}, "entries", read)
    entries, next_after = await service.log_page(session_id, after=after, limit=limit)
    return SessionLogs(session_id=session_id, entries=entries, next_after=next_after)
