"""django-oauth-toolkit's URLs, with its OpenID Connect views only where OpenID Connect is on.

Mount it instead of `oauth2_provider.urls`:
`path("o/", include("mcp_expose.oauth.urls", namespace="oauth2_provider"))`.

DOT mounts its OIDC views whatever the settings say. Switched off, each of them
raises `ImproperlyConfigured` under DEBUG (a 500) and otherwise answers 404 with a
warning in the log for every request; not mounted, they are a plain 404.
"""

from __future__ import annotations

from django.urls import URLPattern
from oauth2_provider import urls as dot_urls
from oauth2_provider.settings import oauth2_settings

app_name = "oauth2_provider"

# The OIDC views that need more than OIDC_ENABLED, by URL name.
OIDC_SWITCHES = {"rp-initiated-logout": "OIDC_RP_INITIATED_LOGOUT_ENABLED"}


def oauth_urlpatterns() -> list[URLPattern]:
    """DOT's URL patterns, each OIDC one only when the settings turn its view on (read now)."""
    oidc = [pattern for pattern in dot_urls.oidc_urlpatterns if _switched_on(pattern)]
    return [
        *dot_urls.metadata_urlpatterns,
        *dot_urls.base_urlpatterns,
        *dot_urls.management_urlpatterns,
        *oidc,
        *dot_urls.dcr_urlpatterns,
    ]


def _switched_on(pattern: URLPattern) -> bool:
    switch = OIDC_SWITCHES.get(pattern.name or "")
    return bool(oauth2_settings.OIDC_ENABLED and (switch is None or getattr(oauth2_settings, switch)))


urlpatterns = oauth_urlpatterns()
