"""An unexpected error in a REST endpoint is a 500 with an incident id, and the server log has a line with
that id for every one; a client that can cause them at will gets only 20 tracebacks a minute written (per
kind), the rest as their one line, and the log says how many tracebacks it left out."""

from __future__ import annotations

import io
import logging
import re

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from awb.api.errors import GuardedRoute
from awb.cli.logs import FORMAT, BatchedHandler, VisibleFormatter
from awb.log_limit import PerRequestLimit


def _app() -> FastAPI:
    router = APIRouter(route_class=GuardedRoute)

    @router.get("/api/breaks")
    async def breaks() -> None:
        raise RuntimeError("a bug this request reaches")

    app = FastAPI()
    app.include_router(router)
    return app


def test_every_incident_is_in_the_log_but_only_the_first_tracebacks_are() -> None:
    written = io.StringIO()
    target = logging.StreamHandler(written)
    target.setFormatter(VisibleFormatter(FORMAT))
    handler = BatchedHandler(target, limit=PerRequestLimit())  # as the server's log is set up
    logger = logging.getLogger("awb.api")
    logger.addHandler(handler)
    try:
        with TestClient(_app()) as client:
            replies = [client.get("/api/breaks") for _ in range(50)]
    finally:
        logger.removeHandler(handler)
        handler.close()  # writes what is pending, and the summary of the open minute
    assert {reply.status_code for reply in replies} == {500}
    incidents = [reply.json()["error"]["details"]["incident"] for reply in replies]
    log = written.getvalue()
    lines = [line for line in log.splitlines() if "unexpected error in GET /api/breaks" in line]
    assert [re.search(r"incident (\w+)", line).group(1) for line in lines] == incidents  # type: ignore[union-attr]
    assert log.count("Traceback (most recent call last)") == 20
    assert "30 more lines like 'unexpected error in %s %s (incident %s)'" in log
    assert "were written without their traceback" in log
