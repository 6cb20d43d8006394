"""Which addresses count as this machine's own network, for URLs that someone else names (an MCP server
in a blueprint posted over HTTP). Light on purpose: compiling a blueprint asks it without loading a client."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_public(address: str) -> bool:
    """A globally routable unicast address: not loopback, private, link-local (cloud metadata), shared,
    multicast, reserved or unspecified; an IPv4-mapped IPv6 address is judged as its IPv4."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def plainly_private(url: str) -> str | None:
    """The host of `url` when it is visibly not public without resolving it (an address, `localhost`);
    names are judged again, on the address dialled, when the connection is made."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return host
    try:
        return None if is_public(host) else host
    except ValueError:
        return None
