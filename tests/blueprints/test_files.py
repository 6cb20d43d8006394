"""Blueprint files: unique names, safe names only, and a load -> save -> load round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from awb.blueprints.errors import BlueprintNotFound
from awb.blueprints.files import BlueprintFiles, parse_yaml, to_yaml

SOURCE = """
name: Round Trip
head:
  provider: openai
  model: gpt-4.1-mini
  system_prompt: |
    First line.
    Second line: with a colon, "quotes" and unicode é.
legs:
  mode: workflow
  steps:
    - name: outline
      instructions: Outline it.
    - name: write
      instructions: Write it.
"""


def test_files_round_trip_to_the_same_blueprint_and_id(tmp_path: Path) -> None:
    files = BlueprintFiles(tmp_path / "blueprints")
    original = parse_yaml(SOURCE)
    first = files.save(original)
    loaded = files.load(first.name)
    second = files.save(loaded)
    assert first != second and first.name.startswith("round-trip-")
    assert files.load(second.name) == original
    assert loaded.blueprint_id() == original.blueprint_id()
    assert first.read_text(encoding="utf-8") == second.read_text(encoding="utf-8") == to_yaml(original)
    assert [entry.file for entry in files.scan()] == sorted([first.name, second.name], reverse=True)
    assert files.find(original.blueprint_id()) == original


@pytest.mark.parametrize(
    "prompt",
    ["x\x85y\nz", "x\x85y", "a\u2028b", "a\u2029b\n", "a\r\nb", "tab\tx\n", "trailing \nx", "a\nb\n\n", " lead\nx"],
)
def test_any_text_saves_and_loads_back_to_the_same_id(tmp_path: Path, prompt: str) -> None:
    """YAML reads NEL, LS and PS as line breaks: a prompt holding one came back changed (another id)."""
    files = BlueprintFiles(tmp_path / "blueprints")
    original = parse_yaml(SOURCE).model_copy(deep=True)
    original.head.system_prompt = prompt
    loaded = files.load(files.save(original).name)
    assert loaded.head.system_prompt == prompt
    assert loaded.blueprint_id() == original.blueprint_id()


@pytest.mark.parametrize("name", ["../secret.yaml", "/etc/passwd", "a/b.yaml", "x.txt", ".hidden.yaml"])
def test_file_names_outside_the_directory_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(BlueprintNotFound):
        BlueprintFiles(tmp_path).load(name)
