"""The panel's sign-in form counts wrong tokens in the same per-address limit as the HTTP guard: past it,
`/login` answers 429 with its page saying when to try again, even to the right token."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from awb.clock import ManualClock
from awb.config import Config
from awb.server.http_guard import HttpGuard, transport_security
from awb.sign_in_limit import SignInLimit
from awb.web import create_panel
from awb.workbench import Workbench
from support import ORIGIN

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-panel-token-0123"


async def _sign_in(client: httpx.AsyncClient, token: str) -> httpx.Response:
    return await client.post("/login", data={"token": token, "next": "/"}, headers={"Origin": ORIGIN})


async def test_wrong_login_tokens_and_wrong_bearer_tokens_share_one_limit_behind_the_guard(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=TOKEN)
    async with Workbench(config, clock=clock) as workbench:
        panel = create_panel(workbench)
        guard = HttpGuard(panel, transport_security(config), TOKEN, SignInLimit(4, 60, clock=clock))
        transport = httpx.ASGITransport(app=guard, client=("203.0.113.7", 4000))
        try:
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                assert (await _sign_in(client, "")).status_code == 401  # no token: not a guess
                for n in range(2):
                    assert (await _sign_in(client, f"guess-{n}")).status_code == 401
                wrong = {"Authorization": "Bearer guess-api"}
                for _ in range(2):
                    assert (await client.get("/api/tools", headers=wrong)).status_code == 401
                locked = await _sign_in(client, TOKEN)
                assert locked.status_code == 429 and locked.headers["retry-after"] == "60"
                assert "too many wrong credentials" in locked.text
                assert "set-cookie" not in locked.headers
                clock.advance(seconds=60)
                signed = await _sign_in(client, TOKEN)
                assert signed.status_code == 303 and "set-cookie" in signed.headers
        finally:
            panel.close()


async def test_the_panel_served_alone_limits_its_sign_in_by_its_own_settings(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        pid_file=tmp_path / "pid",
        auth_token=TOKEN,
        http={"max_auth_failures": 2},
    )
    async with Workbench(config, clock=clock) as workbench:
        panel = create_panel(workbench)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=panel), base_url=ORIGIN) as client:
                for n in range(2):
                    assert (await _sign_in(client, f"guess-{n}")).status_code == 401
                assert (await _sign_in(client, TOKEN)).status_code == 429
        finally:
            panel.close()
