"""The bench's tools (common/bench_peer_tools.py) on django-mcp-server's global server.

Registered with its "low level" FastMCP decorator (README: "Use low level mcp server annotation") as async
functions: the declarative MCPToolset path would put every call through sync_to_async and a toolset instance,
which these tools (no ORM) do not need.
"""

import bench_peer_tools
from mcp_server import mcp_server as mcp

bench_peer_tools.register(lambda name, function: mcp.tool(name=name)(function))
