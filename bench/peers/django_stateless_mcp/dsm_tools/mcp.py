"""The bench's tools (common/bench_peer_tools.py) on the mcp SDK's MCPServer, as django-stateless-mcp's README
registers them."""

import bench_peer_tools
from django_stateless_mcp import request_state_security
from mcp.server.mcpserver import MCPServer

# log_level: the SDK's default INFO logs two lines per request (a session manager per request); warnings only,
# like uvicorn's --log-level warning.
server = MCPServer(
    name="bench-django-stateless-mcp",
    version="1.0.0",
    request_state_security=request_state_security(),
    log_level="WARNING",
)
bench_peer_tools.register(lambda name, function: server.tool(name=name)(function))
