"""The bench's tools (common/bench_peer_tools.py) as djangorestframework-mcp-server selector tools.

Each tool is an async drf-services selector (reads: no transaction, no input serializer) whose parameters are
reflected into the inputSchema, registered with the package's `@server.selector_tool` decorator (kind RETRIEVE,
no output serializer: the selector's dict is the structured result).
"""

import warnings

import bench_peer_tools
from django_service_specs import SelectorKind
from rest_framework_mcp import MCPServer
from rest_framework_mcp.auth.backends.allow_any_backend import AllowAnyBackend
from rest_framework_mcp.server.utils import UnguardedToolWarning

# Peers run without auth: the package's own allow-anyone backend, and no per-tool permissions (each registration
# would otherwise warn that the tool is unguarded, which is the point here).
warnings.filterwarnings("ignore", category=UnguardedToolWarning)
server = MCPServer(name="bench-drf-mcp-server", version="1.0.0", auth_backend=AllowAnyBackend())
bench_peer_tools.register(
    lambda name, function: server.selector_tool(name=name, kind=SelectorKind.RETRIEVE, description=function.__doc__)(
        function
    )
)
