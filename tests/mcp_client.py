"""The official MCP SDK client, pointed at a live server with a bearer credential."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp import Client

from mcp_expose.testing.live import connect_http

MODES = {"auto": "2026-07-28", "legacy": "2025-11-25"}


def connect(
    url: str, key: str | None, mode: str, headers: dict[str, str] | None = None, **options: Any
) -> AbstractAsyncContextManager[Client]:
    """`options` go to `Client` (extensions=, elicitation_callback=, ...)."""
    return connect_http(url, key, mode=mode, headers=headers, **options)
