"""The HTTP guard's limit on wrong credentials: one client address that guesses the bearer token (on /mcp
or /api) or forges a panel pass is refused with 429 after the limit, the right token included, until its
window passes; missing credentials and other addresses are not held against it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from awb.clock import ManualClock
from awb.config import Config
from awb.panel_access import PASS_SECONDS, issue_pass
from awb.server.http_guard import HttpGuard, transport_security
from awb.sign_in_limit import SignInLimit
from support import PANEL_COOKIE

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-guard-token-0123"
BASE = "http://127.0.0.1:7777"


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _guard(tmp_path: Path, clock: ManualClock, max_failures: int = 3) -> HttpGuard:
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=TOKEN)
    return HttpGuard(_ok, transport_security(config), TOKEN, SignInLimit(max_failures, 60, clock=clock))


def _client(guard: HttpGuard, address: str = "203.0.113.9") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=guard, client=(address, 5000)), base_url=BASE)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("path", ["/api/tools", "/mcp"])
async def test_wrong_bearer_tokens_past_the_limit_lock_the_address_out_the_right_token_too(
    tmp_path: Path, path: str
) -> None:
    clock = ManualClock()
    guard = _guard(tmp_path, clock)
    async with _client(guard) as client, _client(guard, "198.51.100.4") as neighbour:
        for n in range(3):
            assert (await client.post(path, headers=_bearer(f"guess-{n}"))).status_code == 401
        locked = await client.post(path, headers=_bearer(TOKEN))
        assert locked.status_code == 429
        assert locked.headers["retry-after"] == "60"
        assert locked.json()["error"]["code"] == "too_many_failures"
        assert json.loads(locked.text)["error"]["details"] == {}
        assert (await client.post(path, headers=_bearer("guess-4"))).status_code == 429
        # Another address is not held to this one's guesses.
        assert (await neighbour.post(path, headers=_bearer(TOKEN))).status_code == 200
        clock.advance(seconds=60)
        assert (await client.post(path, headers=_bearer(TOKEN))).status_code == 200


async def test_missing_credentials_are_not_counted_as_guesses(tmp_path: Path) -> None:
    clock = ManualClock()
    guard = _guard(tmp_path, clock)
    async with _client(guard) as client:
        for _ in range(10):
            assert (await client.post("/api/tools")).status_code == 401
            assert (await client.get("/")).status_code == 303
            assert (await client.get("/login")).status_code == 200
        assert (await client.post("/api/tools", headers=_bearer(TOKEN))).status_code == 200


async def test_forged_panel_passes_count_and_lock_out_a_real_pass_but_an_expired_one_does_not(tmp_path: Path) -> None:
    clock = ManualClock()
    guard = _guard(tmp_path, clock)
    real = issue_pass(TOKEN)
    forged = real.split(".")[0] + "." + "0" * 64
    async with _client(guard) as client:
        client.cookies.set(PANEL_COOKIE, issue_pass(TOKEN, now=clock.now().timestamp() - PASS_SECONDS - 1))
        for _ in range(5):  # an old sign-in of this person's, not a guess
            assert (await client.get("/")).status_code == 303
        client.cookies.set(PANEL_COOKIE, forged)
        for _ in range(3):
            assert (await client.get("/runs")).status_code == 303
        client.cookies.set(PANEL_COOKIE, real)
        refused = await client.get("/")
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_failures"
        # The bearer token is as locked out as the pass: one count per address for every face.
        assert (await client.post("/mcp", headers=_bearer(TOKEN))).status_code == 429
        clock.advance(seconds=61)
        assert (await client.get("/")).status_code == 200
