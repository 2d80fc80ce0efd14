"""The fixtures the plugin provides once a project enables it (`mcp_expose.testing.plugin`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mcp_expose.testing.client import McpTestClient
    from mcp_expose.testing.live import LiveMcpServer


@pytest.fixture
def mcp_client(db: None) -> Callable[..., McpTestClient]:
    """Make an in-process client: `mcp_client(user=reader, scopes=["shop:read"])` (the arguments of
    `McpTestClient`). Works inside the test's transaction: the tools see the test's rows. The test starts with
    an empty MCP cache (`reset_shared_state`): no rate-limit counts from earlier tests."""
    from mcp_expose.testing.client import McpTestClient
    from mcp_expose.testing.state import reset_shared_state

    reset_shared_state()

    def make(user: Any = None, scopes: Any = None, **options: Any) -> McpTestClient:
        return McpTestClient(user, scopes, **options)

    return make


@pytest.fixture
def mcp_live_application() -> Any:
    """The ASGI application `mcp_live` serves; None: a fresh one of the project's (see `LiveMcpServer`).
    Override it to serve another."""
    return None


@pytest.fixture
def mcp_live(transactional_db: None, mcp_live_application: Any) -> Iterator[LiveMcpServer]:
    """A real uvicorn serving the project on 127.0.0.1, for this test. Its requests run on their own
    connections, so the test's rows must be committed: it runs with `transactional_db`, as `live_server` does."""
    from mcp_expose.testing.live import LiveMcpServer

    with LiveMcpServer(mcp_live_application) as server:
        yield server
