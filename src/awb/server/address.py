"""How a server's address is written in a URL: an IPv6 address in brackets (`http://[::1]:7777/`).

A module of its own, with nothing heavy to import (`awb.shares` only): the CLI writes the start banner and finds a running
server with it before (or without) loading the HTTP server.
"""

from __future__ import annotations

from awb.shares import is_local

#: Where the MCP face is served over HTTP (the SDK's app, the deferred faces' routing, REST's dispatch and
#: every printed URL agree on it).
MCP_PATH = "/mcp"


def authority(host: str) -> str:
    """`host` as the host part of a URL or a Host header: `::1` is `[::1]`, a name or IPv4 as it is."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def http_url(host: str, port: int, path: str = "/") -> str:
    return f"http://{authority(host)}:{port}{path}"


def is_loopback(host: str) -> bool:
    """A server bound to `host` is reached only from this machine: `localhost`, or an address a peer on
    this machine has (`awb.shares.is_local`: 127.0.0.0/8, ::1, and their IPv4-mapped form, which
    `ipaddress` calls loopback only from Python 3.13), written bare or in brackets as in a URL."""
    return host == "localhost" or is_local(host.strip("[]"))
