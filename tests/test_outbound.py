"""`mcp_expose.outbound.mcp_client`: the SSRF guard of upstreams, with their settings, on every call a tool makes.

A real uvicorn of this process (`mcp_live`) is the loopback server; the guard's refusals happen before any
connection, which the transport test shows with an inner transport that records what reaches it.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User

from mcp_expose import outbound
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.principal import Principal
from mcp_expose.models import ApiKey

pytestmark = pytest.mark.anyio


def context() -> InvocationContext:
    return InvocationContext(tool_name="toolbox.relay", principal=Principal(user=None))


@pytest.fixture
def secret(transactional_db: None) -> str:
    user = User.objects.create_user("relay")
    _key, secret = ApiKey.create_key(user=user, name="relay", scopes="mcp library:read")
    return secret


def guard(settings: Any, **values: Any) -> None:
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, **values}


async def list_tools(url: str, secret: str) -> set[str]:
    async with outbound.mcp_client(context(), url, headers={"Authorization": f"Bearer {secret}"}) as client:
        listing = await client.list_tools()
    return {tool.name for tool in listing.tools}


async def test_a_loopback_server_is_refused_without_upstream_allow_loopback(
    mcp_live: Any, secret: str, settings: Any
) -> None:
    guard(settings, UPSTREAM_ALLOW_LOOPBACK=False)
    with pytest.raises(outbound.OutboundRefused, match="UPSTREAM_ALLOW_LOOPBACK") as refused:
        await list_tools(mcp_live.url, secret)
    assert refused.value.code == "outbound_refused"


async def test_a_loopback_server_is_called_with_upstream_allow_loopback(
    mcp_live: Any, secret: str, settings: Any
) -> None:
    guard(settings, UPSTREAM_ALLOW_LOOPBACK=True)
    assert "library.search_books" in await list_tools(mcp_live.url, secret)


async def test_a_private_address_is_refused_before_anything_is_sent(settings: Any) -> None:
    guard(settings, UPSTREAM_ALLOW_LOOPBACK=True, UPSTREAM_ALLOWED_NETWORKS=[])
    with pytest.raises(outbound.OutboundRefused) as refused:
        async with outbound.mcp_client(context(), "https://10.255.255.1/mcp"):
            pytest.fail("connected")
    assert refused.value.message == (
        "The host '10.255.255.1' resolves to 10.255.255.1, "
        "a private address (list its network in UPSTREAM_ALLOWED_NETWORKS to allow it)."
    )


class Recording(httpx2.AsyncBaseTransport):
    """An inner transport that answers 204 and records the URL of each request that reached it."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(str(request.url))
        return httpx2.Response(204)


async def send(url: str) -> tuple[Recording, httpx2.Response | Exception]:
    inner = Recording()
    async with httpx2.AsyncClient(transport=outbound.GuardedTransport(inner)) as http:
        try:
            return inner, await http.post(url, content=b"{}")
        except httpx2.ConnectError as exc:
            return inner, exc


async def test_each_request_is_checked_as_it_leaves(settings: Any) -> None:
    guard(settings, UPSTREAM_ALLOWED_NETWORKS=[])
    inner, refused = await send("https://10.255.255.1/mcp")
    assert inner.sent == [] and isinstance(refused, httpx2.ConnectError)
    assert "a private address (list its network in UPSTREAM_ALLOWED_NETWORKS" in str(refused)
    guard(settings, UPSTREAM_ALLOWED_NETWORKS=["10.0.0.0/8"])
    inner, answered = await send("https://10.255.255.1/mcp")
    assert inner.sent == ["https://10.255.255.1/mcp"] and isinstance(answered, httpx2.Response)


async def test_a_cloud_metadata_address_is_refused_even_when_its_network_is_listed(settings: Any) -> None:
    guard(settings, UPSTREAM_ALLOW_LOOPBACK=True, UPSTREAM_ALLOWED_NETWORKS=["169.254.0.0/16"])
    with pytest.raises(outbound.OutboundRefused, match="a cloud metadata address, which is never reachable"):
        async with outbound.mcp_client(context(), "https://169.254.169.254/mcp"):
            pytest.fail("connected")
    inner, refused = await send("https://169.254.169.254/latest")
    assert inner.sent == [] and isinstance(refused, httpx2.ConnectError)
    inner, answered = await send("https://169.254.1.1/listed")  # the listed network itself is reachable
    assert inner.sent == ["https://169.254.1.1/listed"]
