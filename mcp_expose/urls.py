"""Include at the site root: `path("", include("mcp_expose.urls"))`.

Serves the authorization server metadata (RFC 8414) where MCP clients look for
it, and the connect page. Mount django-oauth-toolkit itself under /o/.
"""

from django.urls import path
from oauth2_provider.views import OAuthServerMetadataView

from mcp_expose import views

app_name = "mcp_expose"

urlpatterns = [
    path(".well-known/oauth-authorization-server", OAuthServerMetadataView.as_view(), name="oauth-server-metadata"),
    path(
        ".well-known/oauth-authorization-server/<path:issuer_path>",
        OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata-issuer",
    ),
    path(".well-known/mcp/server-card", views.server_card, name="server-card"),
    path("mcp/connect/", views.connect, name="connect"),
    path("mcp/approve/<uuid:confirmation_id>/", views.approve, name="approve"),
    path("mcp/usage/summary.json", views.usage_summary_json, name="usage-summary"),
]
