"""A bare official-SDK MCP server: the upstream an organisation already runs. `uvicorn tests.upstreams.bare_server:app`

UPSTREAM_DESCRIPTION_FILE names a file whose text is the `notes` tool's description, read at each listing, so a
test can change a definition between two discoveries; while the file UPSTREAM_HIDE_FILE exists, `add` is not
listed. UPSTREAM_STATELESS=0 serves 2025-11-25 with sessions. `POST /rewrite-notes` writes its body to the
description file and announces the change to `subscriptions/listen` streams, as an upstream that changed would.
`GET /seen` says how the request reached it: its Host header, its scheme, and the address it arrived at.
UPSTREAM_TRACE_TOOL=1 adds `traced`, which says back the trace context its call carried.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import ToolsListChanged
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse

bus = InMemorySubscriptionBus()
server = MCPServer("bare-upstream", log_level="WARNING", subscriptions=bus)


@server.tool()
async def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def notes(topic: str) -> str:
    """Notes on a topic."""
    return f"Notes on {topic}."


if os.environ.get("UPSTREAM_CANCEL_DIR"):
    # Two more tools, for progress and cancellation: only where a test asks (the listings above stay as they are).
    import anyio
    from mcp.server.mcpserver import Context

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress at each step."""
        for step in range(steps):
            await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        return "done"

    @server.tool()
    async def wait(marker: str) -> str:
        """Wait until cancelled: `marker`.started says it runs, and the cancellation leaves `marker` behind."""
        Path(os.environ["UPSTREAM_CANCEL_DIR"], marker + ".started").write_text("running")
        try:
            await anyio.sleep_forever()
        finally:
            Path(os.environ["UPSTREAM_CANCEL_DIR"], marker).write_text("cancelled")
        return "never"


if os.environ.get("UPSTREAM_TRACE_TOOL"):
    # The trace context a call carried, said back: a gateway's test sees its hop continue the caller's trace.
    from mcp.server.mcpserver import Context as TraceContext

    @server.tool()
    async def traced(ctx: TraceContext) -> str:
        """The `traceparent` this call's `_meta` carried (empty when none)."""
        meta = ctx.request_context.meta or {}
        return str(meta.get("traceparent") or "")


def _described(tools: list[Any]) -> list[Any]:
    path = os.environ.get("UPSTREAM_DESCRIPTION_FILE")
    if path and Path(path).exists():
        for tool in tools:
            if tool.name == "notes":
                tool.description = Path(path).read_text()
    if os.environ.get("UPSTREAM_HIDE_FILE") and Path(os.environ["UPSTREAM_HIDE_FILE"]).exists():
        tools = [tool for tool in tools if tool.name != "add"]
    return tools


_list_tools = server.list_tools


async def list_tools() -> list[Any]:
    return _described(await _list_tools())


server.list_tools = list_tools  # type: ignore[method-assign]

_mcp = server.streamable_http_app(stateless_http=os.environ.get("UPSTREAM_STATELESS", "1") == "1")


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/":
        await PlainTextResponse("bare upstream")(scope, receive, send)
        return
    if scope["type"] == "http" and scope["path"] == "/seen":
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        seen = {"host": host, "scheme": scope["scheme"], "server": list(scope["server"])}
        await JSONResponse(seen)(scope, receive, send)
        return
    if scope["type"] == "http" and scope["path"] == "/rewrite-notes":
        Path(os.environ["UPSTREAM_DESCRIPTION_FILE"]).write_bytes(await Request(scope, receive).body())
        await bus.publish(ToolsListChanged())
        await PlainTextResponse("announced")(scope, receive, send)
        return
    await _mcp(scope, receive, send)
