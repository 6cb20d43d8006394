"""How many model runs the REST API has going at once, and one remote client's share of them.

A run posted to `/api/agents/run` (or an instruction improvement) talks to a model for up to its timeout
and spends the operator's tokens; with no cap, a client with the token could start as many as the
connection cap lets it, and one client could hold them all. At most `blueprints.max_concurrent_runs`
run at once, and one remote client (its address: `awb.shares`) holds at most three quarters of them;
past either, a new run is answered `429 busy` with `Retry-After` at once, as the request share answers
(`awb.server.request_share`). Clients on this machine have no share of their own (the cap only), as for
requests in flight: a REST request names no session to tell them apart by.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from fastapi import Request

from awb.api.errors import ErrorBody
from awb.errors import Busy
from awb.shares import Shares, client_address, share_key

RETRY_AFTER_SECONDS = 5
#: The 429 of every endpoint that starts a model run, for the OpenAPI document.
RUN_BUSY: dict[str, Any] = {
    "model": ErrorBody,
    "description": "`busy`: the server's model runs, or this client's share of them, are all going; "
    "`Retry-After` says when to try again.",
}


class RunsBusy(Busy):
    """No room for another run: the server's cap, or this client's share of it (`details.scope`)."""

    http_status = 429
    retry_after: ClassVar[int] = RETRY_AFTER_SECONDS


class RunShare:
    """The runs the REST API has going; held and given back on the server's event loop (no lock)."""

    def __init__(self, limit: int) -> None:
        self.runs = Shares(limit)

    @asynccontextmanager
    async def hold(self, request: Request) -> AsyncIterator[None]:
        """One run for the request's client for as long as the block lasts, or `RunsBusy`."""
        client = share_key(client_address(request.scope), None)
        refused = self.runs.take(client)
        if refused == "server":
            raise RunsBusy(
                f"{self.runs.open} model runs are going, the most this server runs at once "
                "(blueprints.max_concurrent_runs); try again when one ends",
                scope="server",
                limit=self.runs.limit,
            )
        if refused == "client":
            raise RunsBusy(
                f"this client has {self.runs.held_by(client)} model runs going, its share of the "
                f"{self.runs.limit} this server runs at once (three quarters of blueprints.max_concurrent_runs); "
                "try again when one ends",
                scope="client",
                limit=self.runs.limit,
                per_client=self.runs.share,
            )
        try:
            yield
        finally:
            self.runs.give_back(client)

    @property
    def going(self) -> int:
        return self.runs.open


def run_share(request: Request) -> RunShare:
    share = request.app.state.runs
    assert isinstance(share, RunShare)
    return share


__all__ = ["RETRY_AFTER_SECONDS", "RUN_BUSY", "RunShare", "RunsBusy", "run_share"]
