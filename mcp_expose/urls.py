"""Include at the site root: `path("", include("mcp_expose.urls"))`.

Serves the authorization server metadata (RFC 8414) where MCP clients look for
it, the server card (at each endpoint's `/server-card` and at its well-known path), and the connect page. Mount
django-oauth-toolkit itself under /o/.
"""

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, path
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


def _endpoint_cards() -> list[URLPattern]:
    """`<endpoint path>/server-card` for each endpoint, where SEP-2127 recommends a card (a broken ENDPOINTS setting
    is the system checks' to report, E020: no card routes then)."""
    from mcp_expose.core.endpoints import endpoints
    from mcp_expose.operator.server_card import CARD_SUFFIX

    try:
        configured = endpoints()
    except ImproperlyConfigured:
        return []
    return [path(endpoint.path.lstrip("/") + CARD_SUFFIX, views.server_card) for endpoint in configured]


urlpatterns += _endpoint_cards()
