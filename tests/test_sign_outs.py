"""Passes signed out before they expire: refused from then on, in every spelling, and the waits of the
streams they opened cut short from whichever thread signs them out."""

from __future__ import annotations

import hashlib
import hmac
import time

import anyio
import pytest

from awb.panel_access import PASS_SECONDS, issue_pass, pass_ok
from awb.sign_outs import SignOuts

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-panel-token-0123"


def older_pass(expires: int) -> str:
    """A pass as awb gave it before passes had a nonce: `<expiry>.<HMAC>`."""
    mac = hmac.new(TOKEN.encode(), f"awb panel pass|{expires}".encode(), hashlib.sha256).hexdigest()
    return f"{expires}.{mac}"


def test_a_pass_an_older_awb_gave_still_signs_in_and_signing_it_out_refuses_each_spelling_of_it() -> None:
    old = older_pass(int(time.time()) + PASS_SECONDS)
    expiry, _, mac = old.partition(".")
    respelled = f"{expiry}..{mac}"  # an empty nonce: the same pass
    assert pass_ok(TOKEN, old) and pass_ok(TOKEN, respelled)
    sign_outs = SignOuts()
    sign_outs.sign_out(old)
    assert sign_outs.signed_out(old) and sign_outs.signed_out(respelled)
    assert not sign_outs.signed_out(issue_pass(TOKEN))


def test_a_nonce_that_is_not_hex_or_too_long_does_not_sign_in() -> None:
    expiry, nonce, _ = issue_pass(TOKEN).split(".")
    for bad in ("a.b", "G" * 16, "0" * 33):
        mac = hmac.new(TOKEN.encode(), f"awb panel pass|{expiry}|{bad}".encode(), hashlib.sha256).hexdigest()
        assert not pass_ok(TOKEN, f"{expiry}.{bad}.{mac}"), bad
    assert len(nonce) == 16


def test_passes_signed_out_are_forgotten_once_expired_and_held_to_a_bound() -> None:
    sign_outs = SignOuts(max_passes=3)
    expired = issue_pass(TOKEN, now=time.time() - PASS_SECONDS - 1)
    sign_outs.sign_out(expired)
    passes = [issue_pass(TOKEN) for _ in range(4)]
    for presented in passes:
        sign_outs.sign_out(presented)
    assert len(sign_outs) == 3
    assert not sign_outs.signed_out(expired)
    assert [sign_outs.signed_out(p) for p in passes] == [False, True, True, True]


async def test_signing_out_from_another_thread_cuts_a_streams_wait_short_and_ends_only_its_streams() -> None:
    sign_outs = SignOuts()
    mine, other = issue_pass(TOKEN), issue_pass(TOKEN)
    watched, untouched = sign_outs.watch(mine), sign_outs.watch(other)
    with anyio.fail_after(5), watched.bounded():
        await anyio.to_thread.run_sync(sign_outs.sign_out, mine)
        await anyio.sleep_forever()
    assert watched.ended() and not untouched.ended()
    # A stream let in with a pass signed out since is over before it starts.
    assert sign_outs.watch(mine).ended()
    sign_outs.forget(untouched)
    sign_outs.forget(watched)
    assert sign_outs.watch(None).ended() is False
