"""Django 5.2 project serving django-mcp-server 0.5.7 (the peer "django-mcp-server") on mcp 1.30.0.

Shared settings from common/bench_peer_settings.py. Stateless per its README (DJANGO_MCP_GLOBAL_SERVER_CONFIG
"stateless": True), no DJANGO_MCP_AUTHENTICATION_CLASSES (so no auth), and the package's extra
get_server_instructions tool off so the listing holds only the bench's tools.
Tools: dms_tools/mcp.py, found by the package's mcp.py autodiscovery.
"""

import bench_peer_settings

globals().update(bench_peer_settings.django_settings())

INSTALLED_APPS = [*bench_peer_settings.CORE_APPS, "rest_framework", "mcp_server", "dms_tools"]
ROOT_URLCONF = "dms_project.urls"
ASGI_APPLICATION = "dms_project.asgi.application"

DJANGO_MCP_GET_SERVER_INSTRUCTIONS_TOOL = False
DJANGO_MCP_GLOBAL_SERVER_CONFIG = {"name": "bench-django-mcp-server", "stateless": True}
