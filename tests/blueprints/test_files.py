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


def test_a_scan_reads_again_only_the_files_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing and every uncached id lookup scan the directory: unchanged files are not parsed again."""
    from awb.blueprints import files as files_module

    files = BlueprintFiles(tmp_path / "blueprints")
    original = parse_yaml(SOURCE)
    kept, edited = files.save(original), files.save(parse_yaml(SOURCE.replace("Round Trip", "Other")))
    reads: list[str] = []
    real = files_module.read_blueprint_text
    monkeypatch.setattr(
        files_module, "read_blueprint_text", lambda path, source: reads.append(source) or real(path, source)
    )
    assert len(files.scan()) == 2 and sorted(reads) == sorted([kept.name, edited.name])
    reads.clear()
    assert files.find(original.blueprint_id()) == original
    assert files.find("bp_00000000000000000000") is None
    assert sorted(entry.file for entry in files.scan()) == sorted([kept.name, edited.name])
    assert reads == []
    edited.write_text("not: [a blueprint", encoding="utf-8")
    listed = {entry.file: entry for entry in files.scan()}
    assert reads == [edited.name] and listed[edited.name].error is not None
    kept.unlink()
    assert [entry.file for entry in files.scan()] == [edited.name]
