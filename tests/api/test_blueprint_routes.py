"""The blueprint endpoints over real HTTP: validation messages, compile, save/list/load, cache, schemas."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml

import awb.api.routes.blueprints as routes
from awb.api.app import create_api
from awb.blueprints.files import LIST_PAGE_MAX

from .blueprints_data import TAVILY, blueprint
from .conftest import Api, make_service
from .fakes import FakeServer, uvicorn_serving


def test_invalid_blueprint_gets_field_level_errors_with_allowed_values_and_ranges(api: Api) -> None:
    bad = {
        "head": {"provider": "mystery", "model": "m1", "temperature": 2.5},
        "arms": [{"type": "telepathy"}],
        "spine": {"max_tool_calls": 500, "timeout_seconds": 0, "allowed_domains": ["not a domain"]},
    }
    response = api.post("/api/blueprints/validate-and-compile", bad)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "blueprint_invalid"
    by_path = {e["path"]: e for e in error["details"]["errors"]}
    assert by_path["legs"]["message"] == "Field required"
    assert by_path["head.provider"]["allowed"] == ["openai", "anthropic"]
    assert "openai, anthropic" in by_path["head.provider"]["message"]
    assert by_path["head.temperature"]["allowed"] == {"minimum": 0.0, "maximum": 2.0}
    assert by_path["arms[0]"]["allowed"] == ["tavily_search", "mcp", "workbench"]
    assert by_path["spine.max_tool_calls"]["allowed"] == {"minimum": 1, "maximum": 100}
    assert by_path["spine.timeout_seconds"]["allowed"] == {"minimum": 1, "maximum": 300}
    assert "not a valid domain" in by_path["spine.allowed_domains[0]"]["message"]


def test_unsupported_model_lists_the_providers_models_and_max_tokens_respects_the_models_limit(api: Api) -> None:
    response = api.post(
        "/api/blueprints/validate-and-compile", blueprint(head={"provider": "openai", "model": "gpt-9"})
    )
    errors = response.json()["error"]["details"]["errors"]
    assert errors[0]["path"] == "head.model" and "gpt-4o-mini" in errors[0]["allowed"]
    over = blueprint(head={"provider": "openai", "model": "gpt-4o-mini", "max_tokens": 10**6})
    errors = api.post("/api/blueprints/validate-and-compile", over).json()["error"]["details"]["errors"]
    assert errors == [
        {
            "path": "head.max_tokens",
            "message": "max_tokens 1000000 exceeds the model's limit of 16384",
            "type": "max_tokens_over_limit",
            "allowed": {"minimum": 1, "maximum": 16384},
        }
    ]


def test_workflow_and_team_modes_name_what_they_require(api: Api) -> None:
    for mode, field in (("workflow", "steps"), ("team", "members")):
        errors = api.post("/api/blueprints/validate-and-compile", blueprint(legs={"mode": mode})).json()["error"]
        assert errors["details"]["errors"][0]["path"] == f"legs.{field}"
        assert f"mode {mode} requires" in errors["details"]["errors"][0]["message"]


def test_valid_blueprint_returns_the_normalized_blueprint_its_id_and_what_it_compiled_to(api: Api) -> None:
    data = blueprint(
        head={"provider": "openai", "model": "gpt-4o-mini", "temperature": 0.2, "max_tokens": 300},
        arms=[TAVILY],
        spine={"allowed_domains": ["Example.COM"]},
    )
    reply = api.post("/api/blueprints/validate-and-compile", data).json()
    assert reply["valid"] is True
    assert reply["blueprint_id"].startswith("bp_")
    normalized = reply["blueprint"]
    assert normalized["spine"] == {"max_tool_calls": 10, "timeout_seconds": 60, "allowed_domains": ["example.com"]}
    assert normalized["heart"]["memory"] == {"enabled": False, "history_length": 10}
    assert reply["compiled"] == {
        "mode": "single_agent",
        "model": "openai:gpt-4o-mini",
        "settings": {"temperature": 0.2, "max_tokens": 300},
        "agents": ["researcher"],
        "tools": ["tavily"],
    }
    again = api.post("/api/blueprints/validate-and-compile", normalized).json()
    assert again["blueprint_id"] == reply["blueprint_id"]


def test_saved_blueprints_are_yaml_files_listed_and_loaded_by_id(
    api: Api, tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    prompt = "You research.\nCite your sources.\n"
    data = blueprint(name="Web Researcher", head={"provider": "openai", "model": "gpt-4o", "system_prompt": prompt})
    first = api.post("/api/blueprints", data).json()
    second = api.post("/api/blueprints", data).json()
    assert first["file"] != second["file"]
    assert first["file"].startswith("web-researcher-") and first["file"].endswith(".yaml")
    text = (api.config.blueprints_dir / first["file"]).read_text(encoding="utf-8")
    assert "system_prompt: |" in text
    assert yaml.safe_load(text)["head"]["system_prompt"] == prompt
    listed = api.get("/api/blueprints").json()["blueprints"]
    assert {entry["file"] for entry in listed} == {first["file"], second["file"]}
    assert {entry["blueprint_id"] for entry in listed} == {first["blueprint_id"]}
    (api.config.blueprints_dir / "broken.yaml").write_text("head: [unclosed", encoding="utf-8")
    broken = [e for e in api.get("/api/blueprints").json()["blueprints"] if e["file"] == "broken.yaml"]
    assert broken[0]["error"]["code"] == "blueprint_invalid"

    # A server that never compiled it finds it in the files, then serves it from its cache.
    fresh = make_service(tmp_path, fake_model, fake_tavily)
    with uvicorn_serving(create_api(fresh)) as url, httpx.Client(base_url=url, timeout=30) as client:
        loaded = client.get(f"/api/blueprints/{first['blueprint_id']}").json()
        assert loaded["cached"] is False
        assert loaded["blueprint"]["head"]["system_prompt"] == prompt
        assert client.get(f"/api/blueprints/{first['blueprint_id']}").json()["cached"] is True
    fresh.close()


def test_a_file_that_is_not_utf8_is_one_invalid_entry_and_the_others_still_list_and_load(api: Api) -> None:
    saved = api.post("/api/blueprints", blueprint(name="good")).json()
    latin1 = "name: caf\xe9\nhead: {provider: openai, model: gpt-4o}\nlegs: {mode: single_agent}\n".encode("latin-1")
    (api.config.blueprints_dir / "latin1.yaml").write_bytes(latin1)
    listed = api.get("/api/blueprints")
    assert listed.status_code == 200, listed.text
    entries = {entry["file"]: entry for entry in listed.json()["blueprints"]}
    assert entries["latin1.yaml"]["error"]["code"] == "blueprint_invalid"
    assert (
        entries["latin1.yaml"]["error"]["message"]
        == "latin1.yaml is not UTF-8 text (invalid continuation byte at byte 9)"
    )
    assert entries[saved["file"]]["blueprint_id"] == saved["blueprint_id"]
    assert api.get(f"/api/blueprints/{saved['blueprint_id']}").status_code == 200
    assert api.get("/api/blueprints/bp_000000000000000000ff").status_code == 404


def test_compiled_blueprint_is_cached_by_id_and_an_unknown_id_is_a_404(api: Api) -> None:
    blueprint_id = api.post("/api/blueprints/validate-and-compile", blueprint()).json()["blueprint_id"]
    hits = api.service.cache_hits
    reply = api.get(f"/api/blueprints/{blueprint_id}").json()
    assert reply["cached"] is True and api.service.cache_hits == hits + 1
    for unknown in ("bp_00000000000000000000", "no-such-id"):
        missing = api.get(f"/api/blueprints/{unknown}")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "blueprint_not_found"
    run = api.post("/api/agents/run", {"blueprint_id": "bp_00000000000000000000", "message": "hi"})
    assert run.status_code == 404
    assert "bp_00000000000000000000" in run.json()["error"]["message"]


def test_component_schemas_describe_every_part_for_the_builder(api: Api) -> None:
    schemas = api.get("/api/components/schemas").json()
    providers = {p["name"]: {m["name"]: m["max_tokens"] for m in p["models"]} for p in schemas["head"]["providers"]}
    assert providers["openai"]["gpt-4o-mini"] == 16384 and "anthropic" in providers
    assert schemas["head"]["parameters"]["temperature"] == {"minimum": 0.0, "maximum": 2.0, "default": None}
    assert schemas["head"]["parameters"]["system_prompt"]["max_length"] == 10000
    tools = {t["type"]: t for t in schemas["arms"]["tool_types"]}
    assert set(tools) == {"tavily_search", "mcp", "workbench"}
    assert tools["tavily_search"]["options"]["search_depth"]["enum"] == ["basic", "advanced"]
    assert tools["tavily_search"]["options"]["max_results"]["maximum"] == 20
    assert schemas["legs"]["modes"] == [
        {"mode": "single_agent", "requires": []},
        {"mode": "workflow", "requires": ["steps"]},
        {"mode": "team", "requires": ["members"]},
    ]
    assert schemas["heart"]["memory"]["history_length"] == {"minimum": 1, "maximum": 100, "default": 10}
    assert schemas["spine"]["max_tool_calls"] == {"minimum": 1, "maximum": 100, "default": 10}
    assert schemas["spine"]["timeout_seconds"] == {"minimum": 1, "maximum": 300, "default": 60}
    for part in ("head", "arms", "legs", "heart", "spine", "blueprint"):
        assert schemas[part]["json_schema"], part
    assert set(schemas["blueprint"]["json_schema"]["required"]) == {"head", "legs"}


def test_malformed_requests_are_400_with_details(api: Api) -> None:
    response = api.client.post(
        "/api/blueprints/validate-and-compile", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"
    missing = api.get("/api/agents/logs")
    assert missing.status_code == 400
    assert missing.json()["error"]["details"]["errors"][0]["path"] == "session_id"
    neither = api.post("/api/agents/run", {"message": "hi"})
    assert neither.status_code == 400
    assert "exactly one of blueprint or blueprint_id" in neither.json()["error"]["message"]


def test_blueprints_may_be_posted_as_yaml_but_yaml_aliases_are_refused(api: Api) -> None:
    text = "head: {provider: openai, model: gpt-4o}\nlegs: {mode: single_agent}\n"
    headers = {"content-type": "application/yaml"}
    reply = api.client.post("/api/blueprints/validate-and-compile", content=text, headers=headers)
    assert reply.status_code == 200 and reply.json()["blueprint"]["head"]["model"] == "gpt-4o"
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nhead: *b\n"
    refused = api.client.post("/api/blueprints/validate-and-compile", content=bomb, headers=headers)
    assert refused.status_code == 400 and "aliases are not allowed" in refused.json()["error"]["message"]


def test_bodies_nested_too_deeply_or_parsed_slowly_get_a_400_and_are_read_off_the_event_loop(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers: list[str] = []
    load_yaml, loads = routes.load_yaml, routes.json.loads

    def noted(read: Any) -> Any:
        def reading(body: Any) -> Any:
            readers.append(threading.current_thread().name)
            return read(body)

        return reading

    monkeypatch.setattr(routes, "load_yaml", noted(load_yaml))
    monkeypatch.setattr(routes, "json", SimpleNamespace(loads=noted(loads)))
    for body, media in (
        ("[" * 5000 + "]" * 5000, "application/yaml"),
        ("[" * 100_000 + "]" * 100_000, "application/json"),
    ):
        reply = api.client.post("/api/blueprints/validate-and-compile", content=body, headers={"content-type": media})
        assert reply.status_code == 400, reply.text
        assert "nest" in reply.json()["error"]["message"]
    assert readers == ["AnyIO worker thread"] * 2  # not the event loop's thread


def test_blueprint_bodies_need_a_json_or_yaml_content_type(api: Api) -> None:
    form = api.client.post("/api/blueprints", content='{"head": {}}', headers={"content-type": "text/plain"})
    assert form.status_code == 400 and "application/json or application/yaml" in form.json()["error"]["message"]
    assert api.get("/api/blueprints").json()["blueprints"] == []


def test_request_bodies_are_capped_even_when_chunked(api: Api) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(2048):
            yield b"x" * 1024
        yield b'"}'

    response = api.client.post("/api/agents/run", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "limit_exceeded"
    sized = api.client.post(
        "/api/blueprints/validate-and-compile",
        content=b" " * (2 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert sized.status_code == 413


def test_errors_the_framework_raises_carry_codes_that_say_what_to_fix(api: Api) -> None:
    wrong_method = api.client.delete("/api/blueprints")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["code"] == "method_not_allowed"
    # Allow names every method the path takes (GET lists the saved files, POST saves one), not one route's.
    assert {method.strip() for method in wrong_method.headers["allow"].split(",")} == {"GET", "HEAD", "POST"}
    deep = api.client.post(
        "/api/agents/run", content=b"[" * 100_000 + b"]" * 100_000, headers={"content-type": "application/json"}
    )
    assert deep.status_code == 400
    assert deep.json()["error"]["code"] == "bad_request" and "nested too deeply" in deep.json()["error"]["message"]
    unknown = api.get("/api/no-such-thing")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


def test_saved_blueprints_are_listed_a_page_at_a_time_newest_first(api: Api) -> None:
    """Every save adds a file, and the listing returned all of them in one reply. Without `limit` it still
    does (the spec: all saved files); with it, a page and where the next starts."""
    saved = Path(api.config.blueprints_dir) / api.post("/api/blueprints", blueprint(name="paged")).json()["file"]
    for n in range(4):
        copy = saved.with_name(f"copy-{n}.yaml")
        copy.write_bytes(saved.read_bytes())
        os.utime(copy, (1_700_000_000 + n, 1_700_000_000 + n))
    newest_first = [saved.name, "copy-3.yaml", "copy-2.yaml", "copy-1.yaml", "copy-0.yaml"]
    whole = api.get("/api/blueprints").json()
    assert [e["file"] for e in whole["blueprints"]] == newest_first and whole["next_after"] is None
    listed, after = [], None
    while True:
        page = api.get("/api/blueprints", limit="2", **({"after": after} if after else {})).json()
        assert len(page["blueprints"]) <= 2
        listed += [e["file"] for e in page["blueprints"]]
        if (after := page["next_after"]) is None:
            break
    assert listed == newest_first
    rest = api.get("/api/blueprints", after="copy-3.yaml").json()
    assert [e["file"] for e in rest["blueprints"]] == newest_first[2:] and rest["next_after"] is None
    for paged in ({}, {"limit": "2"}):
        gone = api.get("/api/blueprints", after="nothing.yaml", **paged)
        assert gone.status_code == 404 and "nothing.yaml" in gone.json()["error"]["message"]
    for bad in ("0", str(LIST_PAGE_MAX + 1)):
        assert api.get("/api/blueprints", limit=bad).status_code == 400


def test_head_answers_as_get_without_a_body_on_every_endpoint_that_takes_get(api: Api) -> None:
    """A server that takes GET takes HEAD (RFC 9110): FastAPI's routes take only the methods they name, so
    HEAD of /api/blueprints (a monitor's or a proxy's check) was a 405 whose Allow did not even name HEAD."""
    saved = api.post("/api/blueprints", blueprint()).json()
    for path in (
        "/api/blueprints",
        f"/api/blueprints/{saved['blueprint_id']}",
        "/api/agents/logs?session_id=s",
        "/api/components/schemas",
        "/api/docs",
        "/api/openapi.json",
    ):
        got, head = api.client.get(path), api.client.head(path)
        assert head.status_code == got.status_code == 200, (path, head.status_code)
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"], path
    missing = api.client.head("/api/blueprints/bp_nothing")
    assert missing.status_code == 404 and missing.content == b""
    post_only = api.client.head("/api/agents/run")
    assert post_only.status_code == 405 and post_only.headers["allow"] == "POST"
    wrong = api.client.delete("/api/blueprints")
    assert {method.strip() for method in wrong.headers["allow"].split(",")} == {"GET", "HEAD", "POST"}
