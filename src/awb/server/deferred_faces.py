"""The REST API and the web panel, built once the MCP face already serves.

FastAPI, the blueprint runtime and the panel are about a fifth of what `awb start --transport http`
imports before it can answer (the MCP SDK is most of the rest). The server says it is ready when MCP
serves; these faces are imported in a worker thread after that, and a request for them that comes
first waits until they are built. MCP requests never wait for them. Every path, deferred or not,
stays behind the HTTP guard that wraps this app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from awb import validation
from awb.server.raw_reply import send_json

if TYPE_CHECKING:
    from awb.server.mcp import McpFace
    from awb.workbench import Workbench

log = logging.getLogger("awb.server")

MCP_PREFIX = "/mcp"


def _import_faces() -> None:
    # Only the imports run in the thread; the faces are built on the event loop. jsonschema too (the
    # first call's argument check would import it on the loop).
    validation.warm_up()
    import awb.api.app
    import awb.web  # noqa: F401


class DeferredFaces:
    """ASGI app: `/mcp` (and the lifespan) go to the MCP app at once; every other path waits until
    `build` has put the whole app (`awb.api.app.HttpApp`: MCP, REST and the panel) in place."""

    def __init__(self, mcp: ASGIApp) -> None:
        self.mcp = mcp
        self._app: ASGIApp | None = None
        self._built = anyio.Event()
        self._failure: str | None = None
        self._closers: list[Callable[[], None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            path = str(scope.get("path", ""))
            if scope["type"] == "lifespan" or path == MCP_PREFIX or path.startswith(MCP_PREFIX + "/"):
                await self.mcp(scope, receive, send)
                return
            await self._built.wait()
            app = self._app
            if app is None:
                await self._unavailable(scope, send)
                return
        await app(scope, receive, send)

    async def build(self, workbench: Workbench, face: McpFace) -> None:
        """Import and build REST and the panel; a failure is logged and those paths answer 503."""
        try:
            # Abandoned when the server stops first: the import (~1 s on a busy machine) has nothing to
            # undo, and `awb stop` would otherwise wait for it.
            await anyio.to_thread.run_sync(_import_faces, abandon_on_cancel=True)
            from awb.api.app import http_app as rest_and_mcp
            from awb.web import create_panel

            panel = create_panel(workbench)
            self._closers.append(panel.close)
            app, api = rest_and_mcp(workbench, self.mcp, face.server, panel=panel)
            self._closers.append(api.close)
            self._app = app
        except Exception as error:  # MCP keeps serving; the other paths say why they cannot
            self._failure = f"{type(error).__name__}: {error}"
            log.exception("the REST API and the web panel did not start")
        finally:
            self._built.set()

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()

    async def _unavailable(self, scope: Scope, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1011})
            return
        message = f"the REST API and the web panel did not start ({self._failure}); MCP is served on /mcp"
        await send_json(send, 503, {"error": {"code": "unavailable", "message": message, "details": {}}})


__all__ = ["DeferredFaces"]
