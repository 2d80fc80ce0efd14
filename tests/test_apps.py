"""MCP Apps over HTTP, both eras, with the official SDK client: a host that negotiated the extension gets each
UI tool's `_meta.ui` and its `ui://` page; one that did not gets the same tools, unchanged, and no page.

Live: the demo in a uvicorn process of its own, with the toolbox's settings (tests.settings_live), which the
in-process live server cannot load beside the unit tests' settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from .apps_client import APP_MIME_TYPE, UI, AppsExtension, WrongMimeApps
from .live import LIVE_SETTINGS, LiveServer, create_api_key, run_server
from .mcp_client import connect

pytestmark = [pytest.mark.live, pytest.mark.anyio]

BOOK_PAGE = "ui://templates/library/apps/book_card.html"
LOANS_PAGE = "ui://templates/library/apps/loan_table.html"
PANEL_PAGE = "ui://templates/toolbox/panel.html"
SECRET_PAGE = "ui://templates/toolbox/secret_panel.html"
ERAS = ["auto", "legacy"]


@pytest.fixture(scope="module")
def live(data: Path) -> Iterator[LiveServer]:
    # Stateful 2025-11-25 sessions: the initialize handshake is where that era's client declares the extension.
    with run_server(data, **LIVE_SETTINGS, MCP_TEST_LEGACY_SESSIONS="1", MCP_TEST_BROKEN_APP="1") as server:
        yield server


@pytest.fixture(scope="module")
def admin(key: str) -> str:
    return key


@pytest.fixture(scope="module")
def reader(data: Path) -> str:
    """A key with the library's read scope only (no toolbox:secret)."""
    return create_api_key(data, "admin", "mcp library:read", **LIVE_SETTINGS)


def by_name(tools: Any) -> dict[str, Any]:
    return {tool.name: tool for tool in tools.tools}


@pytest.mark.parametrize("mode", ERAS)
async def test_a_host_with_apps_gets_the_ui_metadata_and_the_page(live: LiveServer, admin: str, mode: str) -> None:
    async with connect(live.mcp_url, admin, mode, extensions=[AppsExtension()]) as client:
        tools = by_name(await client.list_tools())
        assert tools["library.get_book"].meta == {"ui": {"resourceUri": BOOK_PAGE, "visibility": ["model", "app"]}}
        assert tools["library.loans.mine"].meta == {"ui": {"resourceUri": LOANS_PAGE, "visibility": ["model", "app"]}}
        assert tools["library.search_books"].meta is None  # a tool without a page carries nothing
        assert tools["toolbox.panel_refresh"].meta == {"ui": {"resourceUri": PANEL_PAGE, "visibility": ["app"]}}

        listed = {str(resource.uri): resource for resource in (await client.list_resources()).resources}
        assert listed[BOOK_PAGE].mime_type == APP_MIME_TYPE
        assert listed[PANEL_PAGE].meta == {
            "ui": {
                "csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]},
                "permissions": {"clipboardWrite": {}},
                "prefersBorder": True,
            }
        }

        page = (await client.read_resource(BOOK_PAGE)).contents[0]
        assert page.mime_type == APP_MIME_TYPE
        assert str(page.uri) == BOOK_PAGE
        assert page.text.startswith("<!doctype html>")
        assert "window.mcpApp" in page.text  # the bridge, inline
        assert ".card h1" in page.text and "<style>" in page.text  # the demo's CSS, inline: no CSP domain needed
        panel = (await client.read_resource(PANEL_PAGE)).contents[0]
        assert panel.meta == listed[PANEL_PAGE].meta
        # The template's context names the tools shown with it, and the server.
        assert "Shown for toolbox.panel_count, toolbox.panel_refresh on library-demo." in panel.text


async def test_the_extension_is_advertised_on_2026(live: LiveServer, admin: str) -> None:
    async with connect(live.mcp_url, admin, "auto") as client:
        assert UI in (client.server_capabilities.extensions or {})


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("extensions", [[], [WrongMimeApps()]], ids=["no-apps", "other-mime-type"])
async def test_a_client_without_apps_sees_an_unchanged_tool(
    live: LiveServer, admin: str, mode: str, extensions: list[Any]
) -> None:
    async with (
        connect(live.mcp_url, admin, mode, extensions=[AppsExtension()]) as host,
        connect(live.mcp_url, admin, mode, extensions=extensions) as plain,
    ):
        with_ui = by_name(await host.list_tools())
        without = by_name(await plain.list_tools())
        book = without["library.get_book"]
        assert book.meta is None
        assert book.model_dump(exclude={"meta"}) == with_ui["library.get_book"].model_dump(exclude={"meta"})
        # A tool only an app may call has no use here: it is neither listed nor callable.
        assert "toolbox.panel_refresh" not in without
        assert set(with_ui) - set(without) == {"toolbox.panel_refresh"}
        with pytest.raises(MCPError) as refused:
            await plain.call_tool("toolbox.panel_refresh", {"count": 1})
        assert refused.value.error.code == -32602
        # The same call gives the same text and structured result either way.
        direct = await plain.call_tool("library.get_book", {"book_id": 1})
        shown = await host.call_tool("library.get_book", {"book_id": 1})
        assert not direct.is_error
        assert direct.structured_content == shown.structured_content
        assert direct.structured_content["title"]
        assert [block.model_dump() for block in direct.content] == [block.model_dump() for block in shown.content]
        assert not any(str(r.uri).startswith("ui://") for r in (await plain.list_resources()).resources)
        with pytest.raises(MCPError) as unread:
            await plain.read_resource(BOOK_PAGE)  # nor read: it has no use for one
        assert unread.value.error.code == -32602


@pytest.mark.parametrize("mode", ERAS)
async def test_calls_from_an_app_go_through_our_policy(live: LiveServer, admin: str, reader: str, mode: str) -> None:
    async with connect(live.mcp_url, admin, mode, extensions=[AppsExtension()]) as host:
        # What the page calls through the host: a tool visible to apps, answered as any call.
        refreshed = await host.call_tool("toolbox.panel_refresh", {"count": 4})
        assert refreshed.structured_content == {"count": 5}
        # Arguments are still checked against the tool's schema.
        bad = await host.call_tool("toolbox.panel_refresh", {"count": "many"})
        assert bad.is_error
    async with connect(live.mcp_url, reader, mode, extensions=[AppsExtension()]) as host:
        tools = by_name(await host.list_tools())
        assert "toolbox.secret_panel" not in tools  # needs toolbox:secret, which this key lacks
        assert "library.get_book" in tools
        listed = {str(resource.uri) for resource in (await host.list_resources()).resources}
        assert BOOK_PAGE in listed and SECRET_PAGE not in listed
        with pytest.raises(MCPError) as hidden:
            await host.read_resource(SECRET_PAGE)
        assert hidden.value.error.code == -32602  # a page of tools the caller may not use reads as unknown
        with pytest.raises(MCPError) as refused:
            await host.call_tool("toolbox.secret_panel", {})
        assert refused.value.error.code == -32602  # as an unknown tool: the key may not use it


async def test_a_broken_template_is_a_clear_error_not_a_traceback(live: LiveServer, admin: str) -> None:
    async with connect(live.mcp_url, admin, "auto", extensions=[AppsExtension()]) as host:
        with pytest.raises(MCPError) as failed:
            await host.read_resource("ui://templates/toolbox/broken.html")
        assert failed.value.error.code == -32603
        assert "has an error" in failed.value.error.message
        assert "Traceback" not in failed.value.error.message
        with pytest.raises(MCPError) as unknown:
            await host.read_resource("ui://templates/../settings.py")
        assert unknown.value.error.code == -32602
