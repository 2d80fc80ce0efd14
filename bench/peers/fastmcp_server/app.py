"""Peer: fastmcp 4.2.3 standalone, under uvicorn as `app:app`.

Env: BENCH_PEER_PROFILE (two | many | calls, see bench/peers/README.md; tools from common/bench_peer_tools.py);
     BENCH_FASTMCP_MODE = stateless-json (stateless_http=True, json_response=True)
                        | stateful-sse (fastmcp's default: sessions, SSE answers)
                        | proxy (fastmcp's own proxy, `create_proxy`, to the MCP server at BENCH_PEER_UPSTREAM,
                          served stateless JSON: the tools are the upstream's, under its names).
No auth provider (fastmcp's default), host/origin guard left at its default.
"""

from __future__ import annotations

import os

import bench_peer_tools
from fastmcp import FastMCP
from fastmcp.server import create_proxy

MODE = os.environ.get("BENCH_FASTMCP_MODE", "stateless-json")
if MODE not in ("stateless-json", "stateful-sse", "proxy"):
    raise SystemExit(f"BENCH_FASTMCP_MODE={MODE!r}: expected stateless-json, stateful-sse or proxy")

if MODE == "proxy":
    mcp = create_proxy(os.environ["BENCH_PEER_UPSTREAM"], name="bench-fastmcp-proxy")
else:
    mcp = FastMCP("bench-fastmcp")
    bench_peer_tools.register(lambda name, function: mcp.tool(function, name=name))

if MODE in ("stateless-json", "proxy"):
    app = mcp.http_app(path="/mcp", stateless_http=True, json_response=True)
else:
    app = mcp.http_app(path="/mcp", stateless_http=False, json_response=False)
