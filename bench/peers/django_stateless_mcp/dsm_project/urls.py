from django.urls import path
from django_stateless_mcp import mcp_view
from dsm_tools.mcp import server

# README: `path("mcp/", mcp_view(server))`; mounted without the slash so the endpoint is /mcp like every peer's
# (CommonMiddleware would otherwise redirect a POST to /mcp).
urlpatterns = [path("mcp", mcp_view(server))]
