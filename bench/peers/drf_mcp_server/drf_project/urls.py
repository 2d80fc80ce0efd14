from django.urls import path
from drf_tools.mcp import server

# Quickstart: `path("mcp/", server.urls)`; async_urls for ASGI (README). Mounted at "mcp" so the endpoint is /mcp
# like every peer's (its own .well-known route then sits at /mcp.well-known/..., unused here).
urlpatterns = [path("mcp", server.async_urls)]
