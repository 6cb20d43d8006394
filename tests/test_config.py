"""Configuration: defaults, the file, AWB_* overrides, and errors that name the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from awb.config import Config, default_config_json, load_config, unknown_env_names, with_overrides
from awb.errors import ConfigError, UsageError


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


def test_relative_grants_are_anchored_at_the_config_files_folder_like_other_paths(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"sandbox": {"grants": {"writer": ["tools/out", "/srv/data"]}}}))
    config = load_config(path, environ={})
    assert config.sandbox.grants == {"writer": [str(tmp_path.resolve() / "tools" / "out"), "/srv/data"]}


def test_a_null_embedding_provider_is_none_in_the_file_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({"search": {"mode": "text", "embedding_provider": None}}))
    assert load_config(path, environ={}).search.embedding_provider == "none"
    for environ in ({"AWB_SEARCH__EMBEDDING_PROVIDER": "null"}, {"AWB_SEARCH": '{"embedding_provider": null}'}):
        assert load_config(None, environ=environ).search.embedding_provider == "none"


def test_null_in_the_environment_is_null_as_in_the_file_never_quietly_the_default() -> None:
    assert load_config(None, environ={"AWB_INVENTORY_URL": "null"}).inventory_url is None
    with pytest.raises(ConfigError, match=r"port: Input should be a valid integer \(got None\)"):
        load_config(None, environ={"AWB_PORT": "null"})


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


def test_json_nested_past_the_decoder_is_a_config_error_not_an_internal_one(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "awb.config.json"
    path.write_text(deep)
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match="AWB_MEMORY must be an object written as JSON"):
        load_config(None, environ={"AWB_MEMORY": deep, "AWB_CONFIG": ""})


def test_the_written_default_config_loads_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    path.write_text(default_config_json())
    assert load_config(path, environ={}).max_tools == 1000


def test_unknown_awb_variables_are_ignored_and_listed(tmp_path: Path) -> None:
    env = {"AWB_AGENTS_DIR": "agents", "AWB_PROMPT": "x", "AWB_MEMORY__NOT_A_FIELD": "1", "AWB_PORT": "9200"}
    config = load_config(None, environ=env)
    assert config.port == 9200
    assert unknown_env_names(env) == ["AWB_MEMORY__NOT_A_FIELD", "AWB_PROMPT"]


def test_a_section_can_be_set_as_json_from_the_environment() -> None:
    config = load_config(None, environ={"AWB_SANDBOX__GRANTS": '{"reader": ["/srv/data"]}', "AWB_HOST": "0.0.0.0"})
    assert config.sandbox.grants == {"reader": ["/srv/data"]}
    assert config.host == "0.0.0.0"


@pytest.mark.parametrize(
    ("variable", "value", "shape"),
    [
        ("AWB_ALLOWED_HOSTS", "db.internal:*", "a list"),
        ("AWB_SANDBOX__GRANTS", "reader=/srv/data", "an object"),
        ("AWB_MEMORY", "{", "an object"),
    ],
)
def test_an_environment_value_that_is_not_the_json_its_field_needs_is_a_config_error_naming_the_variable(
    variable: str, value: str, shape: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={variable: value, "AWB_CONFIG": ""})
    assert caught.value.message.startswith(f"{variable} must be {shape} written as JSON")
    assert caught.value.details["variable"] == variable


def test_a_field_that_also_takes_text_reads_any_value_from_the_environment() -> None:
    # `mcp_servers` is a map or a path to a file holding one: plain text is a path, not bad JSON.
    assert load_config(None, environ={"AWB_MCP_SERVERS": "servers.json"}).mcp_servers == "servers.json"


def test_a_config_built_in_code_never_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWB_PORT", "9300")
    assert Config().port == 7777
    assert load_config(None).port == 9300


def test_command_line_overrides_are_validated_like_the_file_and_named_as_options() -> None:
    with pytest.raises(UsageError, match=r"^--port: .*65535 \(got 70000\)"):
        with_overrides(Config(), port=70000)
    with pytest.raises(UsageError, match=r"^--inventory: "):
        with_overrides(Config(), inventory_path=7)
    assert with_overrides(Config(), port=0, host=None).port == 0


def test_knowledge_base_directories_follow_the_file_and_names_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    knowledge = {"handbook": "docs/handbook", "wiki": str(tmp_path / "elsewhere")}
    path.write_text(json.dumps({"blueprints": {"knowledge": knowledge}}))
    config = load_config(path, environ={"AWB_BLUEPRINTS__CACHE_SIZE": "9"})
    assert config.blueprints.knowledge == {"handbook": tmp_path / "docs" / "handbook", "wiki": tmp_path / "elsewhere"}
    assert config.blueprints.cache_size == 9 and config.blueprints.knowledge_search == "text"
    path.write_text(json.dumps({"blueprints": {"knowledge": {"no spaces": "docs"}}}))
    with pytest.raises(ConfigError, match=r"blueprints\.knowledge"):
        load_config(path, environ={})


@pytest.mark.parametrize(("variable", "imported"), [("AWB_PROMPT", False), ("AWB_MEMORY__ARCHIVE_DAYS_SHORT", True)])
def test_pydantic_settings_loads_only_when_a_field_is_set_from_the_environment(
    tmp_path: Path, variable: str, imported: bool
) -> None:
    # Its import costs a command ~0.05-0.1 s: without an `AWB_*` field variable nothing needs it.
    probe = (
        "import sys\n"
        "from awb.config import load_config\n"
        f"config = load_config(None, environ={{{variable!r}: '7'}})\n"
        "print(config.memory.archive_days_short, 'pydantic_settings' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7.0" if imported else "60", str(imported)]


def test_a_rejected_secret_is_never_echoed_in_the_error(tmp_path: Path) -> None:
    token = "s3cr3t-t0ken-15"  # one short of the 16 an auth_token needs
    empty = tmp_path / "empty.json"
    empty.write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError) as from_env:
        load_config(empty, environ={"AWB_AUTH_TOKEN": token})
    assert "auth_token must be at least 16 characters (got a value of 15 characters)" in from_env.value.message
    file = tmp_path / "awb.config.json"
    file.write_text(json.dumps({"auth_token": token}), encoding="utf-8")
    with pytest.raises(ConfigError) as from_file:
        load_config(file, environ={})
    assert token not in from_file.value.message
    assert token not in repr(from_file.value.to_dict())
    # Other values are still shown, so the error says what was wrong.
    with pytest.raises(ConfigError) as plain:
        load_config(empty, environ={"AWB_SEARCH__MODE": "bogus"})
    assert "(got 'bogus')" in plain.value.message


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    found: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            found |= _numeric_fields(info.annotation, f"{prefix}{name}.")
        elif any(type(item).__name__ in ("Ge", "Gt") for item in info.metadata):
            found[prefix + name] = info
    return found


def test_every_size_count_and_span_with_a_floor_has_a_ceiling_too() -> None:
    # A field with only a lower bound took 10**18, which defeated the bound it sets (or overflowed later).
    unbounded = [
        name
        for name, info in _numeric_fields(Config).items()
        if not any(type(item).__name__ in ("Le", "Lt") for item in info.metadata)
    ]
    assert unbounded == []


def _uncapped(annotation: Any, metadata: list[Any] | tuple[Any, ...] = ()) -> list[str]:
    """Every list or map inside `annotation` (a union's members, a map's values...) with no `max_length`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [
            f"{name}: {problem}" for name, info in annotation.model_fields.items() for problem in _uncapped_field(info)
        ]
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        found = [item for e in extra for item in (e.metadata if isinstance(e, FieldInfo) else [e])]
        return _uncapped(inner, found)
    problems = []
    if origin in (list, dict) and not any(type(item).__name__ == "MaxLen" for item in metadata):
        problems.append(repr(annotation))
    for arg in get_args(annotation):
        problems += _uncapped(arg)
    return problems


def _uncapped_field(info: FieldInfo) -> list[str]:
    return _uncapped(info.annotation, info.metadata)


def test_every_list_and_map_setting_has_a_ceiling_on_its_entries_too() -> None:
    # `allowed_hosts`, `sandbox.grants` (and each tool's directories) took as many entries as a file held.
    assert _uncapped(Config) == []
    assert _uncapped(dict[str, list[int]]) == ["dict[str, list[int]]", "list[int]"]  # the check sees both


def test_the_list_and_map_settings_refuse_more_entries_than_their_ceiling(tmp_path: Path) -> None:
    path = tmp_path / "awb.config.json"
    for data, field in [
        ({"allowed_hosts": ["h:*"] * 1001}, "allowed_hosts"),
        ({"allowed_origins": ["http://h:*"] * 1001}, "allowed_origins"),
        ({"sandbox": {"grants": {f"t{n}": [] for n in range(10_001)}}}, "sandbox.grants"),
        ({"sandbox": {"grants": {"t": ["/d"] * 101}}}, "sandbox.grants.t"),
        ({"blueprints": {"knowledge": {f"kb{n}": "/d" for n in range(101)}}}, "blueprints.knowledge"),
        ({"mcp_servers": {f"s{n}": {"command": "x"} for n in range(101)}}, "mcp_servers"),
    ]:
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError) as caught:
            load_config(path, environ={})
        assert f"{field}: " in caught.value.message, (field, caught.value.message)


@pytest.mark.parametrize(
    "field",
    [
        "max_tools",
        "max_code_bytes",
        "max_output_bytes",
        "sandbox.max_log_bytes",
        "memory.demotion_days_medium_to_short",
    ],
)
def test_a_huge_size_or_count_in_the_file_is_a_config_error_naming_the_field(tmp_path: Path, field: str) -> None:
    section, _, name = field.rpartition(".")
    data: dict[str, Any] = {name: 10**18}
    path = tmp_path / "awb.config.json"
    path.write_text(json.dumps({section: data} if section else data))
    with pytest.raises(ConfigError, match=rf"{field}: Input should be less than or equal to") as caught:
        load_config(path, environ={})
    assert caught.value.details["fields"] == [field]
