"""`McpTestCase`: the test client and the assertions for Django's test runner (unittest-style tests).

Mix it into `django.test.TestCase` (the tools run inside the test's transaction, on its connection) or
`TransactionTestCase`: `class OrderTools(McpTestCase, TestCase)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_expose.testing import assertions
from mcp_expose.testing.client import McpTestClient
from mcp_expose.testing.state import reset_shared_state


class McpTestCase:
    """`self.mcp_client(...)` and the assertions as methods, named in unittest's style. Each test starts with
    an empty MCP cache (`reset_shared_state`): no rate-limit counts from earlier tests."""

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]  # (a mixin: TestCase's, next in the MRO)
        reset_shared_state()

    def mcp_client(self, user: Any = None, scopes: Iterable[str] | None = None, **options: Any) -> McpTestClient:
        """An in-process client (the arguments of `McpTestClient`)."""
        return McpTestClient(user, scopes, **options)

    def assertToolVisible(self, listing: Any, *names: str) -> None:
        assertions.assert_visible(listing, *names)

    def assertToolHidden(self, listing: Any, *names: str) -> None:
        assertions.assert_hidden(listing, *names)

    def assertCannotCall(self, client: Any, name: str, arguments: dict[str, Any] | None = None) -> None:
        assertions.assert_cannot_call(client, name, arguments)

    def assertToolError(self, result: Any, code: str | None = None, *, message: str | None = None) -> dict[str, Any]:
        return assertions.assert_tool_error(result, code, message=message)

    def assertToolResult(self, result: Any, expected: Any) -> None:
        assertions.assert_tool_result(result, expected)

    def assertInputRequired(self, result: Any, *keys: str) -> Any:
        return assertions.assert_input_required(result, *keys)
