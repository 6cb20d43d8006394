"""The meta-tools' names, the one source every face and message takes them from."""

from __future__ import annotations

from awb.meta_tools import META_VERBS, RESERVED_NAMES, meta_tool_name, served_by, served_names, verb_of, worded_by
from awb.server.guidance import descriptions
from awb.server.schemas import INPUT, OUTPUT


def test_a_meta_tool_is_served_under_the_configured_style() -> None:
    assert meta_tool_name("call", "underscore") == "awb_call"
    assert meta_tool_name("call", "dotted") == "awb.call"
    assert served_names("rollback") == ("awb_rollback", "awb.rollback")


def test_a_name_is_a_meta_tool_only_in_the_style_served() -> None:
    assert verb_of("awb.equip", "dotted") == "equip"
    assert verb_of("awb_equip", "dotted") is None
    assert verb_of("awb_", "underscore") is None
    assert verb_of("add_numbers", "underscore") is None


def test_every_meta_tool_has_schemas_and_a_description_and_both_names_are_reserved() -> None:
    assert list(INPUT) == list(OUTPUT) == list(descriptions("dotted")) == list(META_VERBS)
    assert {"awb_unequip", "awb.unequip", "awb_rollback", "awb.rollback"} <= RESERVED_NAMES
    assert len(RESERVED_NAMES) == 2 * len(META_VERBS)


def test_a_face_words_an_action_by_the_name_it_serves_or_by_its_own_command() -> None:
    assert served_by("dotted")("call") == "awb.call"
    cli = worded_by({"equip": "awb inventory equip"}, "dotted")
    assert cli("equip") == "awb inventory equip"
    assert cli("call") == "awb.call over MCP"  # no command of its own: where the action is served
    assert worded_by({}, "underscore")("update") == "awb_update over MCP"
