"""Testing a project's MCP surface: an in-process client, a live server, assertions, a pytest plugin and a
unittest mixin (docs/testing.md).

Lazy, like the package: pytest imports the plugin's entry point (`mcp_expose.testing.plugin`) in every project
that has the package installed, before Django is set up, so nothing here may need Django at import.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "HttpRefusal",
    "LiveMcpServer",
    "McpTestCase",
    "McpTestClient",
    "assert_cannot_call",
    "assert_hidden",
    "assert_input_required",
    "assert_tool_error",
    "assert_tool_result",
    "assert_visible",
    "changed_settings",
    "reset_shared_state",
]

if TYPE_CHECKING:
    from mcp_expose.core.conf import changed_settings
    from mcp_expose.testing.assertions import (
        assert_cannot_call,
        assert_hidden,
        assert_input_required,
        assert_tool_error,
        assert_tool_result,
        assert_visible,
    )
    from mcp_expose.testing.caller import HttpRefusal
    from mcp_expose.testing.cases import McpTestCase
    from mcp_expose.testing.client import McpTestClient
    from mcp_expose.testing.live import LiveMcpServer
    from mcp_expose.testing.state import reset_shared_state

_LAZY = {
    "HttpRefusal": ".caller",
    "LiveMcpServer": ".live",
    "McpTestCase": ".cases",
    "McpTestClient": ".client",
    "assert_cannot_call": ".assertions",
    "assert_hidden": ".assertions",
    "assert_input_required": ".assertions",
    "assert_tool_error": ".assertions",
    "assert_tool_result": ".assertions",
    "assert_visible": ".assertions",
    "changed_settings": "..core.conf",
    "reset_shared_state": ".state",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
