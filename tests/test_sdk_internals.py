"""Every SDK name the package uses that the SDK does not publish is one `sdk_internals` checks at startup.

The package's source is read, not run: a private SDK module imported, a private name imported from the SDK, a
private method overridden in a subclass of an SDK class, or a private attribute of the SDK's read through `self`
in such a subclass. Each must be listed in `sdk_internals.EVERY_WANT`, so that a later SDK without it turns the
feature off with a warning instead of failing at run time.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

import mcp_expose
from mcp_expose.checks import check_sdk_pieces
from mcp_expose.serving import sdk_internals
from mcp_expose.serving.sdk_internals import EVERY_WANT, SESSION_WANTS, probe

PACKAGE = Path(mcp_expose.__file__).parent
SDK_ROOTS = ("mcp", "mcp_types")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _from_sdk(module: str) -> bool:
    return module.split(".")[0] in SDK_ROOTS


def private_sdk_names(source: str) -> set[str]:
    """The private SDK names `source` uses, as `module.name` or `module.Class._attribute`."""
    tree = ast.parse(source)
    found: set[str] = set()
    sdk_classes: dict[str, str] = {}  # a name bound to an SDK class here -> where it comes from
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _from_sdk(node.module):
            for alias in node.names:
                if any(_private(part) for part in node.module.split(".")) or _private(alias.name):
                    found.add(f"{node.module}.{alias.name}")
                sdk_classes[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _from_sdk(alias.name) and any(_private(part) for part in alias.name.split(".")):
                    found.add(alias.name)
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        bases = [sdk_classes[base.id] for base in cls.bases if isinstance(base, ast.Name) and base.id in sdk_classes]
        if not bases:
            continue
        own = {item.name for item in cls.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)}
        own |= {
            target.attr
            for node in ast.walk(cls)
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
        }
        overridden = {name for name in own if _private(name) and name != "_" and _defined_by(bases, name)}
        read = {
            node.attr
            for node in ast.walk(cls)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and _private(node.attr)
            and node.attr not in own
        }
        found |= {f"{bases[0]}.{name}" for name in overridden | read}
    return found


def _defined_by(bases: list[str], name: str) -> bool:
    """Whether one of the SDK classes (by dotted path) defines `name`: an override of the SDK's, not our own."""
    import importlib

    for path in bases:
        module, _, attribute = path.rpartition(".")
        if hasattr(getattr(importlib.import_module(module), attribute), name):
            return True
    return False


def listed() -> set[str]:
    return {want.where for wants in EVERY_WANT.values() for want in wants.values()}


def test_every_private_sdk_name_the_package_uses_is_checked_at_startup() -> None:
    used: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in private_sdk_names(path.read_text()):
            used.setdefault(name, set()).add(str(path.relative_to(PACKAGE)))
    unlisted = {name: sorted(where) for name, where in used.items() if name not in listed()}
    assert unlisted == {}, f"private SDK names used and not listed in sdk_internals.EVERY_WANT: {unlisted}"
    # The session manager's overrides are found by the reading, and are the ones listed.
    assert {name for name in used if "StreamableHTTPSessionManager" in name} == {
        want.where for want in SESSION_WANTS.values()
    }


def test_the_reading_finds_each_kind_of_private_use() -> None:
    """What the test above looks for, shown on a source that has one of each (and public uses it must not name)."""
    source = """
from mcp.shared._httpx_utils import MCP_DEFAULT_TIMEOUT
from mcp.server.runner import _private_helper, serve_one
import mcp.server._streamable_http_modern
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

class Ours(StreamableHTTPSessionManager):
    def __init__(self):
        self._mine = 1

    def _admit_session(self, requestor):
        return len(self._server_instances) + self._mine

    def _our_helper(self):
        return self.event_store
"""
    manager = "mcp.server.streamable_http_manager.StreamableHTTPSessionManager"
    assert private_sdk_names(source) == {
        "mcp.shared._httpx_utils.MCP_DEFAULT_TIMEOUT",
        "mcp.server.runner._private_helper",
        "mcp.server._streamable_http_modern",
        f"{manager}._admit_session",
        f"{manager}._server_instances",
    }


def test_the_session_manager_s_pieces_are_checked_for_their_shape() -> None:
    found, problems = probe(SESSION_WANTS)
    assert found is not None and problems == ()
    changed = {
        "handle_stateful_request": dataclasses.replace(
            SESSION_WANTS["handle_stateful_request"], name="StreamableHTTPSessionManager._admit_session"
        ),  # a plain function where a coroutine function was
        "admit_session": dataclasses.replace(SESSION_WANTS["admit_session"], name="StreamableHTTPSessionManager.run"),
        "discard_session": dataclasses.replace(SESSION_WANTS["discard_session"], name="NoSuchClass._discard_session"),
    }
    found, problems = probe(changed)
    manager = "mcp.server.streamable_http_manager"
    assert found is None
    assert problems == [
        f"{manager}.StreamableHTTPSessionManager._admit_session (no longer a coroutine function of (self, scope, "
        "receive, send))",
        f"{manager}.StreamableHTTPSessionManager.run (no longer a function of (self, requestor))",
        f"{manager}.NoSuchClass._discard_session (missing)",
    ]


@pytest.mark.parametrize("setting", ["FAST_PATH", "LEGACY_SESSIONS"])
def test_a_missing_piece_is_a_system_check_warning_for_the_feature_turned_on(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later SDK, simulated by taking one name away (as `tests/future_sdk` does for a whole server)."""
    from mcp.server import runner
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    assert check_sdk_pieces() == []
    monkeypatch.delattr(runner, "modern_error_data")
    monkeypatch.delattr(StreamableHTTPSessionManager, "_discard_session")
    turned_on: dict[str, Any] = {"FAST_PATH": False, "LEGACY_SESSIONS": False, setting: True}
    with override_settings(MCP_EXPOSE=turned_on):
        messages = check_sdk_pieces()
    assert [message.id for message in messages] == ["mcp_expose.W018"]
    (message,) = messages
    assert message.msg.startswith(f"MCP_EXPOSE['{setting}'] is on, but the installed SDK (mcp ")
    missing = {
        "FAST_PATH": "mcp.server.runner.modern_error_data (missing)",
        "LEGACY_SESSIONS": "mcp.server.streamable_http_manager.StreamableHTTPSessionManager._discard_session (missing)",
    }
    assert missing[setting] in message.msg
    assert missing[{"FAST_PATH": "LEGACY_SESSIONS", "LEGACY_SESSIONS": "FAST_PATH"}[setting]] not in message.msg
    with override_settings(MCP_EXPOSE={"FAST_PATH": False, "LEGACY_SESSIONS": False}):
        assert check_sdk_pieces() == []


def test_the_stateful_check_warns_once_and_says_stateless(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    sdk_internals.sessions_can_be_stateful.cache_clear()
    monkeypatch.delattr(StreamableHTTPSessionManager, "_handle_stateful_request")
    try:
        with caplog.at_level("WARNING", logger="mcp_expose.sessions"):
            assert sdk_internals.sessions_can_be_stateful() is False
            assert sdk_internals.sessions_can_be_stateful() is False
    finally:
        sdk_internals.sessions_can_be_stateful.cache_clear()
    (record,) = caplog.records
    assert "StreamableHTTPSessionManager._handle_stateful_request (missing)" in record.getMessage()
    assert record.getMessage().endswith("2025-11-25 clients are served statelessly.")
