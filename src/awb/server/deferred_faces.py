"""The HTTP server's faces, built once the server listens: MCP first, then the REST API and the web panel.

The MCP SDK's server side is most of what `awb start --transport http` imports (~0.35 s of ~0.55 s of
CPU here), FastAPI, the blueprint runtime and the panel much of the rest. The server says it is ready
when its socket serves; these faces are imported in a worker thread after that, and built on the event
loop. A request that comes first waits until the face it asks for is built (MCP at `/mcp`, the whole
app for every other path), then is answered as it would have been: never a 404 or a refusal in
between. Every path, deferred or not, stays behind the HTTP guard that wraps this app.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from awb import validation
from awb.errors import StartupFailed
from awb.server import heap, sdk_modules
from awb.server.address import MCP_PATH
from awb.server.raw_reply import send_json

if TYPE_CHECKING:
    from awb.config import Config
    from awb.server.mcp import McpFace
    from awb.workbench import Workbench

log = logging.getLogger("awb.server")


def _import_mcp() -> None:
    sdk_modules.defer_wire_models()  # before the SDK's import builds them (`awb start` left it to us)
    import awb.server.mcp_http  # noqa: F401  (the MCP SDK's server side, with the MCP face)


def _import_faces() -> None:
    # Only the imports run in the thread; the faces are built on the event loop. jsonschema too (the
    # first call's argument check would import it on the loop).
    validation.warm_up()
    import awb.api.app
    import awb.web  # noqa: F401


class DeferredFaces:
    """ASGI app: `/mcp` goes to the MCP app once `serving_mcp` has built it (at once when it is given
    built), every other path once `build` has put the whole app (`awb.api.app.HttpApp`: MCP, REST and
    the panel) in place. It answers the server's lifespan itself: the MCP app's session manager runs
    inside `serving_mcp`, which the server holds open while it serves."""

    def __init__(self, mcp: ASGIApp | None = None) -> None:
        self.mcp = mcp
        self._mcp_built = anyio.Event()
        self._mcp_failure: str | None = None
        if mcp is not None:
            self._mcp_built.set()
        self._app: ASGIApp | None = None
        self._built = anyio.Event()
        self._failure: str | None = None
        self._closers: list[Callable[[], None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        app = self._app
        if app is None:
            path = str(scope.get("path", ""))
            if path == MCP_PATH or path.startswith(MCP_PATH + "/"):
                await self._mcp_built.wait()
                if self.mcp is None:
                    await self._unavailable(scope, send, f"the MCP face did not start ({self._mcp_failure})")
                    return
                await self.mcp(scope, receive, send)
                return
            await self._built.wait()
            app = self._app
            if app is None:
                message = f"the REST API and the web panel did not start ({self._failure}); MCP is served on /mcp"
                await self._unavailable(scope, send, message)
                return
        await app(scope, receive, send)

    @asynccontextmanager
    async def serving_mcp(self, workbench: Workbench, config: Config) -> AsyncIterator[McpFace]:
        """Import the MCP SDK (in a thread), build the MCP face and its app, and serve `/mcp` with its
        session manager running until the block ends. A failure is `StartupFailed`, and the requests
        that waited are answered 503 with its reason."""
        try:
            # Abandoned when the server stops first: the import has nothing to undo, and `awb stop`
            # would otherwise wait for it.
            await anyio.to_thread.run_sync(_import_mcp, abandon_on_cancel=True)
            from awb.server.mcp import McpFace
            from awb.server.mcp_http import mcp_app

            face = McpFace(workbench, warm_up=heap.WarmUp())
            app = mcp_app(face, config)
        except Exception as error:
            self._mcp_failure = f"{type(error).__name__}: {error}"
            self._mcp_built.set()
            raise StartupFailed(f"the MCP face did not start: {self._mcp_failure}") from error
        async with face.server.session_manager.run():
            self.mcp = app
            self._mcp_built.set()
            yield face

    @property
    def mcp_failure(self) -> str | None:
        """Why the MCP face did not start (the error's type and message), or None."""
        return self._mcp_failure

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
            if self.mcp is None:
                raise RuntimeError("REST and the panel are built beside the MCP face, which is not built")
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

    async def _unavailable(self, scope: Scope, send: Send, message: str) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1011})
            return
        await send_json(send, 503, {"error": {"code": "unavailable", "message": message, "details": {}}})


async def _lifespan(receive: Receive, send: Send) -> None:
    """The server's lifespan, with nothing of its own to start or stop: what the faces run is run by
    `DeferredFaces.serving_mcp` (the MCP session manager) and closed by `close` (REST, the panel)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


__all__ = ["DeferredFaces"]
