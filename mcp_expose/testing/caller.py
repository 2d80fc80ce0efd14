"""Who the test client calls as, and the catalog it is served: made as the HTTP edge makes them.

The edge turns a credential into a `Principal` on every request: the user as the database has them now
(active, with their current permissions), the credential's scopes widened by `SCOPE_HIERARCHY`. A test
caller is made the same way at each connection, so a permission or a row the test changes is seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from mcp_expose.access.scopes import expand_scopes
from mcp_expose.access.stepup import missing_scopes
from mcp_expose.catalog.compiled import Catalog, CatalogProvider, provider
from mcp_expose.catalog.revision import current_revision
from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.principal import Principal, anonymous_principal
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.management.cli import local_principal
from mcp_expose.signals import catalog_changed


class HttpRefusal(McpExposeError):
    """What the HTTP edge would have answered instead of MCP: 401 (no usable credential) or 403 (an OAuth
    token lacking scopes: the step-up challenge naming `scopes`)."""

    def __init__(self, status: int, message: str, scopes: Iterable[str] = ()) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.scopes = frozenset(scopes)


@dataclass(frozen=True, slots=True)
class Caller:
    """The caller a test asked for. `user`: a user, a username, or None (anonymous). `scopes`: None for every
    scope the catalog's tools use (what `manage.py mcp_stdio --user` holds). `client_id`: an OAuth client's."""

    user: Any = None
    scopes: frozenset[str] | None = None
    client_id: str | None = None

    def principal(self, catalog: Catalog) -> Principal:
        """The principal as the edge would make it now. Sync: reads the user and their permissions."""
        if self.user is None:
            conf = get_settings()
            if not conf.ALLOW_ANONYMOUS:
                raise HttpRefusal(401, "a request without credentials is refused: ALLOW_ANONYMOUS is off.")
            return anonymous_principal(expand_scopes(conf.ANONYMOUS_SCOPES))
        username = self.user if isinstance(self.user, str) else self.user.get_username()
        granted = " ".join(sorted(expand_scopes(self.scopes))) if self.scopes is not None else None
        try:
            principal = local_principal(username, granted, catalog, via="test")
        except CommandError as exc:  # no such user, or an inactive one: their credentials are refused
            raise HttpRefusal(401, f"{exc} Their credentials would be refused.") from None
        if self.client_id is None:
            return principal
        scopes = principal.scopes
        base = get_settings().BASE_SCOPE
        if self.scopes is None and base:
            # A token of this server always holds the base scope; without it the edge refuses every request.
            scopes = expand_scopes(scopes | {base})
        return replace(principal, scopes=scopes, method="oauth", client_id=self.client_id, via="")


def refusal_at_edge(principal: Principal, catalog: Catalog, tool_name: str | None = None) -> HttpRefusal | None:
    """The 403 the edge answers an OAuth caller that lacks the base scope, or only scopes, for `tool_name`."""
    lacking = missing_scopes(principal, catalog, tool_name)
    if not lacking:
        return None
    return HttpRefusal(403, f"insufficient_scope: the client is asked to step up to {sorted(lacking)}.", lacking)


class CatalogView:
    """The catalog as the caller's connection sees it, compiled for this client.

    The served catalog is recompiled when the revision stamp moves, which a saved row does after its
    transaction commits. Inside a test's transaction nothing commits, so a row the test changed is seen
    through the changes still waiting to announce it; and settings the test overrides are seen too.
    """

    def __init__(self, registry: CapabilityRegistry | None = None) -> None:
        self.registry = registry if registry is not None else provider.registry
        self._key: tuple[str, int, object] | None = None
        self._catalog: Catalog | None = None

    def get(self) -> Catalog:
        """Sync: may read the rows."""
        # The settings object itself, not its id: kept here, no later one can take its place in memory.
        key = (current_revision(), _announcements_waiting(), get_settings())
        if self._catalog is None or key != self._key:
            self._catalog = CatalogProvider(self.registry).get_sync(key[0])
            self._key = key
        return self._catalog


def _announcements_waiting() -> int:
    """How many catalog changes this thread's connection holds until its transaction commits."""
    connection = connections[DEFAULT_DB_ALIAS]
    return sum(1 for _, callback, *_ in connection.run_on_commit if callback is catalog_changed)
