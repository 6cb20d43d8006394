"""Telling sessions that the tool list changed, when some of them take nothing."""

from __future__ import annotations

import anyio
import pytest

from awb.server import notify
from awb.server.notify import ListChangedNotifier
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio


class Session:
    """A handshake-era session as the notifier sees it; `stuck`: its client stopped reading its stream."""

    def __init__(self, stuck: bool) -> None:
        self.stuck = stuck
        self.told_at: float | None = None

    async def send_tool_list_changed(self) -> None:
        if self.stuck:
            await anyio.sleep_forever()
        self.told_at = anyio.current_time()


async def test_sessions_that_take_nothing_do_not_hold_up_the_others(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "SEND_TIMEOUT_SECONDS", 1.0)
    notifier = ListChangedNotifier(workbench)
    stuck = [Session(stuck=True) for _ in range(5)]
    healthy = Session(stuck=False)
    for session in [*stuck, healthy]:
        notifier.remember(session)  # type: ignore[arg-type]
    started = anyio.current_time()
    with anyio.fail_after(30):
        await notifier.notify_all()
    finished = anyio.current_time()
    assert healthy.told_at is not None
    # Told before any stuck session's time ran out (it used to wait for all five in turn: 5 s).
    assert healthy.told_at - started < notify.SEND_TIMEOUT_SECONDS
    assert finished - started < 3 * notify.SEND_TIMEOUT_SECONDS
    assert notifier.session_count == 6  # a slow session is skipped, not dropped
