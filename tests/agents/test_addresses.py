"""What counts as a public address for URLs someone else names."""

from __future__ import annotations

import pytest

from awb.agents.addresses import is_public, plainly_private


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1%eth0",
        "fd00::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "224.0.0.1",
        "ff02::1",
        "::",
    ],
)
def test_internal_addresses_are_not_public(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_routable_addresses_are_public(address: str) -> None:
    assert is_public(address)


def test_urls_that_plainly_name_this_network_are_found_without_resolving() -> None:
    assert plainly_private("http://LocalHost.:8000/mcp") == "localhost"
    assert plainly_private("https://api.localhost/mcp") == "api.localhost"
    assert plainly_private("http://[fe80::1]/") == "fe80::1"
    assert plainly_private("https://mcp.example.com/mcp") is None  # judged when dialled
