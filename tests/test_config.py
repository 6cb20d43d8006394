"""Configuration: defaults, the file, AWB_* overrides, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awb.config import Config, default_config_json, load_config
from awb.errors import ConfigError


def test_every_field_has_the_documented_default() -> None:
    config = Config()
    assert (config.port, config.max_tools, config.max_code_bytes) == (7777, 1000, 65536)
    assert (config.tool_execution_timeout_ms, config.tool_memory_mb, config.max_output_bytes) == (5000, 100, 1 << 20)
    assert config.memory.promotion_threshold_medium == 5
    assert config.memory.promotion_threshold_long == 50
    assert config.memory.demotion_days_medium_to_short == 30
    assert config.memory.archive_days_short == 60
    assert config.search.mode == "auto"
    assert config.tool_names == "underscore"


def test_file_values_override_defaults_and_relative_paths_follow_the_file(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"port": 9000, "inventory_path": "data/inv.db", "memory": {"archive_days_short": 5}}))
    config = load_config(path, environ={})
    assert config.port == 9000
    assert config.inventory_path == tmp_path / "data" / "inv.db"
    assert config.memory.archive_days_short == 5
    assert config.memory.promotion_threshold_medium == 5


def test_environment_overrides_the_file_including_nested_fields(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"port": 9000}))
    env = {"AWB_PORT": "9100", "AWB_MEMORY__PROMOTION_THRESHOLD_MEDIUM": "3", "AWB_TOOL_NAMES": "dotted"}
    config = load_config(path, environ=env)
    assert (config.port, config.memory.promotion_threshold_medium, config.tool_names) == (9100, 3, "dotted")


def test_an_unknown_key_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"prot": 1}))
    with pytest.raises(ConfigError, match="prot: unknown key") as caught:
        load_config(path, environ={})
    assert caught.value.details["fields"] == ["prot"]


def test_a_wrong_type_is_an_error_naming_the_nested_field(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"memory": {"archive_days_short": "soon"}}))
    with pytest.raises(ConfigError, match=r"memory\.archive_days_short"):
        load_config(path, environ={})


def test_a_bad_environment_value_names_the_field() -> None:
    with pytest.raises(ConfigError, match="port") as caught:
        load_config(None, environ={"AWB_PORT": "not-a-port", "AWB_CONFIG": ""})
    assert "AWB_" in caught.value.message


def test_invalid_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text("{ nope")
    with pytest.raises(ConfigError, match=r"not valid JSON.*line 1"):
        load_config(path, environ={})


def test_the_written_default_config_loads_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(default_config_json())
    assert load_config(path, environ={}).max_tools == 1000
