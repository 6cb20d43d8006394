"""Which MCP servers a blueprint posted over HTTP may reach: served off loopback, public addresses only
(checked on the address dialled, so spellings and names of internal addresses are refused too)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from awb.api.app import create_api, runtime_options
from awb.config import Config

from .blueprints_data import blueprint
from .conftest import make_service
from .fakes import FakeServer, serving, uvicorn_serving

TOKEN = "a-long-enough-api-token-0123"


@pytest.mark.parametrize(
    ("host", "proxies", "flag", "private_allowed"),
    [
        ("127.0.0.1", [], False, True),
        ("::1", [], False, True),
        ("0.0.0.0", [], False, False),
        ("0.0.0.0", [], True, True),
        # Bound to loopback behind a proxy, callers are on other machines all the same.
        ("127.0.0.1", ["127.0.0.1"], False, False),
        ("127.0.0.1", ["127.0.0.1"], True, True),
    ],
)
def test_served_off_loopback_or_behind_a_proxy_blueprints_reach_public_addresses_only_unless_configured(
    tmp_path: Path, host: str, proxies: list[str], flag: bool, private_allowed: bool
) -> None:
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        host=host,
        auth_token=SecretStr(TOKEN),
        http={"trusted_proxies": proxies},
    )
    config = config.model_copy(
        update={"blueprints": config.blueprints.model_copy(update={"allow_private_mcp_urls": flag})}
    )
    assert runtime_options(config, None).allow_private_mcp_urls is private_allowed


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/mcp",
        "http://localhost:{port}/mcp",
        "http://[::1]:{port}/mcp",
        "http://[::ffff:127.0.0.1]:{port}/mcp",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/mcp",
        "http://0.0.0.0:{port}/mcp",
    ],
)
def test_a_plainly_internal_url_is_a_field_error_when_only_public_addresses_are_allowed(
    tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer, url: str
) -> None:
    service = make_service(tmp_path, fake_model, fake_tavily)
    service.options = dataclasses.replace(service.options, allow_private_mcp_urls=False)
    with serving(FakeServer()) as internal, uvicorn_serving(create_api(service)) as base:
        arm = {"type": "mcp", "name": "inside", "url": url.format(port=internal.url.rsplit(":", 1)[1])}
        with httpx.Client(base_url=base, timeout=30) as client:
            response = client.post("/api/blueprints/validate-and-compile", json=blueprint(arms=[arm]))
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "blueprint_invalid"
        assert error["details"]["errors"][0]["path"] == "arms[0].url"
        assert error["details"]["errors"][0]["type"] == "url_not_allowed"
    service.close()


@pytest.mark.parametrize("spelling", ["127.1", "2130706433", "0x7f.0.0.1"])
def test_other_spellings_of_an_internal_address_are_refused_where_the_connection_is_made(
    tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer, spelling: str
) -> None:
    """Names and odd spellings resolve to the real address only when dialled: the check is made there."""
    service = make_service(tmp_path, fake_model, fake_tavily)
    service.options = dataclasses.replace(service.options, allow_private_mcp_urls=False)
    with serving(FakeServer()) as internal, uvicorn_serving(create_api(service)) as base:
        port = internal.url.rsplit(":", 1)[1]
        arm = {"type": "mcp", "name": "inside", "url": f"http://{spelling}:{port}/mcp"}
        with httpx.Client(base_url=base, timeout=30) as client:
            response = client.post("/api/agents/run", json={"message": "hi", "blueprint": blueprint(arms=[arm])})
        assert response.status_code == 502, response.text
        error = response.json()["error"]
        assert error["code"] == "server_unavailable" and "is not a public address" in error["message"]
        assert internal.requests == []
    service.close()


def test_on_loopback_blueprints_still_reach_local_mcp_servers(
    tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    service = make_service(tmp_path, fake_model, fake_tavily)
    with serving(FakeServer()) as local, uvicorn_serving(create_api(service)) as base:
        arm = {"type": "mcp", "name": "local", "url": f"http://127.1:{local.url.rsplit(':', 1)[1]}/mcp"}
        with httpx.Client(base_url=base, timeout=30) as client:
            client.post("/api/agents/run", json={"message": "hi", "blueprint": blueprint(arms=[arm])})
        assert local.requests, "a local MCP server is reachable from a loopback-bound server"
    service.close()
