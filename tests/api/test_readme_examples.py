"""The README's blueprint example and every curl example, run for real against the API."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from awb.blueprints.files import parse_yaml
from awb.config import Config

from .conftest import Api
from .fakes import FakeServer, answer, tool_call

README = Path(__file__).parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## Blueprints and the REST API", 1)[1].split("\n## ", 1)[0]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), re.DOTALL)


def test_readme_blueprint_example_is_valid_and_its_id_is_the_one_the_curl_examples_use() -> None:
    blueprint = parse_yaml(_blocks("yaml")[0])
    assert blueprint.arms[0].type == "tavily_search" and blueprint.heart.memory.enabled
    assert blueprint.blueprint_id() in _blocks("sh")[0]


def test_every_endpoint_has_a_curl_example_and_each_one_works(
    api: Api, tmp_path: Path, fake_model: FakeServer, fake_tavily: FakeServer
) -> None:
    (tmp_path / "researcher.yaml").write_text(_blocks("yaml")[0], encoding="utf-8")
    commands = [line for line in _blocks("sh")[0].splitlines() if line.startswith("curl ")]
    documented = {
        (op.upper(), path) for path, ops in api.get("/api/openapi.json").json()["paths"].items() for op in ops
    }
    shown = set()
    for command in commands:
        method = "POST" if " -X POST " in command else "GET"
        url = next(word for word in shlex.split(command) if word.startswith("http"))
        path = re.sub(r"bp_[0-9a-f]{20}", "{blueprint_id}", url.split("7777", 1)[1].split("?")[0])
        shown.add((method, path))
    assert documented <= shown

    fake_model.queue(tool_call("tavily__search", {"query": "python 3.13"}), answer("Free-threading, a new REPL."))
    fake_model.queue(tool_call("done", {"improved_instructions": "You answer questions.", "explanation": "Clearer."}))
    fake_tavily.queue(
        (200, {"results": [{"title": "3.13", "url": "https://docs.python.org/3.13/whatsnew", "content": "..."}]})
    )
    for command in commands:
        argv = shlex.split(command.replace("http://127.0.0.1:7777", api.url))
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=60, check=True)
        reply = json.loads(done.stdout)
        assert "error" not in reply, (command, reply)
    assert reply["improved_instructions"] == "You answer questions."
    logs = api.get("/api/agents/logs", session_id="demo").json()["entries"]
    assert [e["kind"] for e in logs] == ["run_start", "tool_call", "run_end"]
    assert yaml.safe_load((tmp_path / "researcher.yaml").read_text(encoding="utf-8"))["name"] == "researcher"


def test_readme_knowledge_example_configures_a_base_the_blueprint_may_name() -> None:
    config = Config.model_validate(json.loads(_blocks("json")[0]))
    bases = tuple(config.blueprints.knowledge)
    assert bases == ("handbook",)
    blueprint = parse_yaml(_blocks("yaml")[1], knowledge_bases=bases)
    assert blueprint.heart.knowledge.knowledge_base == "handbook"


def test_readme_agno_example_runs_the_blueprint_through_agno(tmp_path: Path, fake_model: FakeServer) -> None:
    (tmp_path / "researcher.yaml").write_text(_blocks("yaml")[0], encoding="utf-8")
    choice = {"index": 0, "message": {"role": "assistant", "content": "A new REPL."}, "finish_reason": "stop"}
    fake_model.queue((200, {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWB_", "OPENAI_", "ANTHROPIC_", "TAVILY_"))}
    env |= {"OPENAI_BASE_URL": f"{fake_model.url}/v1", "OPENAI_API_KEY": "sk-test-readme"}
    (code,) = _blocks("python")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "A new REPL."
    assert "What is new in Python 3.13?" in json.dumps(fake_model.requests[0]["body"]["messages"])
    assert (tmp_path / ".awb" / "agno.db").is_file()
