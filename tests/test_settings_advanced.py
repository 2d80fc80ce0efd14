"""The tuning knobs live under MCP_EXPOSE["ADVANCED"]: read there, still read at the top level (with W019), and
checked like every other key."""

from __future__ import annotations

import pytest
from django.test import override_settings

from mcp_expose.checks import check_settings
from mcp_expose.core.conf import ADVANCED_DEFAULTS, changed_settings, get_settings, setting_label


def ids_and_messages() -> list[tuple[str, str]]:
    return [
        (message.id or "", message.msg)
        for message in check_settings()
        if message.id in ("mcp_expose.E001", "mcp_expose.W019")
    ]


def test_a_knob_is_read_under_advanced_and_keeps_its_default_elsewhere() -> None:
    with override_settings(MCP_EXPOSE={"ADVANCED": {"TASK_LEASE": 45.0}}):
        conf = get_settings()
        assert conf.TASK_LEASE == 45.0 and conf.TASK_HEARTBEAT == ADVANCED_DEFAULTS["TASK_HEARTBEAT"]
        assert ids_and_messages() == []


def test_a_knob_left_at_the_top_level_is_read_there_and_warned_about_until_moved() -> None:
    with override_settings(MCP_EXPOSE={"USAGE_BATCH_SECONDS": 0.7, "TASK_LEASE": 40.0}):
        assert get_settings().USAGE_BATCH_SECONDS == 0.7
        assert ids_and_messages() == [
            (
                "mcp_expose.W019",
                "MCP_EXPOSE sets 'TASK_LEASE', 'USAGE_BATCH_SECONDS' at its top level: tuning settings now live under "
                "MCP_EXPOSE['ADVANCED'].",
            )
        ]
    # Under ADVANCED it wins over the old place.
    with override_settings(MCP_EXPOSE={"USAGE_BATCH_SECONDS": 0.7, "ADVANCED": {"USAGE_BATCH_SECONDS": 0.1}}):
        assert get_settings().USAGE_BATCH_SECONDS == 0.1


def test_an_unknown_key_under_advanced_or_an_advanced_that_is_no_dict_is_an_error() -> None:
    with override_settings(MCP_EXPOSE={"ADVANCED": {"TASK_LEAS": 1, "PATH": "/x"}}):
        found = ids_and_messages()
        assert get_settings().PATH == "/mcp"  # a public setting is not read from ADVANCED
    assert [message for _, message in found] == [
        "MCP_EXPOSE['ADVANCED'] has an unknown key 'PATH'.",
        "MCP_EXPOSE['ADVANCED'] has an unknown key 'TASK_LEAS'.",
    ]
    with override_settings(MCP_EXPOSE={"ADVANCED": ["TASK_LEASE", 5]}):
        assert ids_and_messages() == [("mcp_expose.E001", "MCP_EXPOSE['ADVANCED'] is ['TASK_LEASE', 5].")]
        assert get_settings().TASK_LEASE == ADVANCED_DEFAULTS["TASK_LEASE"]


def test_a_check_names_a_knob_where_it_is_written() -> None:
    assert setting_label("TASK_LEASE") == "MCP_EXPOSE['ADVANCED']['TASK_LEASE']"
    assert setting_label("TASKS") == "MCP_EXPOSE['TASKS']"
    with override_settings(MCP_EXPOSE={"ADVANCED": {"UPSTREAM_MAX_TOOLS": 0}}):
        messages = [message.msg for message in check_settings() if message.id == "mcp_expose.E016"]
    assert messages == ["MCP_EXPOSE['ADVANCED']['UPSTREAM_MAX_TOOLS'] is 0."]


def test_changed_settings_puts_each_change_in_its_place() -> None:
    base = {"FAST_PATH": False, "TASK_LEASE": 9.0, "ADVANCED": {"TASK_HEARTBEAT": 1.0}}
    assert changed_settings(base, TASK_LEASE=12.0, JSON_RESPONSE=True) == {
        "FAST_PATH": False,
        "JSON_RESPONSE": True,
        "ADVANCED": {"TASK_HEARTBEAT": 1.0, "TASK_LEASE": 12.0},
    }
    assert base == {"FAST_PATH": False, "TASK_LEASE": 9.0, "ADVANCED": {"TASK_HEARTBEAT": 1.0}}  # not changed
    assert changed_settings(FAST_PATH=True) == {"FAST_PATH": True}
    with pytest.raises(ValueError, match="'FAST_PAHT' is no MCP_EXPOSE setting"):
        changed_settings(FAST_PAHT=True)
