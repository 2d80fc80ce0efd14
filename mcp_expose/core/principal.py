"""Who is calling: the one object every authorization decision looks at."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# "drf": a project's DRF authentication class accepted the credential (`authenticator` names it); "session": Django's
# session cookie, where MCP_EXPOSE["SESSION_AUTH"] allows it.
AuthMethod = Literal["api_key", "oauth", "anonymous", "local", "drf", "session"]
# Where the edge puts the authenticated caller in an ASGI scope, for the SDK's handlers and the session manager.
PRINCIPAL_SCOPE_KEY = "mcp_expose.principal"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    `permissions` is the user's Django permission set, loaded once when the
    caller is authenticated so that policy decisions never touch the database.
    """

    user: Any
    scopes: frozenset[str] = frozenset()
    method: AuthMethod = "anonymous"
    permissions: frozenset[str] = frozenset()
    is_superuser: bool = False
    # Public identifiers only: never a secret.
    api_key_id: int | None = None
    api_key_prefix: str | None = None
    client_id: str | None = None
    credential: Any = field(default=None, repr=False, compare=False)
    # A local caller presents no credential; this says how it came in instead: "stdio", "command", "admin".
    via: str = ""
    # The name of the authenticator that accepted the credential, when it is not one of ours (a DRF class's name).
    authenticator: str = ""

    @property
    def is_authenticated(self) -> bool:
        return self.method != "anonymous"

    @property
    def credential_kind(self) -> str:
        """What the caller came with, for people and tools: "api_key", "oauth", "anonymous", or a local
        caller's way in (`via`)."""
        return self.via or self.method

    @property
    def label(self) -> str:
        """A short, secret-free description for logs and admin pages."""
        who = getattr(self.user, "get_username", lambda: "anonymous")() or "anonymous"
        if self.method == "api_key":
            return f"{who} (API key {self.api_key_prefix})"
        if self.method == "oauth":
            return f"{who} (OAuth client {self.client_id})"
        if self.authenticator:
            return f"{who} ({self.method} {self.authenticator})"
        return f"{who} ({self.method})"

    def has_scopes(self, required: frozenset[str]) -> bool:
        return required <= self.scopes

    def has_perms(self, required: frozenset[str]) -> bool:
        if not required:
            return True
        active = getattr(self.user, "is_active", False)
        return bool(active) and (self.is_superuser or required <= self.permissions)


def load_user_permissions(user: Any) -> frozenset[str]:
    """The user's Django permissions; runs queries, so call it inside a sync hop."""
    if not getattr(user, "is_active", False) or getattr(user, "is_anonymous", True):
        return frozenset()
    return frozenset(user.get_all_permissions())


def principal_for_user(user: Any, scopes: frozenset[str], method: AuthMethod, **extra: Any) -> Principal:
    """A principal for `user`, with permissions loaded. Sync: runs queries."""
    return Principal(
        user=user,
        scopes=scopes,
        method=method,
        permissions=load_user_permissions(user),
        is_superuser=bool(getattr(user, "is_superuser", False) and getattr(user, "is_active", False)),
        **extra,
    )


def anonymous_principal(scopes: frozenset[str] = frozenset()) -> Principal:
    from django.contrib.auth.models import AnonymousUser

    return Principal(user=AnonymousUser(), scopes=scopes, method="anonymous")
