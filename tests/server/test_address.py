"""Where a server bound to a host is reached from (`is_loopback`), read as a peer's address is
(`awb.shares.is_local`), and how the host is written in a URL."""

from __future__ import annotations

import pytest

from awb.server.address import http_url, is_loopback
from awb.shares import is_local

LOOPBACK_IPS = ["127.0.0.1", "127.8.9.10", "127.255.255.254", "::1", "::ffff:127.0.0.1", "::ffff:127.9.9.9"]
OTHER_IPS = ["0.0.0.0", "::", "192.0.2.7", "10.0.0.1", "::ffff:192.0.2.7", "::ffff:0.0.0.0", "2001:db8::1", "::2"]


@pytest.mark.parametrize("host", [*LOOPBACK_IPS, "localhost", "[::1]", "[::ffff:127.0.0.2]"])
def test_a_loopback_bind_host_is_reached_from_this_machine_only(host: str) -> None:
    # `::ffff:127.0.0.1`: a socket bound to it takes IPv4 loopback connections alone, though `ipaddress`
    # calls it loopback only from Python 3.13: the answer is the same on every Python.
    assert is_loopback(host)


@pytest.mark.parametrize("host", [*OTHER_IPS, "[::]", "example.com", "localhost.", "LOCALHOST", ""])
def test_any_other_bind_host_may_be_reached_from_elsewhere(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("address", LOOPBACK_IPS)
def test_a_bind_host_and_a_peer_address_agree_on_every_ip(address: str) -> None:
    assert is_loopback(address) and is_local(address)


@pytest.mark.parametrize("address", OTHER_IPS)
def test_a_bind_host_and_a_peer_address_agree_on_every_other_ip(address: str) -> None:
    assert not is_loopback(address) and not is_local(address)


@pytest.mark.parametrize("address", ["localhost", "[::1]", "testclient"])
def test_a_peer_is_an_address_never_a_name(address: str) -> None:
    # What a connection's peer (or a trusted proxy's X-Forwarded-For) gives is an IP; anything else is
    # counted as a remote client of its own, not trusted as this machine's.
    assert not is_local(address)


def test_an_ipv6_host_is_bracketed_in_a_url() -> None:
    assert http_url("::1", 7777, "/mcp") == "http://[::1]:7777/mcp"
    assert http_url("[::1]", 7777) == "http://[::1]:7777/"
    assert http_url("127.0.0.1", 80) == "http://127.0.0.1:80/"
