"""schemathesis against the published OpenAPI document, over real HTTP: for generated requests (valid and
not), no endpoint answers 500 and every response matches its documented status, type and schema."""

from __future__ import annotations

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
from .fakes import FakeServer, answer, serving, uvicorn_serving

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
    # Finishes any run at once, for either kind of agent the API starts.
    return answer("ok")[0], {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {
                                "name": "done",
                                "arguments": '{"response": "ok", "improved_instructions": "x", "explanation": "y"}',
                            },
                        }
                    ]
                }
            }
        ]
    }


@pytest.fixture
def api_url(tmp_path: Path) -> Iterator[str]:
    with serving(FakeServer(responder=_agreeable)) as model, serving(FakeServer()) as tavily:
        service = make_service(tmp_path, model, tavily)
        with uvicorn_serving(create_api(service)) as url:
            yield url
        service.close()


def test_api_honours_its_openapi_document(api_url: str) -> None:
    # Operations are walked by hand: schemathesis' pytest plugin does not load under this pytest.
    schema = schemathesis.openapi.from_url(f"{api_url}/api/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 8

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def honours(case: Any) -> None:
            case.call_and_validate(timeout=30, checks=CHECKS)

        honours()
