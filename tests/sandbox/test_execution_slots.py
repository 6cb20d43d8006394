"""The cap on executions at once, and each client's share of it (`sandbox.max_concurrent_per_client`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import ExitStack, contextmanager

import pytest

from awb.config import SandboxConfig
from awb.errors import Busy
from awb.sandbox.base import ExecutionSlots, executing_for


@contextmanager
def acting_for(client: Hashable | None) -> Iterator[None]:
    token = executing_for.set(client)
    try:
        yield
    finally:
        executing_for.reset(token)


def take(slots: ExecutionSlots, stack: ExitStack, client: Hashable | None, count: int = 1) -> None:
    with acting_for(client):
        for _ in range(count):
            stack.enter_context(slots.take())


def test_a_client_past_its_share_is_busy_and_the_other_clients_still_get_slots() -> None:
    slots = ExecutionSlots(4, "tool", per_client=3)
    with ExitStack() as stack:
        take(slots, stack, "a", 3)
        with pytest.raises(Busy) as busy, acting_for("a"), slots.take():
            pass
        assert busy.value.details == {"limit": 4, "per_client": 3, "scope": "client"}
        assert "its share" in busy.value.message
        take(slots, stack, "b")
        with pytest.raises(Busy) as full, acting_for("c"), slots.take():
            pass
        assert full.value.details == {"limit": 4, "scope": "server"}
    assert slots.active == 0


def test_a_clients_share_comes_back_as_its_executions_end() -> None:
    slots = ExecutionSlots(4, "tool", per_client=2)
    for _ in range(3):  # the count goes back to nothing each time, not up
        with ExitStack() as stack:
            take(slots, stack, "a", 2)
    with ExitStack() as stack:
        take(slots, stack, "a", 2)
        take(slots, stack, "b", 2)
        assert slots.active == 4


def test_executions_for_no_one_in_particular_may_take_every_slot() -> None:
    slots = ExecutionSlots(4, "tool", per_client=1)
    with ExitStack() as stack:
        take(slots, stack, None, 4)  # stdio's one client, a library user
        assert slots.active == 4


@pytest.mark.parametrize("per_client", [None, 4, 9])
def test_a_share_of_every_slot_or_none_is_no_share(per_client: int | None) -> None:
    slots = ExecutionSlots(4, "tool", per_client=per_client)
    with ExitStack() as stack:
        take(slots, stack, "a", 4)
        with pytest.raises(Busy) as busy, acting_for("a"), slots.take():
            pass
    assert busy.value.details["scope"] == "server"


@pytest.mark.parametrize(("max_concurrent", "share"), [(8, 6), (4, 3), (2, 1), (1, 1), (256, 192)])
def test_a_client_may_hold_three_quarters_of_the_slots_by_default(max_concurrent: int, share: int) -> None:
    assert SandboxConfig(max_concurrent=max_concurrent).per_client_share == share
    assert SandboxConfig(max_concurrent=max_concurrent, max_concurrent_per_client=5).per_client_share == 5
