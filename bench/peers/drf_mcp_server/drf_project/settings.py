"""Django 5.2 project serving djangorestframework-mcp-server 0.54.0 (the peer "drf-mcp-server").

Shared settings from common/bench_peer_settings.py. Served by its ASGI viewset (`server.async_urls`) with
AllowAnyBackend (the package's own no-auth backend; the default needs django-oauth-toolkit and a token).
REST_FRAMEWORK_MCP below: sessionless legacy mode (its documented stateless mode), one listing page of 200
(default 100, which would page the 200-tool listing), and tools without per-tool permissions allowed (otherwise
registration refuses them). Tools: drf_tools/mcp.py.
"""

import bench_peer_settings

globals().update(bench_peer_settings.django_settings())

INSTALLED_APPS = [*bench_peer_settings.CORE_APPS, "rest_framework", "drf_tools"]
ROOT_URLCONF = "drf_project.urls"
ASGI_APPLICATION = "drf_project.asgi.application"

REST_FRAMEWORK_MCP = {
    "SESSIONS_ENABLED": False,
    "PAGE_SIZE": 200,
    "REQUIRE_TOOL_PERMISSIONS": False,
}
