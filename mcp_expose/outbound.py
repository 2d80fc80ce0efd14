"""Calling other MCP servers from a tool, with the call chain carried forward."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp_expose.core.context import InvocationContext


@asynccontextmanager
async def mcp_client(
    context: InvocationContext, url: str, *, headers: dict[str, str] | None = None, **client_options: Any
) -> AsyncIterator[Any]:
    """An MCP SDK `Client` for `url` that sends this call's conversation id and depth + 1.

    Raises `DepthExceeded` (a tool error) before connecting when the hop would be
    too deep. Pass the downstream server's own credentials in `headers`: the
    caller's token is never forwarded.
    """
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    chain_headers = context.outbound_headers()
    http = create_mcp_http_client(headers={**(headers or {}), **chain_headers})
    async with http, Client(streamable_http_client(url, http_client=http), **client_options) as client:
        yield client
