"""Who we are as an OAuth resource: the canonical URI, its metadata (RFC 9728), and challenges."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import Endpoint, default_endpoint
from mcp_expose.core.requests import request_scheme

DEFAULT_PORTS = {"http": 80, "https": 443}
PRM_PREFIX = "/.well-known/oauth-protected-resource"


@functools.lru_cache(maxsize=256)
def canonical_uri(uri: str) -> str:
    """RFC 8707 / MCP canonical form: lower-case scheme and host, no default port, fragment or trailing slash."""
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def request_origin(scheme: str, headers: Mapping[str, str]) -> str:
    return canonical_uri(f"{request_scheme(scheme, headers)}://{headers.get('host', '')}")


def resource_uri(scheme: str, headers: Mapping[str, str], endpoint: Endpoint | None = None) -> str:
    """An endpoint's canonical resource URI (the default endpoint's unless named): its configured RESOURCE, or
    derived from the request's origin and the endpoint's path."""
    endpoint = endpoint if endpoint is not None else default_endpoint()
    if endpoint.resource:
        return canonical_uri(endpoint.resource)
    return canonical_uri(request_origin(scheme, headers) + endpoint.path)


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the well-known path inserted between the origin and the resource's path."""
    parts = urlsplit(resource)
    return urlunsplit((parts.scheme, parts.netloc, PRM_PREFIX + parts.path, "", ""))


def authorization_servers(origin: str) -> list[str]:
    configured = get_settings().AUTHORIZATION_SERVERS
    if configured:
        return list(configured)
    from django.urls import NoReverseMatch, reverse
    from oauth2_provider.settings import oauth2_settings

    if oauth2_settings.OIDC_ISS_ENDPOINT:
        return [oauth2_settings.OIDC_ISS_ENDPOINT]
    try:
        authorize = reverse("oauth2_provider:authorize")
    except NoReverseMatch:
        return []
    return [origin + authorize.removesuffix("authorize/").rstrip("/")]


def protected_resource_metadata(resource: str, origin: str, endpoint: Endpoint | None = None) -> dict[str, Any]:
    conf = get_settings()
    endpoint = endpoint if endpoint is not None else default_endpoint()
    document: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": authorization_servers(origin),
        "scopes_supported": list(conf.SCOPES_SUPPORTED or [conf.BASE_SCOPE]),
        "bearer_methods_supported": ["header"],
    }
    if endpoint.resource_name:
        document["resource_name"] = endpoint.resource_name
    return document


def bearer_challenge(
    *, resource: str, scopes: Iterable[str], error: str | None = None, description: str | None = None
) -> str:
    """A `WWW-Authenticate` value pointing clients at our metadata and the scopes to ask for."""
    params = []
    if error is not None:
        params.append(f'error="{error}"')
        if description:
            params.append(f'error_description="{_quoted(description)}"')
    params.append(f'resource_metadata="{metadata_url(resource)}"')
    scope_text = " ".join(sorted(set(scopes)))
    if scope_text:
        params.append(f'scope="{scope_text}"')
    return "Bearer " + ", ".join(params)


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
