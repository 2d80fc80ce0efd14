"""Peer: fastmcp 4.2.3 standalone, under uvicorn as `app:app`.

Env: BENCH_PEER_PROFILE (two | many | calls, see bench/peers/README.md; tools from common/bench_peer_tools.py);
     BENCH_FASTMCP_MODE = stateless-json (stateless_http=True, json_response=True)
                        | stateful-sse (fastmcp's default: sessions, SSE answers).
No auth provider (fastmcp's default), host/origin guard left at its default.
"""

from __future__ import annotations

import os

import bench_peer_tools
from fastmcp import FastMCP

MODE = os.environ.get("BENCH_FASTMCP_MODE", "stateless-json")
if MODE not in ("stateless-json", "stateful-sse"):
    raise SystemExit(f"BENCH_FASTMCP_MODE={MODE!r}: expected stateless-json or stateful-sse")

mcp = FastMCP("bench-fastmcp")
bench_peer_tools.register(lambda name, function: mcp.tool(function, name=name))

if MODE == "stateless-json":
    app = mcp.http_app(path="/mcp", stateless_http=True, json_response=True)
else:
    app = mcp.http_app(path="/mcp", stateless_http=False, json_response=False)
