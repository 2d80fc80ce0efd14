"""What the management commands share: who the caller is when there is no HTTP request."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from mcp_expose.catalog.compiled import Catalog
from mcp_expose.core.principal import Principal, principal_for_user


def local_principal(username: str, scopes: str | None, catalog: Catalog, via: str = "command") -> Principal:
    """A principal for `username` on the command line (`via`: "command", or "stdio" when it serves a client).

    Whoever can run manage.py already holds every credential, so scopes default
    to all that the catalog uses; `scopes` narrows them to test what a key or
    token with exactly those scopes would see. Django permissions always apply.
    """
    user_model = get_user_model()
    try:
        user = user_model._default_manager.get_by_natural_key(username)
    except user_model.DoesNotExist:
        raise CommandError(f"No user named {username!r}.") from None
    if not user.is_active:
        raise CommandError(f"The user {username!r} is inactive.")
    granted = (
        frozenset(scopes.split())
        if scopes is not None
        else frozenset().union(*(entry.scopes for entry in catalog.tools))
    )
    return principal_for_user(user, granted, "local", via=via)
