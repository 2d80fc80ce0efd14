"""A django-oauth-toolkit configuration that MCP clients can use and that is safe by default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def oauth2_provider_settings(
    *, scopes: Mapping[str, str], default_scopes: list[str], **overrides: Any
) -> dict[str, Any]:
    """`OAUTH2_PROVIDER` for an MCP authorization server.

    `scopes` maps each scope to the text users see on the consent page;
    `default_scopes` is what a client that asks for nothing gets (the base scope,
    never everything). Anything else can be overridden by keyword.
    """
    settings: dict[str, Any] = {
        "SCOPES": dict(scopes),
        "DEFAULT_SCOPES": list(default_scopes),
        "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
        # PKCE with S256 only.
        "PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        # No implicit or password grants, no tokens in URLs, hashed tokens at rest, iss in responses (RFC 9207).
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
        "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
        # Refresh tokens rotate; a replayed one revokes its whole family.
        "ROTATE_REFRESH_TOKEN": True,
        "REFRESH_TOKEN_REUSE_PROTECTION": True,
        # What clients actually send. Dynamic registration copies every advertised grant, and DOT
        # accepts one per client, so nothing else is advertised.
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
        # "none" makes clients use Client ID Metadata Documents.
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
        # Native clients redirect to a loopback port of their choosing (RFC 8252).
        "ALLOW_LOCALHOST_LOOPBACK": True,
        # Client ID Metadata Documents (preferred) and dynamic registration (for older clients).
        "CIMD_ENABLED": True,
        "DCR_ENABLED": True,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        # Always ask the user; a dynamically registered client is not vouched for by anyone.
        "REQUEST_APPROVAL_PROMPT": "force",
    }
    settings.update(overrides)
    return settings
