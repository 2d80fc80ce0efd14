"""`manage.py mcp_stdio`: the same catalog and policy over stdio, as one user, with the official SDK client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters

from .live import ROOT, demo_env, run_snippet
from .mcp_client import MODES

pytestmark = [pytest.mark.anyio, pytest.mark.live]


def stdio(data: Path, *options: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "manage.py"), "mcp_stdio", *options], env=demo_env(data), cwd=str(ROOT)
    )


@pytest.mark.parametrize("mode", list(MODES))
async def test_stdio_serves_the_catalog_as_the_user(demo_data: tuple[Path, str], mode: str) -> None:
    data, _ = demo_data
    async with Client(stdio(data, "--user", "reader", "--scopes", "mcp library:read"), mode=mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        whoami = await client.call_tool("library_whoami", {})
        search = await client.call_tool("library_search_books", {"query": "cosmos"})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("library_borrow_book", {"book_id": 1})  # needs library:write
        resources = (await client.list_resources()).resources
        assert client.protocol_version == MODES[mode]
    assert "library_search_books" in names and "library_borrow_book" not in names
    assert "library_overdue_loans" not in names  # reader lacks the Django permission
    assert whoami.structured_content["user"] == "reader" and whoami.structured_content["scopes"] == [
        "library:read",
        "mcp",
    ]
    # A local caller presents no credential: it is named by its way in, and code sees no request.auth.
    assert whoami.structured_content["credential"] == "stdio" and whoami.structured_content["request_auth"] is None
    assert search.structured_content["result"][0]["title"] == "Cosmos"
    assert refused.value.code == -32602
    assert [resource.uri for resource in resources] == ["library://catalogue"]


async def test_stdio_calls_are_in_the_usage_log(demo_data: tuple[Path, str]) -> None:
    data, _ = demo_data
    async with Client(stdio(data, "--user", "admin"), mode="auto") as client:
        await client.call_tool("library_echo", {"message": "over stdio"})
    row = run_snippet(
        data,
        "from mcp_expose.models import ToolCall; c = ToolCall.objects.filter("
        "tool_name='library_echo', username='admin', auth_method='local').last(); print(c.outcome)",
    )
    assert row.stdout.strip().splitlines()[-1] == "ok"


def test_an_unknown_user_fails_before_serving(demo_data: tuple[Path, str]) -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "mcp_stdio", "--user", "ghost"],
        env=demo_env(demo_data[0]),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1 and "No user named 'ghost'" in result.stderr and result.stdout == ""
