"""The panel's staged writes: the list, one write's page (its diff), and Apply and Discard, with the same
checks as `awb staged apply`."""

from __future__ import annotations

from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from awb.errors import InvalidParams
from awb.sandbox import staging
from awb.web import views
from awb.web.forms import Guard, Render, back, quoted
from awb.web.numbers import whole_number
from awb.workbench import Workbench


class StagedWrites:
    """The `/staged` pages and changes; the panel wraps them in its guards (`routes`)."""

    def __init__(self, workbench: Workbench, render: Render) -> None:
        self.workbench = workbench
        self._render = render

    def routes(self, page: Guard, change: Guard) -> list[Route]:
        return [
            Route("/staged", page(self.staged_page)),
            Route("/staged/{staged_id}", page(self.staged_write_page)),
            Route("/staged/{staged_id}/apply", change(self.apply), methods=["POST"]),
            Route("/staged/{staged_id}/discard", change(self.discard), methods=["POST"]),
        ]

    async def staged_page(self, request: Request) -> Response:
        status = request.query_params.get("status", staging.PENDING)
        if status not in (staging.PENDING, staging.APPLIED, staging.DISCARDED, "all"):
            status = staging.PENDING
        after = whole_number(request.query_params.get("after"))
        before = None if after is not None else whole_number(request.query_params.get("before"))
        found = await self.workbench.lane.work(
            views.staged_views, self.workbench, None if status == "all" else status, after=after, before=before
        )
        return self._render(
            request,
            "staged.html",
            writes=found.views,
            page=found,
            paged=after is not None or before is not None,
            shown_status=status,
            view="staged",
        )

    async def staged_write_page(self, request: Request) -> Response:
        found = await self.workbench.lane.work(views.staged_view, self.workbench, _staged_id(request))
        return self._render(request, "staged_write.html", w=found, view="staged")

    async def apply(self, request: Request) -> Response:
        store: Any = self.workbench.store
        config = self.workbench.config
        # The same checks as `awb staged apply`: the configuration's grants as they are now, and every
        # file the configuration says is awb's (without the list, only .awb/ and awb.config.json were).
        apply = partial(staging.apply_staged, grants=config.sandbox.grants, protected=staging.protected_paths(config))
        write = await self.workbench.lane.work(apply, store, _staged_id(request))
        return back("/staged", "applied", write.path)

    async def discard(self, request: Request) -> Response:
        store: Any = self.workbench.store
        write = await self.workbench.lane.work(staging.discard_staged, store, _staged_id(request))
        return back("/staged", "discarded", write.path)


def _staged_id(request: Request) -> int:
    raw = request.path_params["staged_id"]
    staged_id = whole_number(raw)
    if staged_id is None:
        # The same answer as for a number that names no write: there is no staged write by that id.
        raise InvalidParams(f"no staged write with id {quoted(raw)}", field="id")
    return staged_id
