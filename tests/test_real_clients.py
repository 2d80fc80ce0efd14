"""The demo spoken to by real MCP clients from the Node ecosystem, with the admin's API key as a Bearer token.

The TypeScript SDK v1 (2025-11-25 handshake), the SDK v2 (negotiating `auto`, pinned to 2026-07-28, and in its default
`legacy` mode) and the MCP Inspector CLI in both eras each list the tools and call `library_echo`; the checks read
what the client got back and which protocol revision it negotiated, and the Inspector's strict schema lint finds every
tool's schema portable. The toolchain (Node 22 and the pinned packages of tests/clients/package-lock.json) is installed
by `bash scripts/node-toolchain` into var/node/.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .live import ROOT, LiveServer

pytestmark = [pytest.mark.live]

CLIENTS = ROOT / "tests" / "clients"
NODE_DIR = ROOT / "var" / "node"
NODE = NODE_DIR / "node_modules" / "node" / "bin" / "node"
INSPECTOR = (
    NODE_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
)
TIMEOUT = 90
MODERN, LEGACY = "2026-07-28", "2025-11-25"
# Non-ASCII on purpose: the text crosses the command line, both SDKs' JSON and our server.
MESSAGE = "héllo from {client} ✓"


@pytest.fixture(scope="module")
def node() -> Path:
    """Node 22 from var/node/, as scripts/node-toolchain installed it from the committed lock: else fail, never skip."""
    fix = "Run `bash scripts/node-toolchain` to install the Node toolchain into var/node/."
    if not os.access(NODE, os.X_OK) or not INSPECTOR.is_file() or not (CLIENTS / "node_modules").is_dir():
        pytest.fail(f"The Node toolchain is missing ({NODE} or {CLIENTS / 'node_modules'}). {fix}")
    lock = hashlib.sha256((CLIENTS / "package.json").read_bytes() + (CLIENTS / "package-lock.json").read_bytes())
    installed = NODE_DIR / ".installed"
    if not installed.is_file() or installed.read_text().strip() != lock.hexdigest():
        pytest.fail(f"var/node/ does not match tests/clients/package-lock.json. {fix}")
    return NODE


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A scratch HOME: the Inspector writes ~/.mcp-inspector."""
    return tmp_path


def run_node(
    node: Path, home: Path, *args: str, server: LiveServer, expect_success: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run node with these arguments, failing with its output and the server's log when it does not do as expected."""
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1", "FORCE_COLOR": "0"}
    result = subprocess.run(
        [str(node), *args], cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=TIMEOUT
    )
    if (result.returncode == 0) != expect_success:
        raise AssertionError(
            f"node {' '.join(args)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\nserver log (tail):\n{server.log()[-4000:]}"
        )
    return result


def one_json(text: str) -> dict[str, Any]:
    """The single JSON object a client printed."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one JSON object, got:\n{text}"
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value


def run_client(node: Path, home: Path, server: LiveServer, program: str, token: str, *options: str) -> dict[str, Any]:
    """Run one of the programs in tests/clients against the server and return what it printed."""
    args = [str(CLIENTS / program), "--url", server.mcp_url, "--token", token, *options]
    return one_json(run_node(node, home, *args, server=server).stdout)


def inspector(server: LiveServer, token: str, era: str, method: str, *options: str) -> list[str]:
    """The Inspector CLI's arguments for one method, non-interactive, with the URL before `--header`."""
    return [
        str(INSPECTOR), "--cli", server.mcp_url, "--transport", "http", "--protocol-era", era,
        "--method", method, *options, "--header", f"Authorization: Bearer {token}",
        "--format", "json", "--stored-auth-only",
    ]  # fmt: skip


def assert_tools(names: list[str]) -> None:
    assert len(names) == len(set(names)), names
    assert {"library_echo", "library_search_books", "library_get_book", "library_whoami"} <= set(names), names


def assert_statuses(wire: list[dict[str, Any]]) -> None:
    """Every POST succeeded; a GET (the standalone SSE stream) or DELETE (session end) may only be declined with 405."""
    for entry in wire:
        allowed = {200, 202} if entry["http"] == "POST" else {200, 202, 204, 405}
        assert entry["status"] in allowed, wire


def assert_echoed(result: dict[str, Any], message: str) -> None:
    """The echo tool's result: structured content, its JSON text twin, and the caller behind the token."""
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"message": message, "caller": "admin"}, result
    assert [block["type"] for block in result["content"]] == ["text"], result
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_sdk_v1(node: Path, home: Path, demo_server: LiveServer, admin_key: str) -> None:
    """@modelcontextprotocol/sdk 1.32: the 2025-11-25 initialize handshake, then tools/list and tools/call."""
    message = MESSAGE.format(client="sdk-v1")
    out = run_client(node, home, demo_server, "sdk-v1.mjs", admin_key, "--message", message)
    assert out["protocolVersion"] == LEGACY
    assert out["server"]["name"] == "library-demo"
    assert_tools(out["tools"])
    assert_echoed(out["result"], message)
    posts = [entry for entry in out["wire"] if entry["http"] == "POST"]
    assert [entry["rpc"] for entry in posts] == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    assert all(entry["authorization"] for entry in out["wire"])
    assert all(entry["protocolVersion"] == LEGACY for entry in posts[1:])
    assert_statuses(out["wire"])


@pytest.mark.parametrize(
    ("negotiation", "version"),
    [("auto", MODERN), (MODERN, MODERN), ("legacy", LEGACY)],
    ids=["auto", "pinned-2026-07-28", "legacy-default"],
)
def test_sdk_v2(
    node: Path, home: Path, demo_server: LiveServer, admin_key: str, negotiation: str, version: str
) -> None:
    """@modelcontextprotocol/client 2.4: `auto` and the pin reach 2026-07-28 through server/discover; the SDK's
    default (`legacy`) mode keeps to the 2025-11-25 handshake."""
    message = MESSAGE.format(client=f"sdk-v2 {negotiation}")
    out = run_client(
        node, home, demo_server, "sdk-v2.mjs", admin_key, "--negotiation", negotiation, "--message", message
    )
    assert out["protocolVersion"] == version
    assert out["era"] == ("modern" if version == MODERN else "legacy")
    assert out["server"]["name"] == "library-demo"
    assert_tools(out["tools"])
    assert_echoed(out["result"], message)
    wire = out["wire"]
    assert all(entry["authorization"] for entry in wire)
    assert_statuses(wire)
    rpcs = [entry["rpc"] for entry in wire if entry["http"] == "POST"]
    if version == MODERN:
        # Straight to the modern wire: no initialize, and every request names its method and revision in headers.
        assert rpcs == ["server/discover", "tools/list", "tools/call"], wire
        assert all(entry["protocolVersion"] == MODERN and entry["mcpMethod"] == entry["rpc"] for entry in wire), wire
        assert out["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "library-demo"
    else:
        assert rpcs == ["initialize", "notifications/initialized", "tools/list", "tools/call"], wire
        assert not any(entry["mcpMethod"] for entry in wire), wire


@pytest.mark.parametrize(("era", "version"), [("modern", MODERN), ("legacy", LEGACY)])
def test_inspector_cli(node: Path, home: Path, demo_server: LiveServer, admin_key: str, era: str, version: str) -> None:
    """@modelcontextprotocol/inspector 2.12.0 --cli: the revision it connected with, tools/list and tools/call."""

    def call(method: str, *options: str) -> dict[str, Any]:
        args = inspector(demo_server, admin_key, era, method, *options)
        return one_json(run_node(node, home, *args, server=demo_server).stdout)["result"]

    connected = call("initialize")
    assert connected["protocolVersion"] == version
    assert connected["serverInfo"]["name"] == "library-demo"
    assert "tools" in connected["capabilities"]

    tools = call("tools/list")["tools"]
    assert_tools([tool["name"] for tool in tools])
    echo = next(tool for tool in tools if tool["name"] == "library_echo")
    assert echo["inputSchema"]["required"] == ["message"]
    assert echo["annotations"]["readOnlyHint"] is True

    message = MESSAGE.format(client=f"inspector {era}")
    result = call("tools/call", "--tool-name", "library_echo", "--tool-args-json", json.dumps({"message": message}))
    assert_echoed(result, message)
    if era == "modern":
        # A 2026-07-28 result names the server in its _meta: the call really went over the modern wire.
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "library-demo"


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_inspector_finds_every_tool_schema_portable(
    node: Path, home: Path, demo_server: LiveServer, admin_key: str, era: str
) -> None:
    """The Inspector's `--strict` schema lint (type arrays, remote references, schemas that constrain nothing)
    reports nothing for any of the demo's tools: functions, DRF views and model tools alike."""
    args = inspector(demo_server, admin_key, era, "tools/list", "--strict")
    result = run_node(node, home, *args, server=demo_server)
    envelope = one_json(result.stdout)
    tools = {tool["name"]: tool for tool in envelope["result"]["tools"]}
    assert {"library_books_create", "library_loans_create", "library_authors_create"} <= set(tools), sorted(tools)
    assert envelope.get("schemaFindings") is None, json.dumps(envelope["schemaFindings"], indent=1)
    assert "Warning:" not in result.stderr and "Schema portability" not in result.stderr, result.stderr
    # What the lint asked for: a primary key or a nullable field as single-type branches, still both kinds.
    author = tools["library_books_create"]["inputSchema"]["properties"]["author"]
    assert [branch["type"] for branch in author["anyOf"]] == ["integer", "string"], author


@pytest.mark.parametrize("client", ["sdk-v1", "sdk-v2", "inspector"])
def test_wrong_token_is_refused(node: Path, home: Path, demo_server: LiveServer, client: str) -> None:
    """The credential is really what gets the clients in: a wrong one is refused with 401 before any tool runs."""
    token = "mcpx_00000000_not-a-real-key"
    if client == "inspector":
        args = inspector(demo_server, token, "modern", "tools/list")
        result = run_node(node, home, *args, server=demo_server, expect_success=False)
        assert result.stdout.strip() == ""
        error = one_json(result.stderr)["error"]
        assert error["code"] == "auth_required", error
        assert "HTTP 401" in error["message"], error
        return
    program = f"{client}.mjs"
    options = ["--negotiation", MODERN] if client == "sdk-v2" else []
    args = [str(CLIENTS / program), "--url", demo_server.mcp_url, "--token", token, *options]
    error = one_json(run_node(node, home, *args, server=demo_server, expect_success=False).stdout)["error"]
    if client == "sdk-v1":
        assert error["code"] == 401 and "invalid_token" in error["message"], error
    else:
        assert error["name"] == "UnauthorizedError", error
