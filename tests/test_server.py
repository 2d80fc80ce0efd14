"""Our handlers inside the SDK's low-level server, driven in-process by the SDK client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from mcp import Client, MCPError

import mcp_expose
from mcp_expose.calls.dispatch import ToolOutcome
from mcp_expose.calls.failures import ToolFailure
from mcp_expose.catalog.compiled import Catalog, compile_catalog
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.serving.server import build_server
from mcp_expose.serving.wire import render_outcome

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def catalog(registry: CapabilityRegistry) -> Catalog:
    for index in range(30):

        def tool_fn(x: int = 0) -> int:
            return x

        tool_fn.__name__ = f"tool_{index:02d}"
        mcp_expose.tool(registry=registry, key=f"t.tool_{index:02d}", scopes=["odd"] if index % 2 else [])(tool_fn)
    return compile_catalog(registry, {}, "r")


def server_for(catalog: Catalog, scopes: frozenset[str]) -> Any:
    principal = Principal(user=AnonymousUser(), scopes=scopes, method="local")

    async def resolve(ctx: Any) -> tuple[Principal, Catalog]:
        return principal, catalog

    return build_server(resolve=resolve)


async def test_tools_list_is_filtered_ordered_and_runs_no_query(catalog: Catalog) -> None:
    # The handler runs on the event loop, where Django raises SynchronousOnlyOperation for any query:
    # listing 30 tools succeeding here is the proof that it runs none.
    async with Client(server_for(catalog, frozenset())) as client:
        tools = (await client.list_tools()).tools
    assert [tool.name for tool in tools] == [f"t.tool_{i:02d}" for i in range(0, 30, 2)]
    async with Client(server_for(catalog, frozenset({"odd"}))) as client:
        assert len((await client.list_tools()).tools) == 30


async def test_an_unissued_cursor_is_invalid(catalog: Catalog) -> None:
    async with Client(server_for(catalog, frozenset())) as client:
        with pytest.raises(MCPError) as caught:
            await client.list_tools(cursor="made-up")
    assert caught.value.code == -32602


async def test_call_through_the_server(catalog: Catalog) -> None:
    async with Client(server_for(catalog, frozenset())) as client:
        result = await client.call_tool("t.tool_00", {"x": 4})
    assert result.structured_content == {"result": 4}
    assert result.content[0].text == '{"result":4}'


def test_failures_render_as_error_results_with_matching_text() -> None:
    outcome = ToolOutcome(entry=None, failure=ToolFailure("conflict", "Taken.", details={"id": 1}))  # type: ignore[arg-type]
    result = render_outcome(outcome)
    assert result.is_error
    assert result.structured_content == {"error": {"code": "conflict", "message": "Taken.", "details": {"id": 1}}}
    assert json.loads(result.content[0].text) == result.structured_content


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unexpected_failure_in_a_handler_leaks_nothing(
    catalog: Catalog, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(ctx: Any) -> tuple[Principal, Catalog]:
        raise RuntimeError("secret detail: /srv/app/settings.py line 12")

    async with Client(build_server(resolve=broken), mode=mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("t.tool_00", {})
    assert caught.value.code == -32603 and "secret" not in caught.value.error.message
    incident = caught.value.error.data["incident"]
    assert any(incident in record.getMessage() and record.exc_info for record in caplog.records)
