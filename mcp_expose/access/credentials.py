"""Turn the credentials on an MCP request into a `Principal`, or say precisely why not.

The authenticators of `MCP_EXPOSE["AUTHENTICATORS"]` (`access/authenticators`) are asked in order; the first
that claims the request decides. Nobody claiming it: the caller is anonymous where that is allowed, and else
refused as presenting no credential, an invalid bearer or another scheme. Runs in a sync thread hop (it reads
the database), except `authenticate_known`. Secrets never reach a log: only a key's public prefix is mentioned.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from mcp_expose.access.authenticators import (
    NEEDS_HOP,
    CredentialRequest,
    authenticate_api_key,
    get_authenticators,
    refused_after_failure,
)
from mcp_expose.access.credential_cache import cache as credential_cache
from mcp_expose.access.credential_leaks import UrlCredential, revoke_leaked, url_credential
from mcp_expose.access.failures import INVALID_TOKEN, LEAKED_IN_URL, MISSING, TOKEN_IN_URL, WRONG_SCHEME, AuthFailure
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import tidies_connections
from mcp_expose.core.outage import DependencyUnavailable
from mcp_expose.core.principal import Principal, anonymous_principal

__all__ = ["authenticate", "authenticate_api_key", "authenticate_known", "credential_cache"]

logger = logging.getLogger("mcp_expose.auth")


def authenticate(
    headers: Mapping[str, str],
    query: Iterable[tuple[str, str]] = (),
    resource: str | None = None,
    credentials_stamp: str | None = None,
) -> Principal | AuthFailure:
    """The caller behind `headers` (lower-cased names) calling the endpoint `resource`. Sync: touches the database.

    A credential in the `query` (name, value) pairs is refused, and revoked if it is one of ours that
    authenticates.
    """
    in_url = url_credential(query)
    if in_url is not None:
        return _refuse_url_credential(in_url, resource)
    return _run_chain(CredentialRequest(headers, resource, credentials_stamp))


def authenticate_known(
    headers: Mapping[str, str], query: Iterable[tuple[str, str]], resource: str | None, credentials_stamp: str
) -> Principal | AuthFailure | None:
    """`authenticate`'s answer when it needs no database (no credential, a malformed one, or one of ours this
    process knows under `credentials_stamp`); None when it does (always for a credential in the URL, which
    may have to be revoked, and whenever an authenticator that is not ours must be asked)."""
    if url_credential(query) is not None:
        return None
    request = CredentialRequest(headers, resource, credentials_stamp)
    for authenticator in get_authenticators():
        known = authenticator.authenticate_known(request)
        if known is NEEDS_HOP:
            return None
        if known is not None:
            return known
    return _unclaimed(request)


@tidies_connections
def _run_chain(request: CredentialRequest) -> Principal | AuthFailure:
    for authenticator in get_authenticators():
        try:
            answer = authenticator.authenticate(request)
        except DependencyUnavailable:
            raise  # 503 with Retry-After, at the edge
        except Exception as exc:  # noqa: BLE001  (a project's authenticator: refused, logged without secrets)
            return refused_after_failure(authenticator.label, exc)
        if answer is not None:
            return answer
    return _unclaimed(request)


def _unclaimed(request: CredentialRequest) -> Principal | AuthFailure:
    """No authenticator claimed the request: anonymous (where allowed) without credentials, else why not."""
    presented = request.authorization
    if presented is None:
        conf = get_settings()
        if conf.ALLOW_ANONYMOUS:
            return anonymous_principal(frozenset(conf.ANONYMOUS_SCOPES))
        return MISSING
    return INVALID_TOKEN if presented[0] == "bearer" else WRONG_SCHEME


@tidies_connections
def _refuse_url_credential(in_url: UrlCredential, resource: str | None) -> AuthFailure:
    """Looked up by hash like any bearer, without counting as a use; revoked only if it authenticates."""
    found = _look_up_bearer(in_url.value, resource, record_use=False)
    if isinstance(found, Principal) and revoke_leaked(found):
        return LEAKED_IN_URL
    return TOKEN_IN_URL


def _look_up_bearer(token: str, resource: str | None, *, record_use: bool = True) -> Principal | AuthFailure:
    """Ours only (what can be revoked): an API key, or else a DOT access token for `resource`."""
    from django.apps import apps

    from mcp_expose.models import ApiKey

    if ApiKey.prefix_of(token) is not None or resource is None or not apps.is_installed("oauth2_provider"):
        return authenticate_api_key(token, record_use=record_use)
    from mcp_expose.access.oauth_tokens import authenticate_access_token

    return authenticate_access_token(token, resource)
