"""Django's session cookie at the MCP endpoint, for this site's own pages, where `SESSION_AUTH` allows it.

A browser sends a site's cookies with requests other sites make it send, so a cookie proves who the user is but
not that they meant the request. It is accepted only on a request no other site could have made:

- it carries no Authorization header (an explicit credential is the other authenticators' business);
- its Origin header is present, and this endpoint's own origin (the scheme, host and port of its resource URI)
  or one listed in ALLOWED_ORIGINS;
- the browser does not mark it `Sec-Fetch-Site: cross-site`.

Anything else with a session cookie is refused (401) with a description saying so. A cookie that names no
logged-in, active user is ignored, as though none were sent. Nothing is cached: the session is read each time,
so logging out (or changing the password) ends it at once. DRF's SessionAuthentication is not used: its CSRF
check is made for forms, and the Origin rules above replace it.
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import Any, ClassVar
from urllib.parse import urlsplit

from mcp_expose.access.authenticators import Answer, Authenticator, CredentialRequest, Hop
from mcp_expose.access.failures import COOKIE_NOT_SAME_ORIGIN
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.core.conf import get_settings
from mcp_expose.core.principal import principal_for_user
from mcp_expose.core.requests import origin_allowed

logger = logging.getLogger("mcp_expose.auth")


class SessionAuthenticator(Authenticator):
    name = "session"
    session_cookie: ClassVar[bool] = True

    def authenticate(self, request: CredentialRequest) -> Answer:
        session_key = self._session_key(request)
        if session_key is None:
            return None
        refusal = cross_site_refusal(request)
        if refusal is not None:
            logger.info("Refused a session cookie: %s", refusal)
            return COOKIE_NOT_SAME_ORIGIN
        user = _session_user(session_key)
        if user is None:
            return None
        return principal_for_user(
            user, expand_scopes(get_settings().SESSION_SCOPES), "session", authenticator="session"
        )

    def authenticate_known(self, request: CredentialRequest) -> Answer | Hop:
        if self._session_key(request) is None:
            return None
        return super().authenticate_known(request)

    @staticmethod
    def _session_key(request: CredentialRequest) -> str | None:
        from django.conf import settings

        if request.authorization is not None:
            return None
        return _cookies(request.headers.get("cookie", "")).get(settings.SESSION_COOKIE_NAME) or None


def cross_site_refusal(request: CredentialRequest) -> str | None:
    """Why the request may have been made by another site (for the log), or None when it cannot have been."""
    if request.headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
        return "Sec-Fetch-Site says cross-site"
    origin = request.headers.get("origin")
    if not origin:
        return "no Origin header"
    if request.resource is None:
        return "no resource to compare the Origin with"
    resource = urlsplit(request.resource)
    own = f"{resource.scheme}://{resource.netloc}".lower()
    if not origin_allowed(origin.strip().lower(), own, [entry.lower() for entry in get_settings().ALLOWED_ORIGINS]):
        return "a foreign Origin"
    return None


def _cookies(header: str) -> dict[str, str]:
    from django.http.cookie import parse_cookie

    return parse_cookie(header) if header else {}


def _session_user(session_key: str) -> Any:
    """The session's logged-in, active user, as AuthenticationMiddleware would find it; None when there is none."""
    from django.conf import settings
    from django.contrib.auth import get_user
    from django.http import HttpRequest

    http_request = HttpRequest()
    http_request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(http_request)
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return None
    return user
