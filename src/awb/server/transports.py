"""Serving the MCP face over stdio or streamable HTTP, with the workbench's life cycle around it."""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import re
import socket
import sys
import time
from typing import TYPE_CHECKING

import anyio
import uvicorn

from awb import validation
from awb.errors import AwbError, StartupFailed
from awb.search.backfill import backfill_in_background
from awb.server import heap
from awb.server.address import MCP_PATH, http_url
from awb.server.deferred_faces import DeferredFaces
from awb.server.http_guard import check_exposure, guard_http
from awb.server.http_limits import uvicorn_config
from awb.sign_outs import SignOuts
from awb.workbench import Workbench

if TYPE_CHECKING:
    from awb.config import Config

log = logging.getLogger("awb.server")


async def serve_stdio(workbench: Workbench) -> None:
    """Serve one client on stdin/stdout until it disconnects. Nothing else may write to stdout."""
    from awb.server.mcp import McpFace
    from awb.server.stdio import serve_stdio_streams

    face = McpFace(workbench, warm_up=heap.WarmUp())
    await workbench.start(warm_all=True)
    validation.warm_up()  # everything a call needs is loaded before the host's first request
    heap.settle()
    _say_search_mode(workbench)
    sdk_transport = workbench.config.stdio_transport == "sdk"
    # Requests read before stdin closed are answered; a tool call may take its whole timeout.
    drain_seconds = workbench.config.tool_execution_timeout_ms / 1000 + 5
    streams = serve_stdio_streams(sdk_transport=sdk_transport, drain_seconds=drain_seconds)
    async with workbench, streams as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(backfill_in_background, workbench.search_engine)
        await face.server.run(read_stream, write_stream, face.initialization_options())
        tasks.cancel_scope.cancel()


#: A host name as RFC 1123 spells it; anything else is refused before any lookup.
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket for `host:port` (port 0: any free port), or `StartupFailed` in one line.

    Binding here rather than inside uvicorn turns "address in use" and a bad host into our error
    instead of uvicorn's log line and `sys.exit`, and tells the caller which port 0 became."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        if not _HOST_NAME.match(host):
            raise StartupFailed(f"--host {host!r} is not an IP address or a host name", host=host) from None
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        except socket.gaierror as error:
            raise StartupFailed(f"cannot resolve --host {host!r}: {error.strerror}", host=host) from None
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP, and
    # accepted sockets copy the listener's. With Nagle on, a response written in two parts waits for the
    # client's delayed ACK: ~40 ms on every request. Set on the listener too, which Linux passes on.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            message = f"port {port} on {host} is already in use (is awb already running? try --port 0)"
        else:
            message = f"cannot listen on {host}:{port}: {error.strerror or error}"
        raise StartupFailed(message, host=host, port=port) from None
    sock.setblocking(False)
    return sock


async def serve_http(workbench: Workbench, sock: socket.socket, started: float | None = None) -> None:
    """Serve streamable HTTP at http://host:port/mcp on the bound `sock` until stopped (SIGINT/SIGTERM)."""
    host, port = sock.getsockname()[:2]
    config = workbench.config.model_copy(update={"host": host, "port": port})
    check_exposure(config)
    if host in ("0.0.0.0", "::") and not config.allowed_hosts:
        log.warning("bound to %s with no allowed_hosts: only loopback Host headers are accepted", host)
    if os.environ.get("FORWARDED_ALLOW_IPS"):
        # uvicorn's own setting, which an older set-up may still give: the server no longer reads it.
        log.warning("FORWARDED_ALLOW_IPS is not read: list the proxies to believe in http.trusted_proxies")
    # MCP (/mcp), REST (/api) and the panel in one ASGI app (awb.api.app.HttpApp), all of it behind the
    # HTTP guard. They are imported and built once the server listens, MCP first (a stdio server never
    # loads REST or the panel); a request that comes before its face is built waits for it.
    faces = DeferredFaces()
    # No access log: a line per request costs the request path more than the tool call it logs. No
    # log_config: uvicorn's dictConfig would close every handler already installed, ours included,
    # and every later line of the workbench's log would be lost.
    # The panel's sign-outs are kept in the inventory, so they hold after a restart and on every server of it.
    sign_outs = SignOuts.kept_in(workbench.store, workbench.lane)
    guard = guard_http(faces, config, sign_outs)
    server = uvicorn.Server(uvicorn_config(guard, config, log_config=None, access_log=False))
    # The default runtime (Monty) is warm before the server says it is ready; the REST API and panel,
    # the embedding model and the other runtimes (a CPython zygote, JavaScript workers, the wasm engine)
    # come once it serves, so they do not compete with start-up for the cores: a request that needs
    # one first waits for, or starts, it.
    await workbench.start(warm_search=False)
    _say_search_mode(workbench)
    url = http_url(host, port, MCP_PATH)
    # Those other servers signed out are read before this one serves a request, and followed while it does.
    async with workbench, sign_outs.following(), anyio.create_task_group() as tasks:
        tasks.start_soon(_when_ready, server, url, started, workbench, config, faces)
        try:
            await server.serve(sockets=[sock])
        finally:
            faces.close()
        tasks.cancel_scope.cancel()
    if faces.mcp_failure is not None:
        raise StartupFailed(f"the MCP face did not start: {faces.mcp_failure}")


async def _when_ready(
    server: uvicorn.Server, url: str, started: float | None, workbench: Workbench, config: Config, faces: DeferredFaces
) -> None:
    await _announce_when_ready(server, url, started)
    try:
        async with faces.serving_mcp(workbench, config) as face:
            log.info("serving MCP on %s", url)
            await faces.build(workbench, face)
            heap.settle()  # after the faces, so what they loaded is frozen with the rest of the start-up heap
            workbench.search_engine.warm_up()
            await _warm_other_runtimes(workbench)
            await _prepare_search(workbench)
            await backfill_in_background(workbench.search_engine)
            await anyio.sleep_forever()  # the MCP face serves until the server stops
    except StartupFailed:  # the server stops, then says why in one line (`serve_http`)
        log.debug("the MCP face did not start", exc_info=True)
        server.should_exit = True


async def _prepare_search(workbench: Workbench) -> None:
    started = time.perf_counter()
    try:
        # Abandoned when the server stops first: it only reads, and the store's close waits for the
        # query under way (later ones fail, unseen).
        await anyio.to_thread.run_sync(workbench.search_engine.prepare, abandon_on_cancel=True)
    except Exception as error:  # a search builds them on demand instead
        log.warning("search indexes not prepared: %s", error)
    else:
        log.debug("search indexes ready in %.2f s", time.perf_counter() - started)


async def _warm_other_runtimes(workbench: Workbench) -> None:
    for name, runtime in workbench.runtimes.items():
        if name == "monty":
            continue
        try:
            await runtime.start()
        except AwbError as error:
            log.warning("runtime %s not warmed: %s", name, error.message)
    log.debug("every runtime is warm")


def _say_search_mode(workbench: Workbench) -> None:
    engine = workbench.search_engine
    log.info("search: %s (%s)", engine.mode, engine.reason)


async def _announce_when_ready(server: uvicorn.Server, url: str, started: float | None) -> None:
    # One line on stderr once the socket serves: scripts and tests wait for it instead of polling.
    while not server.started:
        await anyio.sleep(0.005)
    took = f" in {time.perf_counter() - started:.2f} s" if started is not None else ""
    log.info("listening on %s; the MCP face, REST and the panel are built next", url)
    sys.stderr.write(f"awb: ready on {url}{took}\n")
    sys.stderr.flush()
