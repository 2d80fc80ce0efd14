"""Warn about django-oauth-toolkit settings that are unsafe or break MCP clients."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core import checks

from mcp_expose.core.wording import first_few

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


@checks.register(checks.Tags.security)
def check_tool_scopes_are_grantable(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A scope a declared tool needs that django-oauth-toolkit does not know can never be granted to an OAuth
    client: its authorization and step-up requests are refused with `invalid_scope`, and nothing else says why."""
    if not apps.is_installed("oauth2_provider"):
        return []
    from oauth2_provider.scopes import get_scopes_backend

    from mcp_expose.access.scopes import expand_scopes
    from mcp_expose.declare.registry import registry

    # What a token can hold: every scope DOT grants, and every scope those imply (SCOPE_HIERARCHY).
    grantable = expand_scopes(get_scopes_backend().get_all_scopes())
    needed: dict[str, list[str]] = {}
    for capability in registry:
        for scope in capability.scopes - grantable:
            needed.setdefault(scope, []).append(capability.name)
    return [
        checks.Warning(
            f"The scope {scope!r}, which {first_few(names)} need{'s' if len(names) == 1 else ''}, is not in "
            "OAUTH2_PROVIDER['SCOPES']: no OAuth client can be granted it, and asking for it (a step-up "
            "included) is refused with invalid_scope.",
            hint=f"Add {scope!r} to OAUTH2_PROVIDER['SCOPES'] with the description users see on the consent page "
            "(or, in MCP_EXPOSE['SCOPE_HIERARCHY'], make a scope it knows imply it).",
            id="mcp_expose.W016",
        )
        for scope, names in sorted(needed.items())
    ]
