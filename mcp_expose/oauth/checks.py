"""Warn about django-oauth-toolkit settings that are unsafe or break MCP clients."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core import checks

# (setting, the value that is safe, why it matters)
REQUIRED_VALUES = [
    ("PKCE_REQUIRED", True, "public clients (every MCP client) must use PKCE"),
    ("COMPLIANT_BCP_RFC9700_PKCE_METHOD", True, "the 'plain' PKCE method is accepted; allow S256 only"),
    ("COMPLIANT_BCP_RFC9700_TOKEN_STORAGE", True, "access and refresh tokens are stored in clear"),
    ("ROTATE_REFRESH_TOKEN", True, "refresh tokens of public clients must rotate"),
    ("REFRESH_TOKEN_REUSE_PROTECTION", True, "a replayed refresh token does not revoke its family"),
    ("COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS", True, "authorization responses carry no 'iss' (RFC 9207)"),
    ("COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT", True, "access tokens are accepted in query strings"),
]
UNSAFE_GRANTS = {"implicit", "password", "urn:ietf:params:oauth:grant-type:device_code"}


@checks.register(checks.Tags.security)
def check_oauth_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not apps.is_installed("oauth2_provider"):
        return []
    from oauth2_provider.settings import oauth2_settings

    hint = "Start from mcp_expose.oauth.settings.oauth2_provider_settings(), which sets all of these."
    messages: list[checks.CheckMessage] = []
    for setting, safe, why in REQUIRED_VALUES:
        if getattr(oauth2_settings, setting) != safe:
            messages.append(
                checks.Warning(f"OAUTH2_PROVIDER['{setting}'] is not {safe}: {why}.", hint=hint, id="mcp_expose.W010")
            )
    if "__all__" in oauth2_settings.DEFAULT_SCOPES:
        messages.append(
            checks.Warning(
                "OAUTH2_PROVIDER['DEFAULT_SCOPES'] grants every scope to a client that asks for none.",
                hint="Set DEFAULT_SCOPES to the base scope only, e.g. ['mcp'].",
                id="mcp_expose.W011",
            )
        )
    unsafe = sorted(UNSAFE_GRANTS & set(oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED))
    if unsafe:
        messages.append(
            checks.Warning(
                f"OAUTH2_PROVIDER['OAUTH2_GRANT_TYPES_SUPPORTED'] advertises {', '.join(unsafe)}.",
                hint="Advertise authorization_code, refresh_token and client_credentials only: clients that "
                "register dynamically copy every advertised grant and DOT then refuses the registration.",
                id="mcp_expose.W012",
            )
        )
    if "none" not in oauth2_settings.OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED:
        messages.append(
            checks.Warning(
                "OAUTH2_PROVIDER['OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED'] lacks 'none'.",
                hint="Public clients (Claude, VS Code, the Inspector) use Client ID Metadata Documents only when "
                "'none' is advertised.",
                id="mcp_expose.W013",
            )
        )
    names = [config.name for config in apps.get_app_configs()]
    if names.index("oauth2_provider") < names.index("mcp_expose"):
        messages.append(
            checks.Warning(
                "'oauth2_provider' comes before 'mcp_expose' in INSTALLED_APPS, so users see django-oauth-toolkit's "
                "plain consent page: no redirect host, no unverified-client warning, no list of tools.",
                hint="Move 'mcp_expose' above 'oauth2_provider' in INSTALLED_APPS.",
                id="mcp_expose.W014",
            )
        )
    return messages
