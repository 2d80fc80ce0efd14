"""Turn the credentials on an MCP request into a `Principal`, or say precisely why not.

Runs in a sync thread hop (it reads the database). Secrets never reach a log:
only a key's public prefix is ever mentioned.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta

from django.utils import timezone

from mcp_expose.access.credential_cache import cache as credential_cache
from mcp_expose.access.credential_cache import credentials_revision
from mcp_expose.access.credential_leaks import UrlCredential, revoke_leaked, url_credential
from mcp_expose.access.failures import INVALID_TOKEN, LEAKED_IN_URL, MISSING, TOKEN_IN_URL, WRONG_SCHEME, AuthFailure
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import tidies_connections
from mcp_expose.core.outage import DependencyUnavailable, database_unavailable
from mcp_expose.core.principal import Principal, anonymous_principal, principal_for_user

logger = logging.getLogger("mcp_expose.auth")


def authenticate(
    headers: Mapping[str, str],
    query: Iterable[tuple[str, str]] = (),
    resource: str | None = None,
    credentials_stamp: str | None = None,
) -> Principal | AuthFailure:
    """The caller behind `headers` (lower-cased names). Sync: touches the database.

    A bearer shaped like one of our API keys is checked as an API key; anything
    else as an OAuth access token issued for `resource`. A credential in the
    `query` (name, value) pairs is refused, and revoked if it authenticates.
    """
    in_url = url_credential(query)
    if in_url is not None:
        return _refuse_url_credential(in_url, resource)
    presented = _presented(headers)
    if not isinstance(presented, str):
        return presented
    return _authenticate_bearer(presented, resource, credentials_stamp)


def authenticate_known(
    headers: Mapping[str, str], query: Iterable[tuple[str, str]], resource: str | None, credentials_stamp: str
) -> Principal | AuthFailure | None:
    """`authenticate`'s answer when it needs no database (no credential, a malformed one, or one this
    process knows under `credentials_stamp`); None when it does (always for a credential in the URL, which
    may have to be revoked)."""
    if url_credential(query) is not None:
        return None
    presented = _presented(headers)
    if not isinstance(presented, str):
        return presented
    return credential_cache.get(presented, resource, credentials_stamp)


@tidies_connections
def _refuse_url_credential(in_url: UrlCredential, resource: str | None) -> AuthFailure:
    """Looked up by hash like any bearer, without counting as a use; revoked only if it authenticates."""
    found = _look_up_bearer(in_url.value, resource, record_use=False)
    if isinstance(found, Principal) and revoke_leaked(found):
        return LEAKED_IN_URL
    return TOKEN_IN_URL


def _presented(headers: Mapping[str, str]) -> Principal | AuthFailure | str:
    """The bearer credential presented, or what to answer without one (anonymous, or why not)."""
    authorization = headers.get("authorization")
    if not authorization:
        conf = get_settings()
        if conf.ALLOW_ANONYMOUS:
            return anonymous_principal(frozenset(conf.ANONYMOUS_SCOPES))
        return MISSING
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer":
        return WRONG_SCHEME
    if not token:
        return INVALID_TOKEN
    return token


@tidies_connections
def _authenticate_bearer(token: str, resource: str | None, stamp: str | None) -> Principal | AuthFailure:
    """The credential's owner, from this process's memory while nothing about credentials changed."""
    stamp = stamp if stamp is not None else credentials_revision()
    known = credential_cache.get(token, resource, stamp)
    if known is not None:
        return known
    try:
        result = _look_up_bearer(token, resource)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        # The database cannot say who this is: a credential this process knew stays known for a grace period.
        held = credential_cache.get(token, resource, stamp, grace=get_settings().CREDENTIAL_OUTAGE_GRACE_SECONDS)
        if held is None:
            raise DependencyUnavailable("database", "checking a credential this process does not know") from exc
        return held
    if isinstance(result, Principal):
        credential_cache.put(token, resource, stamp, result)
    return result


def _look_up_bearer(token: str, resource: str | None, *, record_use: bool = True) -> Principal | AuthFailure:
    from django.apps import apps

    from mcp_expose.models import ApiKey

    if ApiKey.prefix_of(token) is not None or resource is None or not apps.is_installed("oauth2_provider"):
        return authenticate_api_key(token, record_use=record_use)
    from mcp_expose.access.oauth_tokens import authenticate_access_token

    return authenticate_access_token(token, resource)


def authenticate_api_key(secret: str, *, record_use: bool = True) -> Principal | AuthFailure:
    from mcp_expose.models import ApiKey

    prefix = ApiKey.prefix_of(secret)
    if prefix is None:
        return INVALID_TOKEN
    key = ApiKey.objects.select_related("user").filter(prefix=prefix).first()
    if key is None or not key.matches(secret):
        logger.info("Refused an API key with prefix %s: unknown or wrong secret", prefix)
        return INVALID_TOKEN
    if not key.is_usable:
        logger.info("Refused API key %s: revoked, expired or its user is inactive", prefix)
        return INVALID_TOKEN
    if record_use:
        try:
            _touch(key)
        except Exception as exc:
            if not database_unavailable(exc):
                raise
            logger.debug("Could not record the use of API key %s: the database is unavailable", prefix)
    return principal_for_user(
        key.user, expand_scopes(key.scope_set), "api_key", api_key_id=key.pk, api_key_prefix=key.prefix, credential=key
    )


def _touch(key: object) -> None:
    """Record use, at most once per interval, with one UPDATE and no signals."""
    from mcp_expose.models import ApiKey

    now = timezone.now()
    interval = timedelta(seconds=get_settings().API_KEY_LAST_USED_INTERVAL)
    last = getattr(key, "last_used_at", None)
    if last is None or now - last >= interval:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)  # type: ignore[attr-defined]
