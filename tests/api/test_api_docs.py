"""The API reference (`/api/docs`, Swagger UI) works with no outside network: the page names no other host
and the server itself serves every asset it loads, beside the OpenAPI document it reads."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from awb.api.app import HttpApp, create_api

from .conftest import make_service
from .fakes import FakeServer

pytestmark = pytest.mark.anyio


async def no_mcp(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError(f"the docs asked MCP for {scope.get('path')}")


@pytest.fixture
async def http(tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer) -> AsyncIterator[httpx.AsyncClient]:
    service = make_service(tmp_path, fake_model, fake_tavily)
    # Through the server's own dispatch, so every path the page names must be one it routes to the REST app.
    transport = httpx.ASGITransport(app=HttpApp(no_mcp, create_api(service)))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7777") as client:
        yield client
    service.close()


async def test_the_docs_page_names_no_other_host_and_every_asset_it_loads_is_served(http: httpx.AsyncClient) -> None:
    page = await http.get("/api/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert not re.search(r"https?:|['\"=(]\s*//", page.text), page.text  # no absolute or scheme-relative URL
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/api/"), asset
        served = await http.get(asset)
        assert served.status_code == 200 and served.content, asset
    kinds = {a.rsplit(".", 1)[-1]: (await http.get(a)).headers["content-type"] for a in assets}
    assert "javascript" in kinds["js"] and kinds["css"].startswith("text/css")
    [redirect] = re.findall(r"oauth2RedirectUrl: window\.location\.origin \+ '([^']+)'", page.text)
    assert (await http.get(redirect)).status_code == 200


async def test_the_docs_page_reads_the_openapi_document_the_api_serves(http: httpx.AsyncClient) -> None:
    page = (await http.get("/api/docs")).text
    [url] = re.findall(r"url: '([^']+)'", page)
    assert url == "/api/openapi.json"
    document = (await http.get(url)).json()
    assert document["info"]["title"] == "Agent Workbench API" and document["openapi"].startswith("3.1")
    # The page and its assets are not API operations: the contract tests never call them.
    assert not [path for path in document["paths"] if path.startswith("/api/docs")]
