"""The official MCP SDK client, pointed at a live server with a bearer credential."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MODES = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@asynccontextmanager
async def connect(
    url: str, key: str | None, mode: str, headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """`options` go to `Client` (extensions=, elicitation_callback=, ...)."""
    headers = {**(headers or {}), **({"Authorization": f"Bearer {key}"} if key else {})}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client:  # type: ignore[arg-type]
        yield client
