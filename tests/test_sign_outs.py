"""Passes signed out before they expire: refused from then on, in every spelling, the waits of the streams
they opened cut short; kept in the inventory, where another server, or this one started again, finds them."""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path

import anyio
import pytest

from awb.errors import InventoryUnavailable
from awb.inventory.sqlite import SQLiteStore
from awb.panel_access import PASS_SECONDS, issue_pass, pass_ok
from awb.sign_outs import SignOuts, sign_out_key

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-panel-token-0123"


def older_pass(expires: int) -> str:
    """A pass as awb gave it before passes had a nonce: `<expiry>.<HMAC>`."""
    mac = hmac.new(TOKEN.encode(), f"awb panel pass|{expires}".encode(), hashlib.sha256).hexdigest()
    return f"{expires}.{mac}"


async def test_a_pass_an_older_awb_gave_still_signs_in_and_signing_it_out_refuses_each_spelling_of_it() -> None:
    old = older_pass(int(time.time()) + PASS_SECONDS)
    expiry, _, mac = old.partition(".")
    respelled = f"{expiry}..{mac}"  # an empty nonce: the same pass
    assert pass_ok(TOKEN, old) and pass_ok(TOKEN, respelled)
    sign_outs = SignOuts()
    await sign_outs.sign_out(old)
    assert sign_outs.signed_out(old) and sign_outs.signed_out(respelled)
    assert not sign_outs.signed_out(issue_pass(TOKEN))


def test_a_nonce_that_is_not_hex_or_too_long_does_not_sign_in() -> None:
    expiry, nonce, _ = issue_pass(TOKEN).split(".")
    for bad in ("a.b", "G" * 16, "0" * 33):
        mac = hmac.new(TOKEN.encode(), f"awb panel pass|{expiry}|{bad}".encode(), hashlib.sha256).hexdigest()
        assert not pass_ok(TOKEN, f"{expiry}.{bad}.{mac}"), bad
    assert len(nonce) == 16


async def test_passes_signed_out_past_the_bound_fold_into_a_floor_that_refuses_them_all() -> None:
    """Past `max_passes` the oldest sign-out was forgotten, and its pass opened the panel again; folded, the
    passes that expire first are all refused (a pass that expires no later than them too)."""
    sign_outs = SignOuts(max_passes=3)
    now = time.time()
    expired = issue_pass(TOKEN, now=now - PASS_SECONDS - 1)
    await sign_outs.sign_out(expired)
    assert len(sign_outs) == 0 and not sign_outs.signed_out(expired)
    passes = [issue_pass(TOKEN, now=now - 60 + n * 10) for n in range(5)]
    for presented in passes:
        await sign_outs.sign_out(presented)
    assert len(sign_outs) <= 3
    assert all(sign_outs.signed_out(p) for p in passes)
    assert sign_outs.signed_out(issue_pass(TOKEN, now=now - 60))  # expires with the first: folded with it
    assert not sign_outs.signed_out(issue_pass(TOKEN, now=now))


async def test_signing_out_cuts_a_streams_wait_short_and_ends_only_its_streams() -> None:
    sign_outs = SignOuts()
    mine, other = issue_pass(TOKEN), issue_pass(TOKEN)
    watched, untouched = sign_outs.watch(mine), sign_outs.watch(other)
    with anyio.fail_after(5), watched.bounded():
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sign_outs.sign_out, mine)
            await anyio.sleep_forever()
    assert watched.ended() and not untouched.ended()
    # A stream let in with a pass signed out since is over before it starts.
    assert sign_outs.watch(mine).ended()
    sign_outs.forget(untouched)
    sign_outs.forget(watched)
    assert sign_outs.watch(None).ended() is False


async def test_ending_a_stream_from_another_thread_cuts_its_wait_short() -> None:
    watched = SignOuts().watch(issue_pass(TOKEN))
    with anyio.fail_after(5), watched.bounded():
        await anyio.to_thread.run_sync(watched.end)
        await anyio.sleep_forever()
    assert watched.ended()


# --- kept in the inventory ------------------------------------------------------------------------


async def test_a_sign_out_kept_in_the_inventory_holds_for_a_server_opened_on_it_after(tmp_path: Path) -> None:
    path = tmp_path / "inventory.db"
    gone, kept = issue_pass(TOKEN), issue_pass(TOKEN)
    store = SQLiteStore(path)
    try:
        await SignOuts.kept_in(store).sign_out(gone)
    finally:
        store.close()
    store = SQLiteStore(path)
    try:
        again = SignOuts.kept_in(store)
        async with again.following():
            assert again.signed_out(gone) and not again.signed_out(kept)
    finally:
        store.close()


async def test_a_sign_out_by_another_server_on_the_file_reaches_this_one_and_ends_its_stream(
    tmp_path: Path,
) -> None:
    path = tmp_path / "inventory.db"
    presented = issue_pass(TOKEN)
    here_store, there_store = SQLiteStore(path), SQLiteStore(path)
    try:
        here, there = SignOuts.kept_in(here_store), SignOuts.kept_in(there_store)
        async with here.following():
            watched = here.watch(presented)
            await there.sign_out(presented)
            with anyio.fail_after(5), watched.bounded():  # within POLL_SECONDS
                await anyio.sleep_forever()
            assert watched.ended() and here.signed_out(presented)
    finally:
        here_store.close()
        there_store.close()


async def test_a_sign_out_the_inventory_could_not_take_is_written_by_the_next_refresh(tmp_path: Path) -> None:
    path = tmp_path / "inventory.db"
    presented = issue_pass(TOKEN)
    store = SQLiteStore(path)
    try:
        sign_outs = SignOuts.kept_in(store)
        real = store.record_sign_out

        def down(*args: object, **kwargs: object) -> None:
            raise InventoryUnavailable("the inventory did not answer")

        store.record_sign_out = down  # type: ignore[method-assign]
        await sign_outs.sign_out(presented)
        assert sign_outs.signed_out(presented)  # refused here at once all the same
        assert store.sign_outs_after(0)[1] == []
        store.record_sign_out = real  # type: ignore[method-assign]
        await sign_outs.refresh()
        assert [key for key, _ in store.sign_outs_after(0)[1]] == [sign_out_key(presented)]
    finally:
        store.close()


async def test_checks_ask_the_store_nothing_and_a_store_that_stops_answering_leaves_the_known_in_force(
    tmp_path: Path,
) -> None:
    presented = issue_pass(TOKEN)
    store = SQLiteStore(tmp_path / "inventory.db")
    try:
        sign_outs = SignOuts.kept_in(store)
        await sign_outs.sign_out(presented)
        asked: list[int] = []

        def down(seq: int) -> tuple[int, list[tuple[str, int]]]:
            asked.append(seq)
            raise InventoryUnavailable("the inventory did not answer")

        store.sign_outs_after = down  # type: ignore[method-assign]
        assert all(sign_outs.signed_out(presented) for _ in range(100))
        assert asked == []  # a request's check is this server's copy alone
        await sign_outs.refresh()
        assert len(asked) == 1 and sign_outs.signed_out(presented)
    finally:
        store.close()
