"""schemathesis against the published OpenAPI document, over real HTTP: for generated requests (valid and
not), no endpoint answers 500 and every response matches its documented status, type and schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from awb.api.app import create_api

from .conftest import make_service
from .fakes import FakeServer, serving, uvicorn_serving

# Every response is checked; "schema-valid data accepted" is left out on purpose: some blueprint rules
# (a model of the chosen provider, unique names, a configured knowledge base) are beyond JSON Schema.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def _agreeable(body: dict[str, Any]) -> tuple[int, Any]:
    # Finishes any run at once, for either kind of agent the API starts, in both providers' formats.
    output = {"response": "ok", "improved_instructions": "x", "explanation": "y"}
    call = {"id": "c", "type": "function", "function": {"name": "done", "arguments": json.dumps(output)}}
    return 200, {
        "choices": [{"message": {"tool_calls": [call]}}],
        "content": [{"type": "tool_use", "id": "c", "name": "done", "input": output}],
    }


@pytest.fixture
def model() -> Iterator[FakeServer]:
    with serving(FakeServer(responder=_agreeable)) as fake:
        yield fake


@pytest.fixture
def api_url(tmp_path: Path, model: FakeServer) -> Iterator[str]:
    with serving(FakeServer()) as tavily:
        service = make_service(tmp_path, model, tavily)
        with uvicorn_serving(create_api(service)) as url:
            yield url
        service.close()


def test_api_honours_its_openapi_document(api_url: str, model: FakeServer) -> None:
    # Operations are walked by hand: schemathesis' pytest plugin does not load under this pytest.
    schema = schemathesis.openapi.from_url(f"{api_url}/api/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 8

    for operation in operations:

        @given(case=operation.as_strategy())
        # Derandomized: the same requests every run, so the assertion below cannot flicker.
        @settings(
            max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
        )
        def honours(case: Any) -> None:
            case.call_and_validate(timeout=30, checks=CHECKS)

        honours()
    # Generated blueprints were valid often enough to run agents, not only to be rejected.
    ran = [r for r in model.requests if "You improve the system prompts" not in json.dumps(r["body"]["messages"][0])]
    assert ran, "no generated run reached the model"


def test_every_whole_number_the_api_takes_is_bounded_by_what_the_store_keeps(tmp_path: Path) -> None:
    """A number a request gives reaches SQL (a cursor, a limit): one past 2**63-1 overflows the store and
    was a 500. Every integer parameter the document declares has a maximum within it."""
    from awb.inventory.stored_int import MAX_STORED_INT

    with serving(FakeServer()) as model, serving(FakeServer()) as tavily:
        service = make_service(tmp_path, model, tavily)
        try:
            document = create_api(service).openapi()
        finally:
            service.close()
    unbounded = [
        f"{method.upper()} {path} {parameter['name']}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for parameter in operation.get("parameters", [])
        for schema in _integer_schemas(parameter.get("schema", {}))
        if schema.get("maximum", MAX_STORED_INT + 1) > MAX_STORED_INT
    ]
    assert unbounded == []


def _integer_schemas(schema: dict[str, Any]) -> list[dict[str, Any]]:
    if schema.get("type") == "integer":
        return [schema]
    return [found for option in schema.get("anyOf", []) for found in _integer_schemas(option)]
