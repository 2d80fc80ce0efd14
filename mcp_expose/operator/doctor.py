"""Probe a deployed MCP endpoint the way clients do, and say what would break them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx2

from mcp_expose.access.protected_resource import PRM_PREFIX, canonical_uri

PROBE_ORIGIN = "https://mcp-doctor.invalid"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "mcp_doctor", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass(frozen=True)
class Finding:
    passed: bool
    check: str
    detail: str


def challenge_params(header: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def diagnose(url: str, http: httpx2.Client, *, root_form: bool = True) -> Iterator[Finding]:
    """Findings about the endpoint at `url`; `root_form`: whether the origin's root metadata should name it too
    (not for a site's second endpoint)."""
    resource = canonical_uri(url)
    parts = urlsplit(resource)
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))

    response = http.post(url, json=INITIALIZE, headers=HEADERS)
    if response.is_redirect:
        yield Finding(
            False,
            "no redirect",
            f"{url} answers {response.status_code} to {response.headers.get('location')}; "
            "many clients do not follow redirects for MCP (serve the exact path)",
        )
    else:
        yield Finding(True, "no redirect", f"{url} answers {response.status_code} directly")
    challenge = response.headers.get("www-authenticate", "")
    params = challenge_params(challenge)
    if response.status_code == 401 and challenge.lower().startswith("bearer") and "resource_metadata" in params:
        scope = params.get("scope")
        yield Finding(True, "401 challenge", f"Bearer with resource_metadata, scope={scope!r}")
        if "error" in params:
            yield Finding(False, "401 challenge", "error= is set although no token was presented (RFC 6750 §3.1)")
    else:
        yield Finding(
            False,
            "401 challenge",
            f"expected 401 with 'WWW-Authenticate: Bearer resource_metadata=...', "
            f"got {response.status_code} {challenge!r}",
        )

    metadata = None
    # The root form names one resource per origin: a site with several endpoints serves it for the default one.
    forms = [("metadata (path form)", PRM_PREFIX + parts.path)] + (
        [("metadata (root form)", PRM_PREFIX)] if root_form else []
    )
    for label, path in forms:
        document = _json(http, origin + path)
        if document is None:
            yield Finding(False, label, f"no JSON document at {origin + path}")
            continue
        problems = _metadata_problems(document, resource)
        yield Finding(not problems, label, "; ".join(problems) or f"resource {document['resource']}")
        metadata = metadata or document
    yield from _authorization_server(http, metadata)

    foreign = http.post(url, json=INITIALIZE, headers={**HEADERS, "Origin": PROBE_ORIGIN})
    # Only a refusal that the Origin caused counts: the same request without it must not get 403.
    refused = foreign.status_code == 403 and response.status_code != 403
    yield Finding(
        refused,
        "foreign Origin refused",
        f"a request from {PROBE_ORIGIN} got {foreign.status_code}, without Origin {response.status_code} "
        "(expected 403, and not 403)",
    )


def _json(http: httpx2.Client, url: str) -> dict | None:
    try:
        response = http.get(url)
        document = response.json() if response.status_code == 200 else None
    except (httpx2.HTTPError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _metadata_problems(document: dict, resource: str) -> list[str]:
    problems = []
    if canonical_uri(str(document.get("resource", ""))) != resource:
        problems.append(f"resource is {document.get('resource')!r}, expected {resource!r}")
    if not document.get("authorization_servers"):
        problems.append("no authorization_servers")
    if document.get("bearer_methods_supported", ["header"]) != ["header"]:
        problems.append("bearer_methods_supported should be ['header'] only")
    if "offline_access" in document.get("scopes_supported", []):
        problems.append("scopes_supported must not list offline_access")
    return problems


def _authorization_server(http: httpx2.Client, metadata: dict | None) -> Iterator[Finding]:
    servers = (metadata or {}).get("authorization_servers") or []
    if not servers:
        yield Finding(False, "authorization server", "no authorization server to check")
        return
    issuer = servers[0]
    parts = urlsplit(issuer)
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    path = parts.path.rstrip("/")
    candidates = [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]
    document = next((found for url in candidates if (found := _json(http, url)) is not None), None)
    if document is None:
        yield Finding(False, "authorization server", f"no metadata for {issuer} at {', '.join(candidates)}")
        return
    yield Finding(
        document.get("issuer") == issuer, "issuer", f"metadata issuer {document.get('issuer')!r}, expected {issuer!r}"
    )
    methods = document.get("code_challenge_methods_supported") or []
    yield Finding(methods == ["S256"], "PKCE S256 only", f"code_challenge_methods_supported = {methods}")
    yield Finding(
        document.get("client_id_metadata_document_supported") is True,
        "client ID metadata documents",
        f"client_id_metadata_document_supported = {document.get('client_id_metadata_document_supported')}",
    )
    auth_methods = document.get("token_endpoint_auth_methods_supported") or []
    yield Finding("none" in auth_methods, "public clients", f"token_endpoint_auth_methods_supported = {auth_methods}")
    registration = document.get("registration_endpoint")
    yield Finding(bool(registration), "registration endpoint", str(registration or "none advertised"))
