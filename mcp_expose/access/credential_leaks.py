"""A credential sent in a URL is leaked: find it, revoke it, and keep a record of why.

A URL is written to access logs, proxies' logs and browser history before any code of ours can refuse the
request, so refusing it is not enough: the credential must stop working. Only a credential that authenticates
is revoked (the caller looks it up by hash, as on every request), and only the first one a request carries,
so a guessed or mangled value costs one lookup and changes nothing: nobody revokes another user's key by
sending its prefix.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from mcp_expose.access.credential_cache import credentials_changed
from mcp_expose.core.principal import Principal

logger = logging.getLogger("mcp_expose.auth")

# RFC 6750 §2.3 names `access_token`; `api_key` is what scripts reach for. Any value shaped like one of our API
# keys counts too, whatever the parameter is called.
URL_CREDENTIAL_PARAMETERS = frozenset({"access_token", "api_key"})
LEAK_REASON = "Sent in the query string of a request to the MCP endpoint: URLs are written to logs."


@dataclass(frozen=True, slots=True)
class UrlCredential:
    """A credential found in a query string (never shown: `repr` leaves the value out)."""

    value: str = field(repr=False)


def url_credential(query: Iterable[tuple[str, str]]) -> UrlCredential | None:
    """The first credential in the query's (name, value) pairs, or None."""
    from mcp_expose.models import ApiKey

    for name, value in query:
        if name in URL_CREDENTIAL_PARAMETERS or ApiKey.prefix_of(value) is not None:
            return UrlCredential(value)
    return None


def revoke_leaked(principal: Principal) -> bool:
    """Revoke the credential `principal` authenticated with, and record why; False when another request
    revoked it first. One conditional write claims it, so concurrent requests record it once.

    Every process forgets the credential after the commit, as with any other revocation (`credentials_changed`).
    """
    from mcp_expose.models import CredentialLeak

    now = timezone.now()
    with transaction.atomic():
        if principal.method == "api_key":
            claimed = _revoke_api_key(principal, now)
            kind, identifier = CredentialLeak.Kind.API_KEY, str(principal.api_key_prefix)
        else:
            claimed = _revoke_access_token(principal)
            kind, identifier = CredentialLeak.Kind.ACCESS_TOKEN, f"#{principal.credential.pk}"
        if not claimed:
            return False
        CredentialLeak.objects.create(
            kind=kind,
            identifier=identifier,
            user=principal.user,
            client_id=principal.client_id or "",
            reason=LEAK_REASON,
            revoked_at=now,
        )
        credentials_changed()
    # Names only: the key's prefix, or the token's number and the user and client behind it.
    logger.warning(
        "Revoked %s %s, %s: it was sent in a URL", CredentialLeak.Kind(kind).label, identifier, principal.label
    )
    return True


def _revoke_api_key(principal: Principal, now: datetime) -> bool:
    from mcp_expose.models import ApiKey

    if principal.api_key_id is None:
        return False
    return bool(
        ApiKey.objects.filter(pk=principal.api_key_id, revoked_at__isnull=True).update(
            revoked_at=now, revoked_reason=LEAK_REASON
        )
    )


def _revoke_access_token(principal: Principal) -> bool:
    """Delete the access token (how DOT revokes one) and revoke the refresh token issued with it, which would
    otherwise mint a new one."""
    from oauth2_provider.models import get_access_token_model, get_refresh_token_model

    token = principal.credential
    refresh_tokens = list(get_refresh_token_model().objects.filter(access_token_id=token.pk, revoked__isnull=True))
    deleted, _ = get_access_token_model().objects.filter(pk=token.pk).delete()
    if not deleted:
        return False
    for refresh_token in refresh_tokens:
        refresh_token.revoke()
    return True
