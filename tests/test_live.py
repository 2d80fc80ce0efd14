"""The demo served by uvicorn, spoken to by the official SDK client over HTTP, in both protocol eras."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import MCPError

from .live import LiveServer, create_api_key, jsonrpc_body, modern_headers
from .mcp_client import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.live]

mode = pytest.mark.parametrize("mode", list(MODES))


@pytest.fixture(scope="module")
def read_only_key(demo_data: tuple[Path, str]) -> str:
    return create_api_key(demo_data[0], "reader", "library:read")


@mode
async def test_list_tools(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        assert client.protocol_version == MODES[mode]
        tools = (await client.list_tools()).tools
    names = [tool.name for tool in tools]
    assert names[:4] == ["library_search_books", "library_get_book", "library_library_stats", "library_echo"]
    assert "library_borrow_book" in names and "library_overdue_loans" in names
    get_book = next(tool for tool in tools if tool.name == "library_get_book")
    assert get_book.input_schema["additionalProperties"] is False
    assert get_book.input_schema["required"] == ["book_id"]
    assert get_book.output_schema is not None and get_book.output_schema["properties"]["isbn"] == {"type": "string"}
    assert get_book.annotations is not None and get_book.annotations.read_only_hint is True


@mode
async def test_call_a_sync_database_tool_and_an_async_tool(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        book = await client.call_tool("library_get_book", {"book_id": 1})
        stats = await client.call_tool("library_library_stats", {})
        search = await client.call_tool("library_search_books", {"query": "sagan", "limit": 5})
    assert not book.is_error
    assert book.structured_content["title"] == "A Wizard of Earthsea"
    assert json.loads(book.content[0].text) == book.structured_content
    assert stats.structured_content["books"] == 8 and stats.structured_content["authors"] == 6
    assert [b["title"] for b in search.structured_content["result"]] == ["Cosmos", "Pale Blue Dot"]


@mode
async def test_the_demo_s_ninja_api_is_listed_and_called(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    """The Django Ninja API beside the DRF one: one expose_ninja call per scope, served as library_ninja_*."""
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        science = await client.call_tool("library_ninja_list_books", {"genre": "science", "page": 1})
        earthsea = await client.call_tool("library_ninja_get_book", {"book_id": 1})  # an async operation
        missing = await client.call_tool("library_ninja_get_book", {"book_id": 999999})
        same = await client.call_tool(
            "library_ninja_set_copies", {"book_id": 1, "copies": earthsea.structured_content["copies"]}
        )
    assert {"library_ninja_list_books", "library_ninja_get_book", "library_ninja_set_copies"} <= set(tools)
    assert tools["library_ninja_list_books"].input_schema["properties"]["page"]["minimum"] == 1
    assert tools["library_ninja_get_book"].output_schema["properties"]["price"] == {"type": "string"}
    assert [book["title"] for book in science.structured_content["items"]] == [
        "Cosmos",
        "Pale Blue Dot",
        "Silent Spring",
    ]
    assert earthsea.structured_content["title"] == "A Wizard of Earthsea"
    assert earthsea.structured_content["author"] == "Ursula K. Le Guin"
    assert missing.is_error and missing.structured_content["error"]["code"] == "not_found"
    assert missing.structured_content["error"]["message"] == "No book has the id 999999."
    assert same.structured_content == earthsea.structured_content


@mode
async def test_unknown_tool_is_a_protocol_error(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("library_no_such_tool", {})
    assert caught.value.code == -32602
    assert caught.value.message == "Unknown tool: library_no_such_tool"


@mode
async def test_bad_arguments_are_an_invalid_input_result(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        result = await client.call_tool("library_search_books", {"limit": 500, "principal": "admin"})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "invalid_input"
    assert {d["path"] for d in error["details"]} == {"$.limit", "$.principal"}


@mode
async def test_tool_errors_come_back_as_results(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        missing = await client.call_tool("library_get_book", {"book_id": 9999})
    assert missing.is_error
    assert missing.structured_content == {"error": {"code": "not_found", "message": "Book not found."}}


@mode
async def test_a_tool_needing_a_missing_scope_is_hidden_and_refused(
    demo_server: LiveServer, read_only_key: str, mode: str
) -> None:
    async with connect(demo_server.mcp_url, read_only_key, mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "library_search_books" in names
        assert "library_borrow_book" not in names and "library_return_book" not in names
        # The reader lacks the Django permission for this one.
        assert "library_overdue_loans" not in names
        with pytest.raises(MCPError) as hidden:
            await client.call_tool("library_borrow_book", {"book_id": 1})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("library_borrow_bool", {"book_id": 1})
    assert hidden.value.code == unknown.value.code == -32602
    assert hidden.value.message == "Unknown tool: library_borrow_book"


@mode
async def test_writes_run_as_the_calling_user(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        borrowed = await client.call_tool("library_borrow_book", {"book_id": 6, "days": 7})
        loans = await client.call_tool("library_my_loans", {})
        returned = await client.call_tool("library_return_book", {"loan_id": borrowed.structured_content["loan_id"]})
    assert not borrowed.is_error and borrowed.structured_content["book"] == "Pippi Longstocking"
    assert borrowed.structured_content["loan_id"] in [loan["loan_id"] for loan in loans.structured_content["result"]]
    assert returned.structured_content["returned_at"]


@mode
async def test_without_credentials_the_client_is_refused(demo_server: LiveServer, mode: str) -> None:
    with pytest.raises(BaseException) as caught:  # the SDK raises an ExceptionGroup around its MCPError
        async with connect(demo_server.mcp_url, None, mode) as client:
            await client.list_tools()
    assert "401" in repr(caught.value) or "error response" in repr(caught.value).lower()


def test_http_401_carries_a_bearer_challenge(demo_server: LiveServer) -> None:
    response = httpx2.post(
        demo_server.mcp_url, content=jsonrpc_body("tools/list"), headers=modern_headers("tools/list")
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{demo_server.base_url}/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )
    assert response.json()["error"] == "unauthorized"
    bad = httpx2.post(
        demo_server.mcp_url, content=jsonrpc_body("tools/list"), headers=modern_headers("tools/list", "mcpx_x_y")
    )
    assert bad.status_code == 401 and 'error="invalid_token"' in bad.headers["www-authenticate"]


def test_trailing_slash_is_served_without_redirect(demo_server: LiveServer, admin_key: str) -> None:
    bodies = []
    for path in ("/mcp", "/mcp/"):
        response = httpx2.post(
            demo_server.base_url + path,
            content=jsonrpc_body("tools/list"),
            headers=modern_headers("tools/list", admin_key),
        )
        assert response.status_code == 200
        bodies.append(response.json())
    assert bodies[0] == bodies[1]
    result = bodies[0]["result"]
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private" and result["resultType"] == "complete"
    assert bodies[0]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "library-demo"


def test_foreign_origin_is_forbidden_and_listed_origin_allowed(demo_server: LiveServer, admin_key: str) -> None:
    headers = modern_headers("tools/list", admin_key)
    foreign = httpx2.post(
        demo_server.mcp_url, content=jsonrpc_body("tools/list"), headers={**headers, "Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403 and foreign.json()["error"] == "forbidden_origin"
    inspector = httpx2.post(
        demo_server.mcp_url, content=jsonrpc_body("tools/list"), headers={**headers, "Origin": "http://localhost:6274"}
    )
    assert inspector.status_code == 200


def test_oversized_body_gets_413(demo_server: LiveServer, admin_key: str) -> None:
    body = jsonrpc_body("tools/call", {"name": "library_echo", "arguments": {"message": "x" * (5 * 1024 * 1024)}})
    response = httpx2.post(
        demo_server.mcp_url, content=body, headers=modern_headers("tools/call", admin_key, "library_echo")
    )
    assert response.status_code == 413


def test_unknown_host_is_refused(demo_server: LiveServer, admin_key: str) -> None:
    response = httpx2.post(
        demo_server.mcp_url,
        content=jsonrpc_body("tools/list"),
        headers={**modern_headers("tools/list", admin_key), "Host": "evil.example.com"},
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_host"


def test_django_still_serves_everything_else(demo_server: LiveServer) -> None:
    home = httpx2.get(demo_server.base_url + "/")
    assert home.status_code == 200 and "/mcp" in home.text
    assert httpx2.get(demo_server.base_url + "/admin/login/").status_code == 200


@mode
async def test_view_backed_tools_page_through_a_cursor(demo_server: LiveServer, admin_key: str, mode: str) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        first = await client.call_tool("library_books_list", {"ordering": "title", "page_size": 5})
        second = await client.call_tool(
            "library_books_list",
            {"ordering": "title", "page_size": 5, "cursor": first.structured_content["next_cursor"]},
        )
        page = await client.call_tool("library_catalogue_page", {"q": "cosmos"})
        authors = await client.call_tool("library_authors_list", {"filters": {"born__lte": 1910}, "order_by": "name"})
    titles = [book["title"] for book in first.structured_content["results"] + second.structured_content["results"]]
    assert len(titles) == 8 and titles == sorted(titles)
    assert second.structured_content["next_cursor"] is None
    assert page.structured_content == {"result": "Books\nCosmos by Carl Sagan (Science)"}
    assert [a["name"] for a in authors.structured_content["results"]] == ["Astrid Lindgren", "Rachel Carson"]


def _initialize(server: LiveServer, key: str, version: str) -> dict[str, Any]:
    """A 2025-era `initialize` asking for `version`, as any HTTP client sends it; the server's result."""
    body = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {key}",
    }
    response = httpx2.post(server.mcp_url, content=jsonrpc_body("initialize", body, modern=False), headers=headers)
    assert response.status_code == 200, response.text
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = next(line[len("data:") :] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]


async def test_protocol_versions_are_those_the_server_negotiates(demo_server: LiveServer, admin_key: str) -> None:
    """`mcp_expose.PROTOCOL_VERSIONS`, newest first: what each era's handshake reaches is in it, the newest is what
    a client negotiating freely gets, and every revision in it is accepted when a client asks for exactly that one."""
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    import mcp_expose

    versions = mcp_expose.PROTOCOL_VERSIONS
    assert isinstance(versions, tuple) and len(set(versions)) == len(versions) >= 2
    assert list(versions) == sorted(versions, key=KNOWN_PROTOCOL_VERSIONS.index, reverse=True)
    negotiated = {}
    for mode in MODES:
        async with connect(demo_server.mcp_url, admin_key, mode) as client:
            negotiated[mode] = client.protocol_version
            assert [tool.name for tool in (await client.list_tools()).tools]
            if mode == "auto":
                discovered = client.session.discover_result
                assert discovered is not None and set(discovered.supported_versions) <= set(versions)
    assert negotiated == MODES
    assert versions[0] == negotiated["auto"]
    # The SDK client pins any per-request revision; its handshake asks for the newest handshake revision.
    for version in (v for v in versions if v in MODERN_PROTOCOL_VERSIONS):
        async with connect(demo_server.mcp_url, admin_key, version) as client:
            assert client.protocol_version == version
            echoed = await client.call_tool("library_echo", {"message": version})
            assert echoed.structured_content["message"] == version
    # Older handshake revisions, which that client never asks for, asked for by hand: each is agreed to as asked.
    for version in (v for v in versions if v not in MODERN_PROTOCOL_VERSIONS):
        assert _initialize(demo_server, admin_key, version)["protocolVersion"] == version
    assert _initialize(demo_server, admin_key, "2024-01-01")["protocolVersion"] in versions


@pytest.fixture(scope="module")
def member_key(demo_data: tuple[Path, str]) -> str:
    return create_api_key(demo_data[0], "reader", "library:read library:write")


@mode
async def test_each_caller_lists_the_schema_the_view_takes_from_them(
    demo_server: LiveServer, admin_key: str, member_key: str, mode: str
) -> None:
    """The loans API lends at the desk for staff only (a per-user serializer): twice each, in turn, so that a
    listing kept for one caller is never served to the other."""
    seen = []
    for key in (admin_key, member_key, admin_key, member_key):
        async with connect(demo_server.mcp_url, key, mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        seen.append("borrower" in tools["library_loans_create"].input_schema["properties"])
    assert seen == [True, False, True, False]


@mode
async def test_router_detail_tools_take_the_integer_id_a_list_returned(
    demo_server: LiveServer, admin_key: str, mode: str
) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        listed = await client.call_tool("library_books_list", {"search": "Cosmos"})
        book = listed.structured_content["results"][0]
        got = await client.call_tool("library_books_retrieve", {"pk": book["id"]})
        author = await client.call_tool("library_authors_retrieve", {"slug": "carl-sagan"})
    assert not got.is_error and got.structured_content["title"] == "Cosmos"
    assert not author.is_error and author.structured_content["name"] == "Carl Sagan"
