"""Whose share a request counts against (`awb.shares`): a remote client's address, whatever it says
about itself; a local client's session or name."""

from __future__ import annotations

import pytest

from awb.shares import Shares, client_key, default_share, is_local, share_key


def test_ipv6_addresses_count_by_their_64_and_mapped_ipv4_as_ipv4() -> None:
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff:1234") == "2001:db8::/64"
    assert client_key("2001:db8:0:1::1") != client_key("2001:db8::1")
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("testclient") == "testclient"


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", None])
def test_loopback_and_no_address_are_local(address: str | None) -> None:
    assert is_local(address)


@pytest.mark.parametrize("address", ["192.0.2.7", "::ffff:192.0.2.7", "2001:db8::1", "testclient"])
def test_other_addresses_are_remote(address: str) -> None:
    assert not is_local(address)


def test_a_remote_client_is_its_address_whatever_session_or_name_it_gives() -> None:
    keys = {share_key(address, local) for address in ("2001:db8::1", "2001:db8::2") for local in ("s1", None)}
    assert keys == {("address", "2001:db8::/64")}
    assert share_key("::ffff:192.0.2.7", ("session", "x")) == share_key("192.0.2.7", None) == ("address", "192.0.2.7")


def test_a_local_client_is_what_it_says_it_is() -> None:
    assert share_key("127.0.0.1", ("session", "a")) == ("session", "a")
    assert share_key("::1", None) is None


def test_one_client_holds_at_most_its_share_and_others_the_rest() -> None:
    shares = Shares(4)
    assert shares.share == default_share(4) == 3
    assert [shares.take("a") for _ in range(4)] == [None, None, None, "client"]
    assert shares.take("b") is None
    assert shares.take("c") == "server"
    shares.give_back("a")
    assert shares.held_by("a") == 2
    assert shares.take(None) is None  # no one in particular: only the cap
    assert shares.open == 4
    for client in ("a", "a", "b", None):
        shares.give_back(client)
    assert shares.open == 0 and shares.held_by("a") == 0


def test_shares_without_a_cap_of_their_own_hold_each_client_to_its_share() -> None:
    shares = Shares(None, share=2)
    assert [shares.take("a") for _ in range(3)] == [None, None, "client"]
    assert all(shares.take(n) is None for n in range(100))
    with pytest.raises(ValueError, match="needs a limit"):
        Shares(None)
