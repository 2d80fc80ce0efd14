"""An MCP App in a real browser: the official ext-apps host library (`AppBridge`, bundled by esbuild) shows the
demo's book card from its `ui://` page in a sandboxed iframe, hands it the tool's input and result, and forwards
the page's own tools/call to the live server, whose policy decides it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ..live import ROOT, LiveServer, modern_headers
from . import test_pages

pytestmark = [pytest.mark.live, pytest.mark.browser]

browser = test_pages.browser
tab = test_pages.tab
ESBUILD = ROOT / "var" / "node" / "node_modules" / ".bin" / "esbuild"
HOST_URL = "http://apps-host.test/"
APPS_CAPABILITIES = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}


@pytest.fixture(scope="module")
def host_script(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not ESBUILD.exists():
        pytest.fail(f"esbuild is missing at {ESBUILD}: run bash scripts/node-toolchain.")
    out = tmp_path_factory.mktemp("apps-host") / "host.js"
    subprocess.run(
        [
            str(ESBUILD),
            str(ROOT / "tests" / "clients" / "apps-host.mjs"),
            "--bundle",
            "--format=iife",
            "--platform=browser",
            f"--outfile={out}",
            "--log-level=warning",
        ],
        check=True,
        timeout=120,
    )
    return Path(out).read_text()


def rpc(server: LiveServer, key: str, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One 2026-07-28 request from a client that negotiated MCP Apps."""
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": APPS_CAPABILITIES,
        },
    }
    response = httpx2.post(
        server.mcp_url,
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        headers=modern_headers(method, key, name=name),
    )
    return response.json()


def show_in_host(tab: Any, server: LiveServer, key: str, host_script: str, tool: str, arguments: dict[str, Any]) -> Any:
    """What a host does: list the tools, read the tool's page, call it, and show the page with its input and result
    (the page's own calls are forwarded to the server, for tools visible to apps). Returns the page's frame, the
    result, and the names of the calls the page made."""
    tools = {tool["name"]: tool for tool in rpc(server, key, "tools/list", {})["result"]["tools"]}
    resource_uri = tools[tool]["_meta"]["ui"]["resourceUri"]
    app_tools = [
        name for name, item in tools.items() if "app" in item.get("_meta", {}).get("ui", {}).get("visibility", [])
    ]
    page = rpc(server, key, "resources/read", {"uri": resource_uri}, resource_uri)["result"]["contents"][0]
    assert page["mimeType"] == "text/html;profile=mcp-app"
    result = rpc(server, key, "tools/call", {"name": tool, "arguments": arguments}, tool)["result"]
    served: list[str] = []

    def host_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        served.append(name)
        answer = rpc(server, key, "tools/call", {"name": name, "arguments": args}, name)
        if "error" in answer:
            raise RuntimeError(answer["error"]["message"])
        return answer["result"]

    page_html = (
        f"<!doctype html><html><head><title>Host</title></head><body><script>{host_script}</script></body></html>"
    )
    tab.page.route(HOST_URL, lambda route: route.fulfill(status=200, content_type="text/html", body=page_html))
    tab.page.expose_function("hostCallTool", host_call)
    tab.page.goto(HOST_URL)
    tab.page.evaluate(
        "(args) => { window.hostFailed = null; startHost(args).catch((e) => (window.hostFailed = String(e))); }",
        {"html": page["text"], "toolInput": arguments, "toolResult": result, "appTools": app_tools},
    )
    tab.page.wait_for_function("() => window.hostReady || window.hostFailed")
    assert tab.page.evaluate("() => window.hostFailed") is None
    # The iframe is sandboxed without same-origin: the page cannot reach the host's DOM or cookies.
    assert tab.page.locator("#app").get_attribute("sandbox") == "allow-scripts"
    return tab.page.frame_locator("#app"), result, served


def test_the_book_card_in_a_host(tab: Any, server: LiveServer, key: str, host_script: str) -> None:
    app, result, served = show_in_host(tab, server, key, host_script, "library.get_book", {"book_id": 1})
    book = result["structuredContent"]
    card_title = app.locator("h1")
    card_title.wait_for()
    assert card_title.inner_text() == book["title"]
    assert app.locator(".author").inner_text() == f"by {book['author']}"
    assert app.locator("#shelf").inner_text() == f"{book['available']} of {book['copies']} copies on the shelf"
    assert app.locator("html").get_attribute("data-mcp-state") == "ready"

    # A copy goes out on loan; the page's own call (through the host, to the server) shows it.
    lent = rpc(
        server, key, "tools/call", {"name": "library.loans.create", "arguments": {"book": 1}}, "library.loans.create"
    )
    assert not lent["result"].get("isError"), lent
    app.locator("#refresh").click()
    fewer = f"{book['available'] - 1} of {book['copies']} copies on the shelf"
    app.locator("#shelf", has_text=fewer).wait_for()
    assert served == ["library.get_book"]
    assert card_title.inner_text() == book["title"]
    tab.shot("mcp-app-book-card")
    assert tab.console_errors == []


def test_the_loan_table_in_a_host(tab: Any, server: LiveServer, key: str, host_script: str) -> None:
    for book in (1, 2):
        made = rpc(
            server,
            key,
            "tools/call",
            {"name": "library.loans.create", "arguments": {"book": book}},
            "library.loans.create",
        )
        assert not made["result"].get("isError"), made
    app, result, _ = show_in_host(tab, server, key, host_script, "library.loans.mine", {})
    loans = result["structuredContent"]["result"]
    assert len(loans) >= 2
    app.locator("#caption", has_text="loan").wait_for()  # filled when the result arrived
    rows = app.locator("#loans tr")
    assert rows.count() == len(loans)
    assert rows.first.locator("td").first.inner_text() == str(loans[0]["id"])
    assert app.locator("#caption").inner_text() == (f"{len(loans)} loans" if len(loans) != 1 else "1 loan")
    tab.shot("mcp-app-loan-table")
    assert tab.console_errors == []
