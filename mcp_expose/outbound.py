"""Calling other MCP servers from a tool, with the call chain carried forward and the SSRF guard of upstreams.

Where a tool may connect is decided as for an upstream (`core/ssrf_guard`), with the same settings: HTTPS to a
public address; plain HTTP and loopback only with `UPSTREAM_ALLOW_LOOPBACK`; private, shared, link-local and
reserved networks only when `UPSTREAM_ALLOWED_NETWORKS` lists them; the cloud metadata addresses never. The URL is
checked before anything is sent, and every request (a redirect, a later request of the session) is checked again
as it leaves and sent to the address that was checked, as the upstream gateway's transport does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2

from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import ToolError
from mcp_expose.core.ssrf_guard import AddressRefused, IPAddress
from mcp_expose.upstream.tls import upstream_tls
from mcp_expose.upstream.transport import MCP_CLIENT_TIMEOUT, resolve_in_thread, send_pinned


class OutboundRefused(ToolError):
    """The URL, or an address its host resolves to, is not one a tool may connect to; the guard's message."""

    code = "outbound_refused"
    default_message = "The server at that URL may not be called from here."


@asynccontextmanager
async def mcp_client(
    context: InvocationContext, url: str, *, headers: dict[str, str] | None = None, **client_options: Any
) -> AsyncIterator[Any]:
    """An MCP SDK `Client` for `url` that sends this call's conversation id and depth + 1.

    Raises `DepthExceeded` (a tool error) before connecting when the hop would be
    too deep, and `OutboundRefused` (a tool error with the SSRF guard's message)
    before connecting when `url` is not one an upstream could have. Every request
    is checked again as it leaves. Pass the downstream server's own credentials in
    `headers`: the caller's token is never forwarded.
    """
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    chain_headers = context.outbound_headers()
    await _checked(url)
    http = httpx2.AsyncClient(
        headers={**(headers or {}), **chain_headers},
        timeout=MCP_CLIENT_TIMEOUT,
        transport=GuardedTransport(),
    )
    async with http, Client(streamable_http_client(url, http_client=http), **client_options) as client:
        yield client


class GuardedTransport(httpx2.AsyncBaseTransport):
    """Each request checked by the SSRF guard as it leaves, then sent to the address that was checked."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx2.AsyncHTTPTransport(trust_env=False, verify=upstream_tls())

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            host, addresses = await _checked(str(request.url))
        except OutboundRefused as exc:
            raise httpx2.ConnectError(exc.message, request=request) from None
        return await send_pinned(self.inner, request, host, addresses)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _checked(url: str) -> tuple[str, list[IPAddress]]:
    """The URL's host and the addresses to connect to, resolved and checked now (in a thread: it may look up DNS)."""
    try:
        host, _port, addresses = await resolve_in_thread(url)
    except AddressRefused as exc:
        raise OutboundRefused(str(exc)) from None
    return host, addresses
