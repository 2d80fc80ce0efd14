"""What a user should know before approving an OAuth client: who it is, where the code goes, what it unlocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcp_expose.catalog.compiled import Catalog

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


@dataclass(frozen=True)
class ScopeGrant:
    scope: str
    description: str
    tools: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ConsentDetails:
    client_name: str
    registration: str  # "manual", "dynamic" or "metadata document"
    verified: bool
    redirect_host: str
    cimd_domain: str | None
    loopback_only: bool
    scopes: list[ScopeGrant]


def consent_details(application: Any, redirect_uri: str, scopes: list[str], catalog: Catalog) -> ConsentDetails:
    from oauth2_provider.settings import oauth2_settings

    source = getattr(application, "registration_source", "manual") or "manual"
    registration = {"dcr": "dynamic", "cimd": "metadata document"}.get(source, "manual")
    redirect_host = urlsplit(redirect_uri).hostname or ""
    registered_hosts = {urlsplit(uri).hostname for uri in (application.redirect_uris or "").split()}
    cimd_domain = urlsplit(application.client_id).hostname if source == "cimd" else None
    descriptions = oauth2_settings.SCOPES
    grants = [
        ScopeGrant(
            scope=scope,
            description=str(descriptions.get(scope, scope)),
            tools=[entry.title or entry.name for entry in catalog.tools if scope in entry.scopes],
        )
        for scope in scopes
    ]
    return ConsentDetails(
        client_name=application.name or application.client_id,
        registration=registration,
        verified=registration == "manual",
        redirect_host=redirect_host,
        cimd_domain=cimd_domain,
        loopback_only=({host for host in registered_hosts if host} | {redirect_host}) <= LOOPBACK_HOSTS,
        scopes=grants,
    )
