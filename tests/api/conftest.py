"""Fixtures for the REST tests: fake model and Tavily servers on loopback, and the API served by uvicorn."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from awb.api.app import create_api
from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.service import BlueprintService
from awb.blueprints.session_tables import open_session_store
from awb.config import Config

from .fakes import FakeServer, serving, uvicorn_serving

OPENAI_KEY = "sk-test-not-a-real-key"
TAVILY_KEY = "tvly-test-not-a-real-key"


@pytest.fixture
def fake_model() -> Iterator[FakeServer]:
    with serving(FakeServer()) as fake:
        yield fake


@pytest.fixture
def fake_tavily() -> Iterator[FakeServer]:
    with serving(FakeServer()) as fake:
        yield fake


@dataclass
class Api:
    url: str
    client: httpx.Client
    service: BlueprintService
    config: Config

    def post(self, path: str, body: Any) -> httpx.Response:
        return self.client.post(path, json=body)

    def get(self, path: str, **params: str) -> httpx.Response:
        return self.client.get(path, params=params)


def make_service(
    tmp_path: Path,
    fake_model: FakeServer,
    fake_tavily: FakeServer,
    *,
    inventory_url: str | None = None,
    blueprints: dict[str, Any] | None = None,
) -> BlueprintService:
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        inventory_url=inventory_url,
        blueprints_dir=tmp_path / "blueprints",
        blueprints=blueprints or {},
    )
    environ = {
        "OPENAI_API_KEY": OPENAI_KEY,
        "OPENAI_BASE_URL": fake_model.url,
        "ANTHROPIC_BASE_URL": fake_model.url,
        "TAVILY_API_KEY": TAVILY_KEY,
    }
    options = RuntimeOptions(environ=environ, tavily_base_url=fake_tavily.url, allow_mcp_commands=True)
    return BlueprintService(config, open_session_store(config), options=options)


@pytest.fixture
def api(tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer) -> Iterator[Api]:
    service = make_service(tmp_path, fake_model, fake_tavily)
    with uvicorn_serving(create_api(service)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield Api(url, client, service, service.config)
    service.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
